"""The transformer of a prior-data fitted network (PFN; Mueller et al., ICLR 2022): a set of
points in, bar-distribution logits out, for every point at once.

One dataset of N points (x_i, y_i), the first ``n_ctx`` of them the context, the rest queries
(their y is not read):

- token i = x_i W_x + b_x + [i < n_ctx] (y_i W_y + b_y): no positional encoding, so the model
  cannot know the order of the context;
- attention mask: token i may attend to token j iff j < n_ctx (a context token) or j == i, so
  context tokens see the context, and each query sees the context and itself but never another
  query: all queries are predicted in one pass, independently;
- pre-LayerNorm blocks (multi-head attention, GELU MLP) from :mod:`xfmr.core.nn`, in the
  GPT's parameter convention; the attention output ``W_O`` and the MLP's ``W_out`` start at
  zero; a final LayerNorm, then a GELU MLP decoder to B bucket logits whose last layer starts at
  zero (so the untrained PFN puts equal mass on every bucket).

The model API is that of the book's transformers: :func:`init_params` ``(key, config)`` and
:func:`forward` ``(params, data, config)``, ``data`` a :class:`Datasets`. Parameters are
float32 by default, whatever ``jax_enable_x64`` says.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.nn import dense, init_attention, init_layer_norm, layer_norm, multi_head_attention
from xfmr.core.validate import check_array, check_finite, check_float_dtype, check_instance, check_int

__all__ = ["PFNConfig", "Datasets", "init_params", "forward", "predictive_logits", "n_parameters"]


class PFNConfig(NamedTuple):
    """Sizes of a PFN. ``max_context``: the longest context it is trained on (and accepts);
    ``n_points``: points per training dataset (context + queries), > max_context."""

    d_in: int = 1
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 128
    n_buckets: int = 100
    max_context: int = 30
    n_points: int = 40


class Datasets(NamedTuple):
    """The input of :func:`forward`: points ``x (..., N, d)``, targets ``y (..., N)``, and the
    context size ``n_ctx`` (a scalar shared by the leading axes; may be traced): points
    ``0 .. n_ctx - 1`` are the context, the others queries."""

    x: Any
    y: Any
    n_ctx: Any


def _check_config(config: PFNConfig) -> PFNConfig:
    check_instance(config, "config", PFNConfig)
    for name in PFNConfig._fields:
        check_int(getattr(config, name), f"config.{name}", minimum=1)
    if config.d_model % config.n_heads:
        raise ValueError(f"config.d_model ({config.d_model}) must be a multiple of config.n_heads ({config.n_heads})")
    if config.n_points <= config.max_context:
        raise ValueError(f"config.n_points ({config.n_points}) must exceed config.max_context ({config.max_context})")
    return config


def _mlp(keys, n_in: int, n_hidden: int, n_out: int, dtype) -> dict:
    """``{"W_in", "b_in", "W_out", "b_out"}``: W_in ~ N(0, 1/n_in), W_out zero, biases zero."""
    W_in = float(1.0 / np.sqrt(n_in)) * jax.random.normal(next(keys), (n_in, n_hidden), dtype)
    return {"W_in": W_in, "b_in": jnp.zeros(n_hidden, dtype),
            "W_out": jnp.zeros((n_hidden, n_out), dtype), "b_out": jnp.zeros(n_out, dtype)}


def init_params(key, config: PFNConfig, dtype=jnp.float32) -> dict:
    """The parameters at initialisation::

        {"embed": {"W_x" (d_in, d), "b_x", "W_y" (1, d), "b_y"},
         "blocks": [{"ln1", "attn", "ln2", "mlp": {"W_in", "b_in", "W_out", "b_out"}}] * n_layers,
         "ln_f", "decoder": {"W_in" (d, d_ff), "b_in", "W_out" (d_ff, B), "b_out"}}

    ``W_x, W_y ~ N(0, 1)``; ``W_Q, W_K, W_V`` and every ``W_in`` ~ N(0, 1/fan_in); ``W_O``,
    every ``W_out`` and all biases zero; LayerNorms scale one, bias zero.
    """
    c = _check_config(config)
    dtype = check_float_dtype(dtype)
    keys = iter(jax.random.split(key, 3 + 6 * c.n_layers))
    embed = {"W_x": jax.random.normal(next(keys), (c.d_in, c.d_model), dtype), "b_x": jnp.zeros(c.d_model, dtype),
             "W_y": jax.random.normal(next(keys), (1, c.d_model), dtype), "b_y": jnp.zeros(c.d_model, dtype)}
    std = float(1.0 / np.sqrt(c.d_model))
    blocks = [{"ln1": init_layer_norm(c.d_model, dtype),
               "attn": init_attention(keys, c.d_model, std, dtype, zero_output=True),
               "ln2": init_layer_norm(c.d_model, dtype),
               "mlp": _mlp(keys, c.d_model, c.d_ff, c.d_model, dtype)} for _ in range(c.n_layers)]
    return {"embed": embed, "blocks": blocks, "ln_f": init_layer_norm(c.d_model, dtype),
            "decoder": _mlp(keys, c.d_model, c.d_ff, c.n_buckets, dtype)}


def n_parameters(params) -> int:
    """Number of scalar parameters."""
    return int(sum(np.size(p) for p in jax.tree_util.tree_leaves(params)))


def _gelu_mlp(p: dict, z: jax.Array) -> jax.Array:
    return dense(jax.nn.gelu(dense(z, p["W_in"], p["b_in"])), p["W_out"], p["b_out"])


def _attend_keys_and_self(p: dict, z: jax.Array, n_heads: int, allowed: jax.Array) -> jax.Array:
    """Attention of every token of ``z (..., N, d)`` over the first S tokens (where ``allowed``
    (N, S) says so) and over itself: the masked multi-head attention of
    :func:`xfmr.core.nn.multi_head_attention` (same parameters, same scores) restricted to the
    keys it can use when no token attends to a token j >= S other than itself. An (N, S + 1)
    score matrix per head instead of (N, N)."""
    *lead, N, d = z.shape
    S = allowed.shape[-1]
    dh = d // n_heads
    q, k, v = (dense(z, p[f"W_{n}"], p[f"b_{n}"]).reshape(*lead, N, n_heads, dh) for n in "QKV")
    root = jnp.sqrt(jnp.asarray(dh, z.dtype))
    scores = jnp.einsum("...qhe,...khe->...hqk", q, k[..., :S, :, :]) / root
    scores = jnp.where(allowed, scores, -jnp.inf)
    own = jnp.einsum("...qhe,...qhe->...hq", q, k) / root
    own = jnp.where(jnp.arange(N) >= S, own, -jnp.inf)   # tokens < S see themselves among the S
    A = jax.nn.softmax(jnp.concatenate([scores, own[..., None]], axis=-1), axis=-1)
    out = (jnp.einsum("...hqk,...khe->...qhe", A[..., :S], v[..., :S, :, :])
           + jnp.einsum("...hq,...qhe->...qhe", A[..., S], v))
    return dense(out.reshape(*lead, N, d), p["W_O"], p["b_O"])


def forward(
    params: dict,
    data: Datasets,
    config: PFNConfig,
    *,
    n_keys: int | None = None,
) -> jax.Array:
    """Bucket logits ``(..., N, B)`` at every point of the datasets
    ``data`` (a :class:`Datasets`).

    Rows at context points are not predictions. Traceable; no argument
    checks (see :func:`predictive_logits`).

    ``n_keys`` (static, optional): a bound n_ctx <= n_keys known at
    trace time. Then only the first n_keys tokens can be attended to
    (besides each token itself), and each layer computes an (N, n_keys +
    1) score matrix instead of (N, N): the same outputs up to rounding,
    O(N n_keys) instead of O(N^2) attention work. ``None``: the full (N,
    N) masked attention of :func:`xfmr.core.nn.multi_head_attention`.
    """
    x, y, n_ctx = data
    E = params["embed"]
    N = x.shape[-2]
    idx = jnp.arange(N)
    is_ctx = (idx < n_ctx).astype(x.dtype)
    h = dense(x, E["W_x"], E["b_x"]) + is_ctx[:, None] * dense(
        y[..., None], E["W_y"], E["b_y"]
    )
    S = N if n_keys is None else min(int(n_keys), N)
    allowed = (idx[None, :S] < n_ctx) | (
        idx[:, None] == idx[None, :S]
    )  # (N, S)
    for block in params["blocks"]:
        z = layer_norm(h, block["ln1"])
        if S == N:
            h = (
                h
                + multi_head_attention(
                    block["attn"], z, config.n_heads, mask=allowed
                )[0]
            )
        else:
            h = h + _attend_keys_and_self(
                block["attn"], z, config.n_heads, allowed
            )
        h = h + _gelu_mlp(block["mlp"], layer_norm(h, block["ln2"]))
    return _gelu_mlp(params["decoder"], layer_norm(h, params["ln_f"]))


_forward_jit = jax.jit(forward, static_argnames=("config", "n_keys"))


def predictive_logits(params: dict, x_ctx, y_ctx, x_query, config: PFNConfig) -> jax.Array:
    """Logits (m, B) of the posterior predictive at x_query (m, d) given the context
    x_ctx (n, d), y_ctx (n,), with 0 <= n <= config.max_context; one jitted pass in the
    parameters' dtype, with ``n_keys = n``."""
    x_ctx = check_finite(check_array(x_ctx, "x_ctx", ndim=2, kind="number"), "x_ctx")
    y_ctx = check_finite(check_array(y_ctx, "y_ctx", ndim=1, kind="number"), "y_ctx")
    x_query = check_finite(check_array(x_query, "x_query", ndim=2, kind="number"), "x_query")
    for name, arr in (("x_ctx", x_ctx), ("x_query", x_query)):
        if arr.shape[1] != config.d_in:
            raise ValueError(f"{name} must have d = {config.d_in} columns (the input dimension the "
                             f"model was trained for), got shape {arr.shape}")
    if y_ctx.shape[0] != x_ctx.shape[0]:
        raise ValueError(f"y_ctx must have one entry per row of x_ctx ({x_ctx.shape[0]}), got {y_ctx.shape}")
    n = x_ctx.shape[0]
    if n > config.max_context:
        raise ValueError(f"the context has {n} points, longer than the model was trained for "
                         f"(config.max_context = {config.max_context})")
    dtype = params["embed"]["W_x"].dtype
    x = jnp.concatenate([x_ctx, x_query]).astype(dtype)
    y = jnp.concatenate([y_ctx.astype(dtype), jnp.zeros(x_query.shape[0], dtype)])
    return _forward_jit(params, Datasets(x, y, n), config, n_keys=n)[n:]
