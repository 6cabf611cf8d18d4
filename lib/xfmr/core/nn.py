"""Pieces shared by the book's transformers: the GPT of Part I, the PFN of Part IV and the
amortised structure learner of Part VI, and the cross-entropy they train with.

One parameter convention for all three (the GPT's):

- a dense layer is two arrays, ``x @ W + b``: :func:`dense`;
- a LayerNorm is ``{"scale": (d,), "bias": (d,)}``:
  $\\mathrm{LN}(x) = (x - \\bar x)\\, (\\mathrm{var}(x) + \\epsilon)^{-1/2} \\odot \\mathrm{scale} + \\mathrm{bias}$
  over the last axis, with $\\epsilon$ = :data:`LN_EPS`: :func:`layer_norm`;
- a multi-head attention is ``{"W_Q", "W_K", "W_V", "W_O": (d, d), "b_Q", "b_K", "b_V", "b_O": (d,)}``,
  head $h$ using columns ``h*d_head:(h+1)*d_head`` of ``W_Q, W_K, W_V`` and the same rows of
  ``W_O``: :func:`multi_head_attention`.

A model module built from them offers ``init_params(key, config)`` and
``forward(params, x, config)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.core.validate import check_labels, check_logits

__all__ = ["LN_EPS", "dense", "layer_norm", "init_layer_norm", "init_attention", "multi_head_attention",
           "softmax_cross_entropy"]

LN_EPS = 1e-5


def dense(x: jax.Array, W: jax.Array, b: jax.Array) -> jax.Array:
    """An affine map of the last axis, ``x @ W + b``: ``(..., n_in) -> (..., n_out)``."""
    return x @ W + b


def layer_norm(x: jax.Array, p: dict, eps: float = LN_EPS) -> jax.Array:
    """LayerNorm over the last axis: ``(x - mean) * rsqrt(var + eps) * scale + bias``, ``(..., d)``."""
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + jnp.asarray(eps, x.dtype)) * p["scale"] + p["bias"]


def init_layer_norm(d: int, dtype=jnp.float32) -> dict:
    """LayerNorm parameters at initialisation: scale one, bias zero."""
    return {"scale": jnp.ones((d,), dtype), "bias": jnp.zeros((d,), dtype)}


def init_attention(keys, d: int, std: float, dtype=jnp.float32, *, zero_output: bool = False) -> dict:
    """Attention parameters: ``W_Q, W_K, W_V, W_O`` drawn ``N(0, std^2)`` from the next four of
    the iterator ``keys`` (``W_O`` zero when ``zero_output``, its key still drawn), biases zero."""
    params = {name: std * jax.random.normal(next(keys), (d, d), dtype) for name in ("W_Q", "W_K", "W_V")}
    W_O_key = next(keys)
    params["W_O"] = jnp.zeros((d, d), dtype) if zero_output else std * jax.random.normal(W_O_key, (d, d), dtype)
    params.update({f"b_{n}": jnp.zeros((d,), dtype) for n in "QKVO"})
    return params


def multi_head_attention(
    p: dict,
    x: jax.Array,
    n_heads: int,
    *,
    mask: jax.Array | None = None,
    x_q: jax.Array | None = None,
    softmax: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """Multi-head attention of queries ``x_q (..., m, d)`` over keys and
    values ``x (..., n, d)``.

    .. math::

        T = \\frac{(x_q W_Q + b_Q)(x W_K +
        b_K)^\\top}{\\sqrt{d_{head}}}, \\quad
        A = \\mathrm{softmax}_{\\text{row}}(T \\text{ where allowed},
        -\\infty \\text{ elsewhere}), \\quad
        \\mathrm{out} = [A (x W_V + b_V)]_{\\text{heads}} W_O + b_O .

    Args:
        p: the attention parameters (module docstring).
        x: keys and values ``(..., n, d)``.
        n_heads: number of heads; ``d`` must be a multiple of it.
        mask: bool, broadcastable to ``(..., m, n)`` (heads are
            inserted): which keys each query
            may attend to; ``None`` allows all. A query must be allowed
            at least one key.
        x_q: the queries ``(..., m, d)``; ``None`` uses ``x``
            (self-attention, ``m = n``).
        softmax: ``False`` uses the masked scores directly (0 where not
            allowed), the "softmax
            removed" ablation of Part I.

    Returns:
        ``(out (..., m, d), A (..., H, m, n))``.
    """
    x_q = x if x_q is None else x_q
    *lead, n, d = x.shape
    dh = d // n_heads
    q = (x_q @ p["W_Q"] + p["b_Q"]).reshape(
        *x_q.shape[:-1], n_heads, dh
    )
    k = (x @ p["W_K"] + p["b_K"]).reshape(*lead, n, n_heads, dh)
    v = (x @ p["W_V"] + p["b_V"]).reshape(*lead, n, n_heads, dh)
    scores = jnp.einsum("...qhe,...khe->...hqk", q, k) / jnp.sqrt(
        jnp.asarray(dh, x.dtype)
    )
    allowed = (
        jnp.ones(scores.shape[-2:], bool)
        if mask is None
        else jnp.expand_dims(mask, -3)
    )
    if softmax:
        A = jax.nn.softmax(
            jnp.where(allowed, scores, -jnp.inf), axis=-1
        )
    else:
        A = jnp.where(allowed, scores, jnp.zeros((), x.dtype))
    z = jnp.einsum("...hqk,...khe->...qhe", A, v).reshape(
        *x_q.shape[:-1], d
    )
    return z @ p["W_O"] + p["b_O"], A


def softmax_cross_entropy(logits, labels) -> jax.Array:
    """Cross-entropy from logits, $-\\log \\mathrm{softmax}(z)_y$: ``(..., K), (...) -> (...)``.

    Computed stably as $\\operatorname{logsumexp}(z) - z_y$. ``labels`` are integer class
    indices of shape ``logits.shape[:-1]`` (their range is checked on concrete arrays).
    """
    logits = check_logits(logits, "logits")
    labels = check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jax.nn.logsumexp(logits, axis=-1) - z_y
