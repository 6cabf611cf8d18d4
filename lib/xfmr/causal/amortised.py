r"""Amortised causal discovery: a small permutation-equivariant transformer (AVICI-style), the model.

The model of Lorch et al. (2022, "Amortized inference for causal structure learning") reads a
data set :math:`X \in \mathbb{R}^{n \times d}` and returns edge logits :math:`L \in
\mathbb{R}^{d \times d}`, :math:`\sigma(L_{ij})` the predicted probability of the edge
:math:`i \to j`. Its training (binary cross-entropy on simulated graphs) is in
:mod:`xfmr.causal.amortised_training`, its training data in :mod:`xfmr.causal.amortised_data`.

Architecture (no positional information along either axis), built from :mod:`xfmr.core.nn`:

1. embed every entry :math:`x_{si}` by a small MLP :math:`\mathbb{R} \to \mathbb{R}^D`,
   giving tokens ``(n, d, D)``;
2. ``n_layers`` layers, each: a block across **variables** (for every sample), then a block
   across **samples** (for every variable); a block is pre-LayerNorm multi-head
   self-attention and a pre-LayerNorm MLP, both residual;
3. LayerNorm, then max- (or mean-) pool over samples: ``(d, D)``;
4. bilinear edge logits :math:`L_{ij} = u_i^\top v_j / \sqrt{D} + b` with
   :math:`u = z U + b_U`, :math:`v = z V + b_V`; the diagonal is excluded from loss and metrics.

Permuting the variables (columns of ``X``) permutes rows and columns of ``L`` alike
(equivariance); permuting the samples (rows of ``X``) leaves ``L`` unchanged (invariance).

Parameters (the convention of :mod:`xfmr.core.nn`)::

    {"embed": {"W_in" (1, D), "b_in", "W_out" (D, D), "b_out"},
     "layers": [{"variables": block, "samples": block}, ...],
     "ln_out": LayerNorm, "edges": {"W_U", "b_U", "W_V", "b_V" (D, D) / (D,)}, "bias": ()}
    block = {"ln1": LayerNorm, "attn": attention, "ln2": LayerNorm,
             "mlp": {"W_in" (D, 2D), "b_in", "W_out" (2D, D), "b_out"}}

Weights are drawn :math:`N(0, 1/\text{fan-in})`, biases zero, LayerNorms the identity.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.nn import dense, init_attention, init_layer_norm, layer_norm, multi_head_attention
from xfmr.core.validate import check_array, check_choice, check_finite, check_float_dtype, check_instance, check_int

__all__ = ["Config", "init_params", "forward"]


class Config(NamedTuple):
    """Static hyperparameters of the model.

    Attributes:
        d_max: largest number of variables the model accepts (the size it was trained for).
        width: token width ``D``.
        n_layers: layers (each: a block across variables, a block across samples).
        n_heads: attention heads (``width`` must be divisible by it).
        pool: ``"max"`` or ``"mean"`` over samples.
    """

    d_max: int
    width: int = 32
    n_layers: int = 2
    n_heads: int = 4
    pool: str = "max"


def _check_config(config: Config) -> Config:
    check_instance(config, "config", Config)
    check_int(config.d_max, "config.d_max", minimum=2)
    check_int(config.width, "config.width", minimum=1)
    check_int(config.n_layers, "config.n_layers", minimum=1)
    check_int(config.n_heads, "config.n_heads", minimum=1)
    check_choice(config.pool, "config.pool", ("max", "mean"))
    if config.width % config.n_heads:
        raise ValueError(f"config.width ({config.width}) must be divisible by config.n_heads ({config.n_heads})")
    return config


def _init_mlp(keys, n_in: int, n_hidden: int, n_out: int, dtype) -> dict:
    return {"W_in": jax.random.normal(next(keys), (n_in, n_hidden), dtype) / np.sqrt(n_in),
            "b_in": jnp.zeros((n_hidden,), dtype),
            "W_out": jax.random.normal(next(keys), (n_hidden, n_out), dtype) / np.sqrt(n_hidden),
            "b_out": jnp.zeros((n_out,), dtype)}


def _init_block(keys, D: int, dtype) -> dict:
    return {"ln1": init_layer_norm(D, dtype), "attn": init_attention(keys, D, 1.0 / np.sqrt(D), dtype),
            "ln2": init_layer_norm(D, dtype), "mlp": _init_mlp(keys, D, 2 * D, D, dtype)}


def init_params(key: jax.Array, config: Config, dtype=jnp.float32) -> dict:
    """Initial parameters (a pytree of ``dtype``, module docstring) of the model described by ``config``."""
    config = _check_config(config)
    dtype = check_float_dtype(dtype)
    D = config.width
    keys = iter(jax.random.split(key, 4 + 12 * config.n_layers))
    embed = _init_mlp(keys, 1, D, D, dtype)
    layers = [{"variables": _init_block(keys, D, dtype), "samples": _init_block(keys, D, dtype)}
              for _ in range(config.n_layers)]
    edges = {"W_U": jax.random.normal(next(keys), (D, D), dtype) / np.sqrt(D), "b_U": jnp.zeros((D,), dtype),
             "W_V": jax.random.normal(next(keys), (D, D), dtype) / np.sqrt(D), "b_V": jnp.zeros((D,), dtype)}
    return {"embed": embed, "layers": layers, "ln_out": init_layer_norm(D, dtype), "edges": edges,
            "bias": jnp.zeros((), dtype)}


def _mlp(p: dict, x: jax.Array) -> jax.Array:
    return dense(jax.nn.gelu(dense(x, p["W_in"], p["b_in"])), p["W_out"], p["b_out"])


def _block(p: dict, h: jax.Array, n_heads: int) -> jax.Array:
    """Pre-LN self-attention over axis -2 of ``h (..., T, D)``, then a pre-LN MLP; both residual."""
    h = h + multi_head_attention(p["attn"], layer_norm(h, p["ln1"]), n_heads)[0]
    return h + _mlp(p["mlp"], layer_norm(h, p["ln2"]))


def _max_pool(h: jax.Array) -> jax.Array:
    """``h (..., n, d, D)`` -> its maximum over the samples, ``(..., d, D)``.

    The value is ``h.max(-3)``; the gradient goes to the first position of the maximum.
    (``h.max``'s own gradient divides by the number of positions equal to the maximum,
    found by comparing ``h`` with it; where XLA computes ``h`` twice, in two fused kernels
    whose roundings differ, that count can be 0 and the gradient NaN: seen when the
    backend compiles without optimisation.)
    """
    first = jnp.argmax(h, axis=-3)[..., None, :, :]
    return jnp.take_along_axis(h, first, axis=-3)[..., 0, :, :]


def _forward(params: dict, X: jax.Array, config: Config) -> jax.Array:
    """``X (..., n, d)`` -> logits ``(..., d, d)``."""
    h = _mlp(params["embed"], X[..., None])  # (..., n, d, D)
    for layer in params["layers"]:
        # attention across variables, then across samples
        h = _block(layer["variables"], h, config.n_heads)
        h = jnp.swapaxes(
            _block(
                layer["samples"],
                jnp.swapaxes(h, -3, -2),
                config.n_heads,
            ),
            -3,
            -2,
        )
    h = layer_norm(h, params["ln_out"])
    # pooled over the samples: (..., d, D)
    z = _max_pool(h) if config.pool == "max" else h.mean(-3)
    e = params["edges"]
    u, v = dense(z, e["W_U"], e["b_U"]), dense(z, e["W_V"], e["b_V"])
    return (
        u @ jnp.swapaxes(v, -1, -2) / np.sqrt(z.shape[-1])
        + params["bias"]
    )


_jit_forward = jax.jit(_forward, static_argnames="config")


def forward(params: dict, X, config: Config) -> jax.Array:
    """Edge logits ``(..., d, d)`` for data sets ``X (..., n, d)``; ``[..., i, j]`` for the edge ``i -> j``.

    Leading axes are a batch of data sets. ``X`` is cast to the parameters' dtype.

    Raises:
        TypeError: ``config`` not a :class:`Config`, ``X`` not a float array.
        ValueError: ``X`` with fewer than 2 dimensions, ``n < 2``, ``d < 2``, ``d > config.d_max``,
            or not finite.
    """
    config = _check_config(config)
    X = check_array(X, "X", kind="float", dtype=params["bias"].dtype)
    if X.ndim < 2:
        raise ValueError(f"X must have shape (..., n, d), got shape {X.shape}")
    n, d = X.shape[-2:]
    check_int(n, "n (samples, X.shape[-2])", minimum=2)
    check_int(d, "d (variables, X.shape[-1])", minimum=2, maximum=config.d_max)
    return _jit_forward(params, check_finite(X, "X"), config)
