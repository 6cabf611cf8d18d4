"""Closed-form Hessian blocks of a single self-attention layer (Theorems 3.1 and 3.2).

Layer and loss as in :mod:`xfmr.hessian.attention`: ``T = X W_Q W_K^T X^T / sqrt(d_K)``,
``A = softmax_row(T)`` (or ``A = T`` with ``softmax=False``), ``F = A X W_V``,
``l = ||F - Y||_F^2 / (L d_V)``, ``c = 2 / (L d_V)``. Per token ``i``:

- ``x_i`` (row of ``X``), ``q_i = W_Q^T x_i``, residual ``r_i`` (row of ``F - Y``),
  attention mean ``mu_i``, covariance ``Sigma_i`` and third moment ``N_i = M3_i[W_V r_i]``
  (see :mod:`xfmr.hessian.moments`). For linear attention ``Sigma_i = X^T X`` and ``N_i = 0``.
- ``P_i = Sigma_i W_V W_V^T Sigma_i``.

Outer-product Hessian ``H_o`` (Theorem 3.1), ``k = d_K``:

- ``VV = c sum_i mu_i mu_i^T kron I``
- ``QQ = (c/k) sum_i x_i x_i^T kron W_K^T P_i W_K``
- ``KK = (c/k) sum_i P_i kron q_i q_i^T``
- ``QK = (c/k) sum_i (x_i kron W_K^T P_i)(I kron q_i^T)``
- ``QV = (c/sqrt k) sum_i x_i mu_i^T kron W_K^T Sigma_i W_V``
- ``KV = (c/sqrt k) sum_i (Sigma_i W_V kron q_i)(mu_i^T kron I)``

Functional Hessian ``H_f`` (Theorem 3.2):

- ``VV = 0``
- ``QQ = (c/k) sum_i x_i x_i^T kron W_K^T N_i W_K``
- ``KK = (c/k) sum_i N_i kron q_i q_i^T``
- ``QK = (c/k) sum_i (x_i kron W_K^T N_i)(I kron q_i^T) + G kron I_k``, with
  ``G = dl/dW_QK = (c/sqrt k) sum_i x_i (Sigma_i W_V r_i)^T``
- ``QV = (c/sqrt k) sum_i (x_i kron W_K^T Sigma_i)(I kron r_i^T)``
- ``KV = (c/sqrt k) sum_i Sigma_i kron q_i r_i^T``

Rows and columns of every block follow the row-major flattening of ``W_Q (d_V, d_K)``,
``W_K (d_V, d_K)``, ``W_V (d_V, d_V)``. None of this uses automatic differentiation;
:func:`autodiff_blocks` is the reference.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from xfmr.hessian import attention
from xfmr.hessian.matrix_calculus import gram, kron_sum, kron_sum_frobenius_sq
from xfmr.hessian.moments import attention_covariance, attention_third_moment
from xfmr.hessian.softmax import softmax_jacobian, softmax_second_derivative_along

BLOCK_KEYS = ("QQ", "QK", "QV", "KK", "KV", "VV")
DIAGONAL_KEYS = ("QQ", "KK", "VV")


class LayerTerms(NamedTuple):
    """Per-token quantities the blocks are made of (shapes for ``L`` tokens)."""

    c: float  # 2 / (L d_V)
    d_K: int
    A: jnp.ndarray  # (L, L) attention
    mu: jnp.ndarray  # (L, d_V) attention means, M_1 = A X
    q: jnp.ndarray  # (L, d_K) queries q_i = W_Q^T x_i
    Sigma: jnp.ndarray  # (L, d_V, d_V) attention covariances (X^T X for linear attention)
    R: jnp.ndarray | None  # (L, d_V) residual F - Y (None without Y)
    N: jnp.ndarray | None  # (L, d_V, d_V) third moments M3_i[W_V r_i] (0 for linear attention)


def layer_terms(X, W_Q, W_K, W_V, Y=None, *, softmax: bool = True) -> LayerTerms:
    """Moments, queries and residuals of one layer, after checking shapes."""
    L, d_V, d_K = attention.check_layer_shapes(X, W_Q, W_K, W_V, Y)
    A = attention.attention_matrix(X, W_Q, W_K, softmax=softmax)
    mu = A @ X
    if softmax:
        Sigma = attention_covariance(X, A)
    else:
        Sigma = jnp.broadcast_to(X.T @ X, (L, d_V, d_V))
    R = N = None
    if Y is not None:
        R = mu @ W_V - Y
        if softmax:
            N = attention_third_moment(X, A, R @ W_V.T)
        else:
            N = jnp.zeros((L, d_V, d_V), dtype=X.dtype)
    return LayerTerms(2.0 / (L * d_V), d_K, A, mu, X @ W_Q, Sigma, R, N)


def _outer(a, b):
    return a[:, :, None] * b[:, None, :]


def _qk_blocks(X, W_K, M, t: LayerTerms) -> dict[str, jnp.ndarray]:
    """The three query/key blocks built from a symmetric kernel ``M_i`` (``P_i`` or ``N_i``)."""
    c, k = t.c, t.d_K
    d_V = X.shape[1]
    KtM = jnp.einsum("ps,ipq->isq", W_K, M)  # W_K^T M_i, (L, d_K, d_V)
    QQ = (c / k) * kron_sum(_outer(X, X), KtM @ W_K)
    KK = (c / k) * kron_sum(M, _outer(t.q, t.q))
    QK = (c / k) * jnp.einsum("ip,isq,it->psqt", X, KtM, t.q).reshape(d_V * k, d_V * k)
    return {"QQ": QQ, "KK": KK, "QK": QK}


@functools.partial(jax.jit, static_argnames="softmax")
def outer_product_blocks(
    X, W_Q, W_K, W_V, *, softmax: bool = True
) -> dict[str, jnp.ndarray]:
    """Closed-form outer-product Hessian ``H_o`` (Theorem 3.1), six
    blocks keyed ``"QQ", ..., "VV"``.

    Shapes: ``QQ, QK, KK (d_V d_K, d_V d_K)``, ``QV, KV (d_V d_K,
        d_V^2)``, ``VV (d_V^2, d_V^2)``.
    """
    t = layer_terms(X, W_Q, W_K, W_V, softmax=softmax)
    c, k = t.c, t.d_K
    L, d_V = X.shape
    SW = t.Sigma @ W_V  # Sigma_i W_V, (L, d_V, d_V)
    P = SW @ jnp.swapaxes(SW, 1, 2)  # Sigma_i W_V W_V^T Sigma_i
    blocks = _qk_blocks(X, W_K, P, t)
    KtSW = jnp.einsum(
        "ps,ipb->isb", W_K, SW
    )  # W_K^T Sigma_i W_V, (L, d_K, d_V)
    blocks["QV"] = (c / math.sqrt(k)) * kron_sum(_outer(X, t.mu), KtSW)
    blocks["KV"] = (c / math.sqrt(k)) * jnp.einsum(
        "ipb,is,ia->psab", SW, t.q, t.mu
    ).reshape(d_V * k, d_V * d_V)
    eye = jnp.eye(d_V, dtype=X.dtype)
    blocks["VV"] = c * jnp.kron(t.mu.T @ t.mu, eye)
    return {key: blocks[key] for key in BLOCK_KEYS}


def qk_gradient(X, Y, W_Q, W_K, W_V, *, softmax: bool = True) -> jnp.ndarray:
    """``dl/dW_QK = (c/sqrt d_K) sum_i x_i (Sigma_i W_V r_i)^T``, shape ``(d_V, d_V)``.

    The gradient of the loss with respect to the product ``W_QK = W_Q W_K^T``.
    """
    t = layer_terms(X, W_Q, W_K, W_V, Y, softmax=softmax)
    return _qk_gradient(X, W_V, t)


def _qk_gradient(X, W_V, t: LayerTerms) -> jnp.ndarray:
    Sv = jnp.einsum("ipq,iq->ip", t.Sigma, t.R @ W_V.T)  # Sigma_i W_V r_i
    return (t.c / math.sqrt(t.d_K)) * X.T @ Sv


@functools.partial(jax.jit, static_argnames="softmax")
def functional_blocks(
    X, Y, W_Q, W_K, W_V, *, softmax: bool = True
) -> dict[str, jnp.ndarray]:
    """Closed-form functional Hessian ``H_f`` (Theorem 3.2), six blocks
    keyed ``"QQ", ..., "VV"``."""
    t = layer_terms(X, W_Q, W_K, W_V, Y, softmax=softmax)
    c, k = t.c, t.d_K
    L, d_V = X.shape
    blocks = _qk_blocks(X, W_K, t.N, t)
    blocks["QK"] = blocks["QK"] + jnp.kron(
        _qk_gradient(X, W_V, t), jnp.eye(k, dtype=X.dtype)
    )
    SK = t.Sigma @ W_K  # Sigma_i W_K, (L, d_V, d_K)
    blocks["QV"] = (c / math.sqrt(k)) * jnp.einsum(
        "ip,ias,ib->psab", X, SK, t.R
    ).reshape(d_V * k, d_V * d_V)
    blocks["KV"] = (c / math.sqrt(k)) * kron_sum(
        t.Sigma, _outer(t.q, t.R)
    )
    blocks["VV"] = jnp.zeros((d_V * d_V, d_V * d_V), dtype=X.dtype)
    return {key: blocks[key] for key in BLOCK_KEYS}


_autodiff_hessian_jit = jax.jit(attention.autodiff_hessian, static_argnames="softmax")


def autodiff_blocks(X, Y, W_Q, W_K, W_V, softmax: bool = True):
    """Reference ``(H, H_o, H_f)`` from :func:`xfmr.hessian.attention.autodiff_hessian`, each as six named blocks."""
    L, d_V, d_K = attention.check_layer_shapes(X, W_Q, W_K, W_V, Y)
    split = _autodiff_hessian_jit(X, Y, W_Q, W_K, W_V, softmax=softmax)
    return tuple(
        {key: b[key] for key in BLOCK_KEYS} for b in (attention.split_blocks(M, d_V, d_K) for M in split)
    )


def assemble(blocks: dict[str, jnp.ndarray]) -> jnp.ndarray:
    """Dense ``(P, P)`` matrix over ``[W_Q, W_K, W_V]`` from six blocks (lower blocks by symmetry)."""
    missing = [key for key in BLOCK_KEYS if key not in blocks]
    if missing:
        raise ValueError(f"blocks must contain the keys {BLOCK_KEYS}, missing {missing}")
    b = blocks
    return jnp.block(
        [[b["QQ"], b["QK"], b["QV"]], [b["QK"].T, b["KK"], b["KV"]], [b["QV"].T, b["KV"].T, b["VV"]]]
    )


@functools.partial(jax.jit, static_argnames="softmax")
def block_norms(X, Y, W_Q, W_K, W_V, *, softmax: bool = True) -> dict[str, dict[str, jnp.ndarray]]:
    """Exact Frobenius norms of the diagonal blocks of ``H``, ``H_o`` and ``H_f``, no block formed.

    Returns ``{"H": {...}, "H_o": {...}, "H_f": {...}}`` with inner keys ``"QQ", "KK", "VV"``
    (0-d arrays in the dtype of ``X``).

    Everything is moved to token space (``L x L`` matrices). With ``B_i`` the Jacobian of
    attention row ``i`` (``diag a_i - a_i a_i^T``; ``I`` for linear attention),
    ``Sigma_i = X^T B_i X``, so ``P_i = X^T (B_i G B_i) X`` with ``G = X W_V W_V^T X^T``, and
    ``N_i = X^T S_i X`` with ``S_i`` the softmax second derivative along ``u_i = X W_V r_i``.
    Then, for any kernels ``M_i = X^T Q_i X``,

    - ``||sum_i x_i x_i^T kron W_K^T M_i W_K||_F^2 = sum_ij (x_i^T x_j)^2 <C_i, C_j>``,
      ``C_i = (X W_K)^T Q_i (X W_K)`` (``d_K x d_K``);
    - ``||sum_i M_i kron q_i q_i^T||_F^2 = sum_ij <R Q_i R^T, R Q_j R^T> (q_i^T q_j)^2``, where
      ``X^T = U R`` is a thin QR factorisation (``R`` is ``min(L, d_V) x L``);
    - ``||c M_1^T M_1 kron I||_F^2 = c^2 d_V ||M_1 M_1^T||_F^2``.

    Cost ``O(L^4 + L^2 d_V^2)`` time, ``O(L^3 + L d_V)`` memory: no ``d_V^2 x d_V^2`` object.
    """
    L, d_V, d_K = attention.check_layer_shapes(X, W_Q, W_K, W_V, Y)
    c, k = 2.0 / (L * d_V), d_K
    A = attention.attention_matrix(X, W_Q, W_K, softmax=softmax)
    XV = X @ W_V  # (L, d_V)
    R = A @ XV - Y  # residual rows r_i
    U = XV @ R.T  # U[j, i] = x_j^T W_V r_i
    if softmax:
        B = softmax_jacobian(A)  # (L, L, L)
        S = softmax_second_derivative_along(A, U.T)  # (L, L, L)
    else:
        B = jnp.broadcast_to(jnp.eye(L, dtype=X.dtype), (L, L, L))
        S = jnp.zeros((L, L, L), dtype=X.dtype)
    G = XV @ XV.T
    Q_o = B @ G @ B  # token-space kernel of P_i
    XK, Xq = X @ W_K, X @ W_Q
    gram_x = (X @ X.T) ** 2  # <x_i x_i^T, x_j x_j^T>
    gram_q = (Xq @ Xq.T) ** 2  # <q_i q_i^T, q_j q_j^T>
    _, Rx = jnp.linalg.qr(X.T)  # X^T = U Rx, Rx: (min(L, d_V), L)

    def qq(Qs):
        C = jnp.swapaxes(XK, 0, 1)[None] @ Qs @ XK[None]  # (L, d_K, d_K)
        return (c / k) * jnp.sqrt(kron_sum_frobenius_sq(gram_x, gram(C)))

    def kk(Qs):
        core = Rx[None] @ Qs @ Rx.T[None]  # (L, m, m): X^T Q_i X in an orthonormal basis
        return (c / k) * jnp.sqrt(kron_sum_frobenius_sq(gram(core), gram_q))

    M1 = A @ X
    vv = c * jnp.sqrt(d_V * jnp.sum((M1 @ M1.T) ** 2))
    zero = jnp.zeros((), dtype=X.dtype)
    return {
        "H": {"QQ": qq(Q_o + S), "KK": kk(Q_o + S), "VV": vv},
        "H_o": {"QQ": qq(Q_o), "KK": kk(Q_o), "VV": vv},
        "H_f": {"QQ": qq(S), "KK": kk(S), "VV": zero},
    }


def dense_block_norms(blocks_H, blocks_o, blocks_f) -> dict[str, dict[str, jnp.ndarray]]:
    """Frobenius norms of the diagonal blocks of three dense block mappings, in the layout of :func:`block_norms`."""
    return {
        name: {key: jnp.linalg.norm(b[key]) for key in DIAGONAL_KEYS}
        for name, b in (("H", blocks_H), ("H_o", blocks_o), ("H_f", blocks_f))
    }
