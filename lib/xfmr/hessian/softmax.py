"""First and second derivatives of the softmax, the nonlinearity inside attention.

For a score vector ``t`` (length ``n``) and ``a = softmax(t)``:

- Jacobian ``da/dt = diag(a) - a a^T`` (symmetric, PSD, rows sum to zero).
- Second derivative ``d^2 a_j / dt_k dt_l = a_j (d_jk - a_k)(d_jl - a_l) - a_j a_k (d_kl - a_l)``.
- Contracted with a fixed vector ``u`` (the only form the Hessian of a loss needs):
  ``d^2 (a^T u) / dt dt^T = sum_j a_j (u_j - ubar)(e_j - a)(e_j - a)^T
  = diag(a * w) - (a * w) a^T - a (a * w)^T`` with ``w = u - a^T u``
  (the third central moment of the one-hot vectors ``e_j`` under ``a``, in direction ``u``).

Row-wise softmax of a matrix ``T (L, L)`` has the block-diagonal Jacobian
``dA/dT = blockdiag_i(diag a_i - a_i a_i^T)`` in row-major order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.core.validate import check_array


def _probabilities(a) -> jnp.ndarray:
    a = check_array(a, "a", kind="float")
    if a.ndim < 1 or a.shape[-1] < 1:
        raise ValueError(f"a must have a last axis of probabilities (..., n), got shape {a.shape}")
    return a


@jax.jit
def softmax_jacobian(a) -> jnp.ndarray:
    """``diag(a) - a a^T`` for softmax outputs ``a (..., n)``; shape ``(..., n, n)``."""
    a = _probabilities(a)
    return a[..., :, None] * jnp.eye(a.shape[-1], dtype=a.dtype) - a[..., :, None] * a[..., None, :]


@jax.jit
def softmax_second_derivative(a) -> jnp.ndarray:
    """Tensor ``D[..., j, k, l] = d^2 a_j / dt_k dt_l`` for softmax outputs ``a (..., n)``; shape ``(..., n, n, n)``."""
    a = _probabilities(a)
    n = a.shape[-1]
    E = jnp.eye(n, dtype=a.dtype)
    c = E - a[..., None, :]  # c[j, k] = d_jk - a_k
    first = a[..., :, None, None] * c[..., :, :, None] * c[..., :, None, :]
    second = a[..., :, None, None] * a[..., None, :, None] * c[..., None, :, :]
    return first - second


@jax.jit
def softmax_second_derivative_along(a, u) -> jnp.ndarray:
    """``d^2 (a^T u) / dt dt^T = diag(a w) - (a w) a^T - a (a w)^T``,
    ``w = u - a^T u``.

    Shapes: ``a (..., n)``, ``u (..., n)`` (broadcast together); result
        ``(..., n, n)``.
    """
    a = _probabilities(a)
    u = jnp.asarray(u)
    if u.shape[-1:] != a.shape[-1:]:
        raise ValueError(
            f"u must have last axis {a.shape[-1]} like a, got shape "
            f"{u.shape}"
        )
    aw = a * (u - jnp.sum(a * u, axis=-1, keepdims=True))
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    return (
        aw[..., :, None] * eye
        - aw[..., :, None] * a[..., None, :]
        - a[..., :, None] * aw[..., None, :]
    )


@jax.jit
def row_softmax_jacobian(A) -> jnp.ndarray:
    """Dense ``dA/dT = blockdiag_i(diag a_i - a_i a_i^T)`` of the row-wise softmax, shape ``(L n, L n)``."""
    A = check_array(A, "A", ndim=2)
    L, n = A.shape
    blocks = softmax_jacobian(A)  # (L, n, n)
    eye_L = jnp.eye(L, dtype=A.dtype)
    return jnp.einsum("ij,iab->iajb", eye_L, blocks).reshape(L * n, L * n)
