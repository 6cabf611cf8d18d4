"""The single self-attention layer of the paper, its square loss, and the autodiff reference.

Conventions (Ormaniec, Dangel, Singh, ICLR 2025):

- ``X`` has shape ``(L, d_V)``: ``L`` tokens, row ``i`` is ``x_i``.
- ``W_Q`` and ``W_K`` have shape ``(d_V, d_K)``, ``W_V`` has shape ``(d_V, d_V)``.
- Scores ``T = X W_Q W_K^T X^T / sqrt(d_K)`` (``L x L``), attention ``A = softmax_row(T)``
  (or ``A = T`` for the linear-attention variant, ``softmax=False``), output
  ``F = A X W_V`` (``L x d_V``). Single head, no bias, no output projection, no mask.
- Loss on one sequence: ``l = ||F - Y||_F^2 / (L d_V)``.
- Parameters are flattened row-major (C order) and stacked in the order
  ``[vec_r(W_Q), vec_r(W_K), vec_r(W_V)]``; Hessian blocks are named by two letters of
  ``"QKV"``, e.g. ``"QV"`` is ``d^2 l / d vec_r(W_Q) d vec_r(W_V)^T``.

The Hessian splits (Gauss-Newton) into ``H = H_o + H_f`` with

- the outer-product Hessian ``H_o = J^T (c I) J``, ``J = d vec_r(F) / d w``, ``c = 2 / (L d_V)``;
- the functional Hessian ``H_f = sum_k [grad_F l]_k  Hess_w F_k``.

This module computes all three independently with JAX autodiff: it is the reference that
every closed form of the book is checked against.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import (check_array, check_choice, check_dtype_enabled, check_float_dtype, check_int,
                                check_real)

BLOCK_NAMES = ("Q", "K", "V")


def check_layer_shapes(X, W_Q, W_K, W_V, Y=None) -> tuple[int, int, int]:
    """Validate the shapes of a layer's inputs and return ``(L, d_V, d_K)``.

    Raises ``ValueError`` naming the offending argument.
    """
    X = check_array(X, "X", ndim=2, kind="float")
    W_Q, W_K, W_V = (check_array(W, name, kind="float") for W, name in ((W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V")))
    L, d_V = X.shape
    if L < 1 or d_V < 1:
        raise ValueError(f"X must have at least one token and one feature, got shape {X.shape}")
    if W_Q.ndim != 2 or W_Q.shape[0] != d_V:
        raise ValueError(f"W_Q must have shape (d_V, d_K) = ({d_V}, d_K), got {W_Q.shape}")
    d_K = W_Q.shape[1]
    if d_K < 1:
        raise ValueError(f"W_Q must have d_K >= 1 columns, got shape {W_Q.shape}")
    if W_K.shape != (d_V, d_K):
        raise ValueError(f"W_K must have shape (d_V, d_K) = ({d_V}, {d_K}), like W_Q; got {W_K.shape}")
    if W_V.shape != (d_V, d_V):
        raise ValueError(f"W_V must have shape (d_V, d_V) = ({d_V}, {d_V}), got {W_V.shape}")
    if Y is not None and jnp.shape(Y) != (L, d_V):
        raise ValueError(f"Y must have the shape of the output (L, d_V) = ({L}, {d_V}), got {jnp.shape(Y)}")
    return L, d_V, d_K


def attention_scores(X, W_Q, W_K):
    """Scores ``T = X W_Q W_K^T X^T / sqrt(d_K)``, shape ``(L, L)``."""
    d_K = W_Q.shape[1]
    return (X @ W_Q) @ (X @ W_K).T / jnp.sqrt(d_K)


def attention_matrix(X, W_Q, W_K, *, softmax: bool = True):
    """Attention ``A = softmax_row(T)`` (each row a distribution over tokens), or ``A = T``."""
    T = attention_scores(X, W_Q, W_K)
    return jax.nn.softmax(T, axis=-1) if softmax else T


def attention_layer(X, W_Q, W_K, W_V, *, softmax: bool = True):
    """Layer output ``F = A X W_V``, shape ``(L, d_V)``."""
    check_layer_shapes(X, W_Q, W_K, W_V)
    return attention_matrix(X, W_Q, W_K, softmax=softmax) @ X @ W_V


def loss(X, Y, W_Q, W_K, W_V, *, softmax: bool = True):
    """Square loss ``||F - Y||_F^2 / (L d_V)`` of one sequence (a
    scalar)."""
    L, d_V, _ = check_layer_shapes(X, W_Q, W_K, W_V, Y)
    F = attention_layer(X, W_Q, W_K, W_V, softmax=softmax)
    return jnp.sum((F - Y) ** 2) / (L * d_V)


def flatten_weights(W_Q, W_K, W_V):
    """Stack ``[vec_r(W_Q), vec_r(W_K), vec_r(W_V)]`` into one vector of length ``2 d_V d_K + d_V^2``."""
    return jnp.concatenate([W_Q.reshape(-1), W_K.reshape(-1), W_V.reshape(-1)])


def unflatten_weights(w, d_V: int, d_K: int):
    """Inverse of :func:`flatten_weights`: ``w -> (W_Q, W_K, W_V)``."""
    n_qk = d_V * d_K
    if w.shape != (2 * n_qk + d_V * d_V,):
        raise ValueError(f"w must have shape ({2 * n_qk + d_V * d_V},) for d_V={d_V}, d_K={d_K}, got {w.shape}")
    W_Q = w[:n_qk].reshape(d_V, d_K)
    W_K = w[n_qk : 2 * n_qk].reshape(d_V, d_K)
    W_V = w[2 * n_qk :].reshape(d_V, d_V)
    return W_Q, W_K, W_V


def block_sizes(d_V: int, d_K: int) -> dict[str, int]:
    """Number of parameters in each weight: ``{"Q": d_V d_K, "K": d_V d_K, "V": d_V^2}``."""
    return {"Q": d_V * d_K, "K": d_V * d_K, "V": d_V * d_V}


def split_blocks(M, d_V: int, d_K: int) -> dict[str, jnp.ndarray]:
    """Cut a dense ``(P, P)`` matrix over ``[W_Q, W_K, W_V]`` into its nine named blocks.

    Returns a mapping from ``"QQ", "QK", ..., "VV"`` to arrays of shape ``(size_i, size_j)``.
    """
    sizes = block_sizes(d_V, d_K)
    P = sum(sizes.values())
    if M.shape != (P, P):
        raise ValueError(f"M must have shape ({P}, {P}) for d_V={d_V}, d_K={d_K}, got {M.shape}")
    offsets, start = {}, 0
    for name in BLOCK_NAMES:
        offsets[name] = slice(start, start + sizes[name])
        start += sizes[name]
    return {a + b: M[offsets[a], offsets[b]] for a in BLOCK_NAMES for b in BLOCK_NAMES}


class LayerInstance(NamedTuple):
    """Inputs ``X (L, d_V)``, targets ``Y (L, d_V)`` and weights of one attention layer."""

    X: jnp.ndarray
    Y: jnp.ndarray
    W_Q: jnp.ndarray
    W_K: jnp.ndarray
    W_V: jnp.ndarray


def random_instance(key, L: int, d_V: int, d_K: int, *, weights: str = "unit",
                    query_scale: float = 1.0, input_scale: float = 1.0, dtype=jnp.float64) -> LayerInstance:
    """A random layer: ``key`` split in five, one key each for ``X, Y, W_Q, W_K, W_V``.

    ``X = input_scale * N(0, 1)``, ``Y = N(0, 1)``; the weights are ``N(0, 1)``
    (``weights="unit"``) or ``N(0, 1) / sqrt(d_V)`` (``weights="fan_in"``), and ``W_Q`` is
    further multiplied by ``query_scale`` (small: near-uniform attention; large: near one-hot).
    Arrays of ``dtype`` (float64, the default, needs ``jax_enable_x64``).
    """
    L = check_int(L, "L", minimum=1)
    d_V = check_int(d_V, "d_V", minimum=1)
    d_K = check_int(d_K, "d_K", minimum=1)
    check_choice(weights, "weights", ("unit", "fan_in"))
    query_scale = check_real(query_scale, "query_scale")
    input_scale = check_real(input_scale, "input_scale")
    dtype = check_dtype_enabled(check_float_dtype(dtype))
    k = jax.random.split(key, 5)
    X = jax.random.normal(k[0], (L, d_V), dtype)
    if input_scale != 1.0:
        X = input_scale * X
    Y = jax.random.normal(k[1], (L, d_V), dtype)
    W = [jax.random.normal(k[i], shape, dtype) for i, shape in ((2, (d_V, d_K)), (3, (d_V, d_K)), (4, (d_V, d_V)))]
    if weights == "fan_in":
        W = [w / float(np.sqrt(d_V)) for w in W]
    if query_scale != 1.0:
        W[0] = query_scale * W[0]
    return LayerInstance(X, Y, *W)


class HessianSplit(NamedTuple):
    """Dense ``(P, P)`` Hessian and its Gauss-Newton parts, each computed on its own."""

    H: jnp.ndarray
    H_o: jnp.ndarray
    H_f: jnp.ndarray


def autodiff_hessian(
    X, Y, W_Q, W_K, W_V, *, softmax: bool = True
) -> HessianSplit:
    """Reference Hessian of :func:`loss` in ``w = [vec_r W_Q, vec_r W_K,
    vec_r W_V]`` by autodiff.

    - ``H   = jax.hessian(l)(w)``
    - ``H_o = J^T (c I) J`` with ``J = jax.jacfwd(vec_r F)(w)`` and ``c
    = 2 / (L d_V)``
    - ``H_f = jax.hessian(w -> <g, vec_r F(w)>)`` with the residual
    gradient
      ``g = grad_F l = c vec_r(F - Y)`` held fixed at the current
      weights.

    ``H_o`` and ``H_f`` are computed independently of ``H``, so ``H =
    H_o + H_f`` is a check.
    Use float64 (``jax.config.update("jax_enable_x64", True)``) for 1e-9
    agreement.
    """
    check_layer_shapes(X, W_Q, W_K, W_V, Y)
    return _autodiff_hessian(X, Y, W_Q, W_K, W_V, softmax=softmax)


@functools.partial(jax.jit, static_argnames="softmax")
def _autodiff_hessian(X, Y, W_Q, W_K, W_V, *, softmax: bool) -> HessianSplit:
    L, d_V = X.shape
    d_K = W_Q.shape[1]
    c = 2.0 / (L * d_V)
    w0 = flatten_weights(W_Q, W_K, W_V)

    def output(w):
        return attention_layer(X, *unflatten_weights(w, d_V, d_K), softmax=softmax).reshape(-1)

    def objective(w):
        return loss(X, Y, *unflatten_weights(w, d_V, d_K), softmax=softmax)

    H = jax.hessian(objective)(w0)
    J = jax.jacfwd(output)(w0)
    H_o = c * J.T @ J
    g = jax.lax.stop_gradient(c * (output(w0) - Y.reshape(-1)))
    H_f = jax.hessian(lambda w: jnp.vdot(g, output(w)))(w0)
    return HessianSplit(H, H_o, H_f)
