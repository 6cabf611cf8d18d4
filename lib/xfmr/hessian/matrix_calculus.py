"""Matrix calculus in row-major (C-order) vectorisation.

Conventions used throughout the book (Ormaniec, Dangel, Singh, ICLR 2025):

- ``vec_r(A)`` stacks the rows of ``A`` (NumPy's ``A.reshape(-1)``).
- Kronecker rule: ``vec_r(A B C) = (A kron C^T) vec_r(B)``.
- Jacobian of a matrix function: ``dA/dB = d vec_r(A) / d vec_r(B)^T``, shape
  ``(A.size, B.size)``.
- Commutation matrix ``K_{m,n}`` (Magnus-Neudecker's ``K_{mn}``): the ``mn x mn`` permutation
  with ``K_{m,n} vec_r(B) = vec_r(B^T)`` for every ``B`` of shape ``(n, m)``.
- Frobenius norm of a sum of Kronecker products without forming it:
  ``||sum_i A_i kron B_i||_F^2 = sum_ij <A_i, A_j> <B_i, B_j>``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.core.validate import check_array, check_int


def vec_r(A) -> jnp.ndarray:
    """Row-major vectorisation: ``(m, n) -> (m n,)``, entry ``(i, j)`` goes to ``i n + j``."""
    return check_array(A, "A", ndim=2).reshape(-1)


def unvec_r(v, shape: tuple[int, int]) -> jnp.ndarray:
    """Inverse of :func:`vec_r`: ``(m n,) -> (m, n)``."""
    v = jnp.asarray(v)
    m, n = shape
    if v.shape != (m * n,):
        raise ValueError(f"v must have shape ({m * n},) to fill a {m}x{n} matrix, got {v.shape}")
    return v.reshape(m, n)


def commutation_matrix(
    m: int, n: int, dtype=jnp.float32
) -> jnp.ndarray:
    """Commutation matrix ``K_{m,n}``, shape ``(m n, m n)``.

    ``K_{m,n} vec_r(B) = vec_r(B^T)`` for ``B`` of shape ``(n, m)``;
    ``K_{m,n}^T = K_{n,m}``.
    """
    m = check_int(m, "m", minimum=1)
    n = check_int(n, "n", minimum=1)
    # vec_r(B) index of B[a, b] is a m + b; vec_r(B^T) index of B^T[b,
    # a] = B[a, b] is b n + a.
    a, b = jnp.meshgrid(jnp.arange(n), jnp.arange(m), indexing="ij")
    rows = (b * n + a).reshape(-1)
    cols = (a * m + b).reshape(-1)
    return jnp.zeros((m * n, m * n), dtype=dtype).at[rows, cols].set(1)


@jax.jit
def kron_matvec(A, C, B) -> jnp.ndarray:
    """``(A kron C^T) vec_r(B)`` computed as ``vec_r(A B C)`` without
    forming the Kronecker product.

    Shapes: ``A (p, m)``, ``B (m, n)``, ``C (n, q)``; result ``(p q,)``.
    """
    A, B, C = (
        check_array(M, name, ndim=2)
        for M, name in ((A, "A"), (B, "B"), (C, "C"))
    )
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"A must have B.shape[0] = {B.shape[0]} columns, got shape "
            f"{A.shape}"
        )
    if C.shape[0] != B.shape[1]:
        raise ValueError(
            f"C must have B.shape[1] = {B.shape[1]} rows, got shape "
            f"{C.shape}"
        )
    return (A @ B @ C).reshape(-1)


def matrix_jacobian(f, B) -> jnp.ndarray:
    """Jacobian ``d vec_r(f(B)) / d vec_r(B)^T`` of a matrix function, shape ``(f(B).size, B.size)``."""
    B = check_array(B, "B", ndim=2)
    return jax.jacfwd(lambda b: jnp.ravel(f(b.reshape(B.shape))))(B.reshape(-1))


@jax.jit
def kron_sum(As, Bs) -> jnp.ndarray:
    """Dense ``sum_i A_i kron B_i`` for stacks ``As (n, a1, a2)``, ``Bs (n, b1, b2)``; shape ``(a1 b1, a2 b2)``."""
    As, Bs = check_array(As, "As", ndim=3), check_array(Bs, "Bs", ndim=3)
    if As.shape[0] != Bs.shape[0]:
        raise ValueError(f"As and Bs must hold the same number of matrices, got {As.shape[0]} and {Bs.shape[0]}")
    n, a1, a2 = As.shape
    _, b1, b2 = Bs.shape
    return jnp.einsum("iac,ibd->abcd", As, Bs).reshape(a1 * b1, a2 * b2)


@jax.jit
def gram(Ms) -> jnp.ndarray:
    """Frobenius Gram matrix ``G_ij = <M_i, M_j> = tr(M_i^T M_j)`` of a stack ``(n, r, s)``; shape ``(n, n)``."""
    Ms = check_array(Ms, "Ms", ndim=3)
    flat = Ms.reshape(Ms.shape[0], -1)
    return flat @ flat.T


@jax.jit
def kron_sum_frobenius_sq(gram_A, gram_B) -> jnp.ndarray:
    """``||sum_i A_i kron B_i||_F^2 = sum_ij <A_i, A_j> <B_i, B_j>``
    from the two Gram matrices ``(n, n)``.

    Follows from ``<A kron B, C kron D> = <A, C> <B, D>``; no Kronecker
    product is formed.
    """
    gram_A, gram_B = jnp.asarray(gram_A), jnp.asarray(gram_B)
    if gram_A.ndim != 2 or gram_A.shape[0] != gram_A.shape[1]:
        raise ValueError(
            "gram_A must be a square (n, n) Gram matrix, got shape "
            f"{gram_A.shape}"
        )
    if gram_B.shape != gram_A.shape:
        raise ValueError(
            f"gram_B must have the shape of gram_A {gram_A.shape}, got "
            f"{gram_B.shape}"
        )
    return jnp.sum(gram_A * gram_B)
