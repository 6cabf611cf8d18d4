"""The Cholesky solves behind every Gaussian posterior in the book, safe under ``vmap``.

A Gaussian posterior with a positive-definite matrix $K = L L^\\top$ needs two solves with the
same factor: $V = L^{-1} B$ (the variance, $\\lVert V_{:,j} \\rVert^2$) and
$\\alpha = K^{-1} y = L^{-\\top} L^{-1} y$ (the mean). The two do not depend on each other, so
XLA may run them at the same time. On the CPU, batched (under ``vmap``) triangular solves are
jaxlib's LAPACK kernels, which split a batch over a small thread pool and wait for it; two of
them started at once on a two-core machine can each wait for work queued behind the other, and
the program hangs (seen in the book's vmapped BayesOpt and TC-BO runs). :func:`ordered_solves`
puts an ``optimization_barrier`` between them: the mean's solve starts after the variance's
solve has finished. The barrier orders the computation and changes no value.

Every Gaussian process of the book (Part IV's function-space GP and its masked form, Part V's
weight-space GP) factors and solves through this module.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

__all__ = ["cholesky", "solve_lower", "cho_solve", "ordered_solves"]


def cholesky(K: jax.Array) -> jax.Array:
    """Lower Cholesky factor $L$ of a positive-definite ``K`` (n, n), $K = L L^\\top$.

    A matrix that is not positive definite gives NaN entries (JAX's convention); callers that
    hold concrete values check for them and say what to change.
    """
    return jnp.linalg.cholesky(K)


def solve_lower(L: jax.Array, B: jax.Array) -> jax.Array:
    """$L^{-1} B$ for a lower-triangular ``L`` (n, n) and ``B`` (n,) or (n, m)."""
    return jsl.solve_triangular(L, B, lower=True)


def cho_solve(L: jax.Array, y: jax.Array) -> jax.Array:
    """$K^{-1} y = L^{-\\top} L^{-1} y$ from the factor ``L`` of $K$; ``y`` (n,) or (n, m)."""
    return jsl.cho_solve((L, True), y)


def ordered_solves(L: jax.Array, B: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(L^{-1} B, K^{-1} y)`` with the second solve ordered after the first.

    Args:
        L: lower Cholesky factor (n, n) of $K$.
        B: right-hand sides of the triangular solve, (n, m) (e.g. $k(X, X_*)$).
        y: right-hand side of the full solve, (n,).

    Returns:
        ``V = L^{-1} B`` (n, m) and ``alpha = K^{-1} y`` (n,), the values of the unordered
        computation; see the module docstring for why they are ordered.
    """
    V = solve_lower(L, B)
    V, L = jax.lax.optimization_barrier((V, L))
    return V, cho_solve(L, y)
