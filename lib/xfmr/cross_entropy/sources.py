"""Toy sequence sources with known conditionals: first-order Markov chains on $K$ states.

A chain is an initial distribution $\\pi_0 \\in \\Delta^{K-1}$ and a row-stochastic transition
matrix $P$, $P_{ij} = p(x_{t+1} = j \\mid x_t = i)$. A sequence $x_1, \\dots, x_T$ has

$$
\\log p(x_{1:T}) = \\log \\pi_0(x_1) + \\sum_{t=1}^{T-1} \\log P_{x_t x_{t+1}},
$$

and its exact next-token conditionals are $p(\\cdot \\mid x_{1:t}) = P_{x_t, :}$ (and $\\pi_0$
for the first token). :func:`long_tailed_chain` builds a chain whose rows follow a Zipf law,
so every state has a few frequent and several rare successors.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from xfmr.cross_entropy.divergences import check_distribution
from xfmr.core.validate import (check_array, check_dtype_enabled, check_float_dtype, check_int, check_real,
                                check_tokens)

__all__ = [
    "MarkovChain",
    "markov_chain",
    "long_tailed_chain",
    "stationary_distribution",
    "sample_chain",
    "sequence_log_prob",
    "next_token_conditionals",
    "transition_counts",
]


class MarkovChain(NamedTuple):
    """A first-order Markov chain: ``initial`` $(K,)$ and row-stochastic ``transition`` $(K, K)$."""

    initial: jax.Array
    transition: jax.Array

    @property
    def n_states(self) -> int:
        return self.initial.shape[-1]


def markov_chain(initial, transition) -> MarkovChain:
    """Validated :class:`MarkovChain`.

    Raises:
        ValueError: ``initial`` not a distribution of shape ``(K,)``; ``transition`` not
            ``(K, K)`` or a row off the simplex.
    """
    initial = check_distribution(initial, "initial")
    transition = check_distribution(transition, "transition")
    check_array(initial, "initial", ndim=1)
    k = initial.shape[0]
    if transition.shape != (k, k):
        raise ValueError(f"transition must have shape (K, K) = ({k}, {k}), got {transition.shape}")
    return MarkovChain(initial, transition)


def long_tailed_chain(
    key: jax.Array,
    n_states: int,
    exponent: float = 1.5,
    dtype=jnp.float64,
) -> MarkovChain:
    """A chain with Zipf-law rows and uniform initial distribution, of
    ``dtype`` (float64, the
    default, needs ``jax_enable_x64``).

    Row $i$ ranks the $K$ successors by a random permutation $\\sigma_i$
    (from ``key``) and sets
    $P_{i, \\sigma_i(r)} \\propto r^{-s}$ for ranks $r = 1, \\dots, K$
    and exponent $s$.

    Raises:
        ValueError: ``n_states < 2`` or ``exponent <= 0``.
    """
    n_states = check_int(n_states, "n_states", minimum=2)
    exponent = check_real(
        exponent, "exponent", minimum=0.0, strict_minimum=True
    )
    dtype = check_dtype_enabled(check_float_dtype(dtype))
    ranks = jnp.arange(1, n_states + 1, dtype=dtype)
    zipf = ranks**-exponent
    zipf = zipf / zipf.sum()
    perms = jax.vmap(lambda k: jax.random.permutation(k, n_states))(
        jax.random.split(key, n_states)
    )
    transition = (
        jnp.zeros((n_states, n_states), dtype)
        .at[jnp.arange(n_states)[:, None], perms]
        .set(zipf)
    )
    initial = jnp.full((n_states,), 1.0 / n_states, dtype)
    return MarkovChain(initial, transition)


def stationary_distribution(chain: MarkovChain) -> jax.Array:
    """The stationary distribution $\\pi = \\pi P$ (left eigenvector for eigenvalue 1), ``(K,)``.

    Solved as the least-squares solution of $[(P^\\top - I); \\mathbf{1}^\\top]\\,\\pi = [0; 1]$.
    """
    p = chain.transition
    k = p.shape[0]
    a = jnp.concatenate([p.T - jnp.eye(k, dtype=p.dtype), jnp.ones((1, k), p.dtype)])
    b = jnp.concatenate([jnp.zeros(k, p.dtype), jnp.ones(1, p.dtype)])
    pi = jnp.linalg.lstsq(a, b)[0]
    pi = jnp.clip(pi, 0.0, None)
    return pi / pi.sum()


def sample_chain(chain: MarkovChain, key: jax.Array, n_sequences: int, length: int) -> jax.Array:
    """Draw ``n_sequences`` independent sequences of ``length`` tokens: ``(n_sequences, length)`` int32.

    Ancestral sampling $x_1 \\sim \\pi_0$, $x_{t+1} \\sim P_{x_t, :}$; jit-compatible for static sizes.
    """
    n_sequences = check_int(n_sequences, "n_sequences", minimum=1)
    length = check_int(length, "length", minimum=1)
    log_p = jnp.log(chain.transition)
    k0, k_rest = jax.random.split(key)
    x1 = jax.random.categorical(k0, jnp.log(chain.initial), shape=(n_sequences,))

    def step(x, k):
        nxt = jax.random.categorical(k, log_p[x])
        return nxt, nxt

    _, rest = jax.lax.scan(step, x1, jax.random.split(k_rest, length - 1))
    return jnp.concatenate([x1[:, None], rest.T], axis=1).astype(jnp.int32)


def sequence_log_prob(chain: MarkovChain, tokens) -> jax.Array:
    """Exact $\\log p(x_{1:T})$ under the chain: ``(..., T) -> (...)``."""
    tokens = check_tokens(tokens, "tokens", n_states=chain.n_states)
    first = jnp.log(chain.initial)[tokens[..., 0]]
    steps = jnp.log(chain.transition)[tokens[..., :-1], tokens[..., 1:]]
    return first + steps.sum(-1)


def next_token_conditionals(chain: MarkovChain, tokens) -> jax.Array:
    """Exact conditionals $p(x_t = \\cdot \\mid x_{1:t-1})$ for $t = 1..T$: ``(..., T) -> (..., T, K)``.

    Row $t = 1$ is $\\pi_0$; row $t > 1$ is $P_{x_{t-1}, :}$.
    """
    tokens = check_tokens(tokens, "tokens", n_states=chain.n_states)
    first = jnp.broadcast_to(chain.initial, tokens.shape[:-1] + (1, chain.n_states))
    return jnp.concatenate([first, chain.transition[tokens[..., :-1]]], axis=-2)


def transition_counts(tokens, n_states: int) -> jax.Array:
    """Counts $n_{ij} = \\#\\{(t, \\text{seq}) : x_t = i, x_{t+1} = j\\}$: ``(..., T) -> (K, K)`` int32."""
    n_states = check_int(n_states, "n_states", minimum=1)
    tokens = check_tokens(tokens, "tokens", n_states=n_states)
    flat = (tokens[..., :-1] * n_states + tokens[..., 1:]).reshape(-1)
    return jnp.bincount(flat, length=n_states * n_states).reshape(n_states, n_states).astype(jnp.int32)
