"""Attention moments: each attention row ``a_i`` is a distribution over the tokens ``x_j``.

With ``X (L, d)`` (row ``j`` is ``x_j``) and a row-stochastic ``A (L, L)``:

- mean ``mu_i = sum_j a_ij x_j``; all rows: ``M_1 = A X``;
- covariance ``Sigma_i = sum_j a_ij (x_j - mu_i)(x_j - mu_i)^T = X^T (diag a_i - a_i a_i^T) X``;
- third central moment in a direction ``v``:
  ``M3_i[v] = sum_j a_ij (x_j - mu_i)(x_j - mu_i)^T ((x_j - mu_i)^T v)``;
- data-attention matrix ``Z_1 = (I_L kron X^T) dA/dT (X kron X)``, shape ``(L d, d^2)``, whose
  block row ``i`` is ``x_i^T kron Sigma_i``.

These are the only ways the softmax enters the Hessian of the layer.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.core.validate import check_array
from xfmr.hessian.softmax import row_softmax_jacobian


def _check(X, A) -> tuple[jnp.ndarray, jnp.ndarray]:
    X, A = check_array(X, "X", ndim=2), jnp.asarray(A)
    L = X.shape[0]
    if A.ndim != 2 or A.shape[1] != L:
        raise ValueError(f"A must have shape (n_rows, L) = (n_rows, {L}) (a distribution over the {L} tokens per row), got {A.shape}")
    return X, A


@jax.jit
def attention_mean(X, A) -> jnp.ndarray:
    """Means ``mu_i`` stacked as rows: ``M_1 = A X``, shape ``(n_rows, d)``."""
    X, A = _check(X, A)
    return A @ X


@jax.jit
def attention_covariance(X, A) -> jnp.ndarray:
    """Covariances ``Sigma_i = sum_j a_ij (x_j - mu_i)(x_j - mu_i)^T``,
    shape ``(n_rows, d, d)``."""
    X, A = _check(X, A)
    centred = (
        X[None, :, :] - (A @ X)[:, None, :]
    )  # (n_rows, L, d): x_j - mu_i (no cancellation when A is sharp)
    return jnp.einsum("ij,ijp,ijq->ipq", A, centred, centred)


@jax.jit
def attention_third_moment(X, A, V) -> jnp.ndarray:
    """``M3_i[v_i]`` for one direction per row, ``V (n_rows, d)`` (row ``i`` is ``v_i``); shape ``(n_rows, d, d)``."""
    X, A = _check(X, A)
    V = jnp.asarray(V)
    if V.shape != (A.shape[0], X.shape[1]):
        raise ValueError(f"V must have shape (n_rows, d) = ({A.shape[0]}, {X.shape[1]}), got {V.shape}")
    centred = X[None, :, :] - (A @ X)[:, None, :]  # (n_rows, L, d): x_j - mu_i
    weights = A * jnp.einsum("ijp,ip->ij", centred, V)  # a_ij (x_j - mu_i)^T v_i
    return jnp.einsum("ij,ijp,ijq->ipq", weights, centred, centred)


@jax.jit
def attention_third_moment_tensor(X, A) -> jnp.ndarray:
    """Full third central moments ``sum_j a_ij c_ij kron c_ij kron c_ij``, ``c_ij = x_j - mu_i``; shape ``(n_rows, d, d, d)``."""
    X, A = _check(X, A)
    centred = X[None, :, :] - (A @ X)[:, None, :]
    return jnp.einsum("ij,ijp,ijq,ijr->ipqr", A, centred, centred, centred)


@jax.jit
def data_attention_matrix(X, A) -> jnp.ndarray:
    """``Z_1 = (I_L kron X^T) dA/dT (X kron X)`` from its definition (softmax attention), shape ``(L d, d^2)``."""
    X, A = _check(X, A)
    L, d = X.shape
    if A.shape[0] != L:
        raise ValueError(f"A must be square (L, L) = ({L}, {L}) for Z_1, got {A.shape}")
    left = jnp.kron(jnp.eye(L, dtype=X.dtype), X.T)
    return left @ row_softmax_jacobian(A) @ jnp.kron(X, X)


@jax.jit
def data_attention_matrix_moments(X, A) -> jnp.ndarray:
    """``Z_1`` in moment form: block row ``i`` is ``x_i^T kron Sigma_i``; shape ``(L d, d^2)``."""
    X, A = _check(X, A)
    L, d = X.shape
    Sigma = attention_covariance(X, A)
    return jnp.einsum("ip,iaq->iapq", X, Sigma).reshape(L * d, d * d)
