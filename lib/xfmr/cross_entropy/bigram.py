"""A tiny next-token model: a bigram (first-order) softmax model, and its value-regression twin.

Parameters are logits: ``initial`` $b \\in \\mathbb{R}^K$ for the first token and
``transition`` $W \\in \\mathbb{R}^{K \\times K}$ for the rest,

$$
q(x_1) = \\mathrm{softmax}(b)_{x_1}, \\qquad q(x_{t+1} \\mid x_{1:t}) = \\mathrm{softmax}(W_{x_t, :})_{x_{t+1}},
$$

so by the chain rule $\\log q(x_{1:T}) = \\sum_t \\log q(x_t \\mid x_{1:t-1})$ and the summed
next-token cross-entropy is exactly $-\\log q(x_{1:T})$. The model is a Markov chain
(:func:`as_markov_chain`) and can be sampled with :func:`xfmr.cross_entropy.sources.sample_chain`.

The *value* model predicts one number per context, $\\hat v(x_{1:t}) = v_{x_t}$ (and $v_0$ for
the first token), for training with squared error on the token's value.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.cross_entropy.sources import MarkovChain
from xfmr.core.validate import check_dtype_enabled, check_float_dtype, check_int, check_tokens

__all__ = [
    "init_logit_params",
    "next_token_logits",
    "log_prob",
    "next_token_loss",
    "as_markov_chain",
    "init_value_params",
    "next_token_values",
]


def init_logit_params(key: jax.Array, n_states: int, *, scale: float = 0.01, dtype=jnp.float64) -> dict:
    """Logits $b \\sim \\mathcal{N}(0, s^2 I_K)$, $W \\sim \\mathcal{N}(0, s^2 I_{K^2})$ (``scale`` $s$), of ``dtype``
    (float64, the default, needs ``jax_enable_x64``)."""
    n_states = check_int(n_states, "n_states", minimum=2)
    dtype = check_dtype_enabled(check_float_dtype(dtype))
    kb, kw = jax.random.split(key)
    return {
        "initial": scale * jax.random.normal(kb, (n_states,), dtype),
        "transition": scale * jax.random.normal(kw, (n_states, n_states), dtype),
    }


def _n_states(params: dict) -> int:
    if not (isinstance(params, dict) and {"initial", "transition"} <= params.keys()):
        raise ValueError("params must be a dict with keys 'initial' (K,) and 'transition' (K, K)")
    b, w = params["initial"], params["transition"]
    k = jnp.shape(b)[-1] if jnp.ndim(b) == 1 else -1
    if k < 1 or jnp.shape(w) != (k, k):
        raise ValueError(
            f"params must hold 'initial' (K,) and 'transition' (K, K), got {jnp.shape(b)} and {jnp.shape(w)}"
        )
    return k


def next_token_logits(params: dict, tokens) -> jax.Array:
    """Logits of $q(x_t \\mid x_{1:t-1})$ for every position: ``(..., T) -> (..., T, K)``.

    Position 0 gets $b$ (no context), position $t > 0$ gets $W_{x_{t-1}, :}$.
    """
    k = _n_states(params)
    tokens = check_tokens(tokens, "tokens", n_states=k)
    b = jnp.broadcast_to(params["initial"], tokens.shape[:-1] + (1, k))
    return jnp.concatenate([b, params["transition"][tokens[..., :-1]]], axis=-2)


def log_prob(params: dict, tokens) -> jax.Array:
    """Model log-likelihood of whole sequences by the chain rule: ``(..., T) -> (...)``."""
    logp = jax.nn.log_softmax(next_token_logits(params, tokens), axis=-1)
    return jnp.take_along_axis(logp, tokens[..., None], axis=-1)[..., 0].sum(-1)


def next_token_loss(params: dict, tokens) -> jax.Array:
    """Mean next-token cross-entropy over all sequences and positions
    (scalar), in nats/token."""
    tokens = jnp.asarray(tokens)
    return -log_prob(params, tokens).mean() / tokens.shape[-1]


def as_markov_chain(params: dict) -> MarkovChain:
    """The model as a :class:`~xfmr.cross_entropy.sources.MarkovChain`: $(\\mathrm{softmax}(b), \\mathrm{softmax}(W))$."""
    _n_states(params)
    return MarkovChain(jax.nn.softmax(params["initial"]), jax.nn.softmax(params["transition"], axis=-1))


def init_value_params(n_states: int, dtype=jnp.float64) -> dict:
    """Zero-initialised value model of ``dtype``: ``initial`` $v_0$ (scalar) and ``transition`` $v$ $(K,)$."""
    n_states = check_int(n_states, "n_states", minimum=2)
    dtype = check_dtype_enabled(check_float_dtype(dtype))
    return {"initial": jnp.zeros((), dtype), "transition": jnp.zeros((n_states,), dtype)}


def next_token_values(params: dict, tokens) -> jax.Array:
    """Predicted value of $x_t$ from its context for every position: ``(..., T) -> (..., T)``."""
    v = params.get("transition") if isinstance(params, dict) else None
    if v is None or jnp.ndim(v) != 1 or jnp.ndim(params.get("initial")) != 0:
        raise ValueError("params must be a dict with 'initial' () and 'transition' (K,) (a value model)")
    tokens = check_tokens(tokens, "tokens", n_states=jnp.shape(v)[0])
    v0 = jnp.broadcast_to(params["initial"], tokens.shape[:-1] + (1,))
    return jnp.concatenate([v0, v[tokens[..., :-1]]], axis=-1)
