"""Exact Gaussian-process regression with the squared-exponential (RBF) kernel.

Model: f ~ GP(0, k) with k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2)) (``outputscale`` = s^2,
``lengthscale`` = l), observations y = f(X) + eps with eps ~ N(0, noise I).
With K = k(X, X) + noise I = L L^T (Cholesky) and k_* = k(X, x_*):

    mean(x_*)     = k_*^T K^{-1} y
    variance(x_*) = k(x_*, x_*) - k_*^T K^{-1} k_*            (of the latent f, without noise)
    log p(y | X)  = -1/2 y^T K^{-1} y - sum_i log L_ii - n/2 log(2 pi)

Computed in the dtype of the inputs (float64 when ``jax_enable_x64`` is on).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from xfmr.validate import check_array, check_finite, check_real, is_concrete

__all__ = ["rbf_kernel", "posterior", "log_marginal_likelihood"]


def _check_hyper(lengthscale, outputscale, noise=None) -> None:
    """Positive lengthscale and outputscale, non-negative noise (concrete scalars only)."""
    for value, name, strict in ((lengthscale, "lengthscale", True), (outputscale, "outputscale", True),
                                (noise, "noise", False)):
        if value is None or not is_concrete(value):
            continue
        if isinstance(value, jax.Array):
            if value.ndim != 0:
                raise ValueError(f"{name} must be a scalar, got shape {value.shape}")
            value = value.item()
        check_real(value, name, minimum=0.0, strict_minimum=strict)


def _check_inputs(X, name: str) -> jax.Array:
    X = check_array(X, name, ndim=2, kind="number")
    return check_finite(X if jnp.issubdtype(X.dtype, jnp.floating) else X.astype(float), name)


def rbf_kernel(X1, X2, *, lengthscale, outputscale) -> jax.Array:
    """The kernel matrix k(X1, X2), shape (n, m), for X1 (n, d) and X2 (m, d)."""
    _check_hyper(lengthscale, outputscale)
    X1, X2 = _check_inputs(X1, "X1"), _check_inputs(X2, "X2")
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"X1 and X2 must have the same number of columns d, got {X1.shape} and {X2.shape}")
    sq = jnp.sum(X1**2, 1)[:, None] + jnp.sum(X2**2, 1)[None, :] - 2.0 * X1 @ X2.T
    return outputscale * jnp.exp(-jnp.maximum(sq, 0.0) / (2.0 * lengthscale**2))


def _cholesky(X, *, lengthscale, outputscale, noise) -> jax.Array:
    K = rbf_kernel(X, X, lengthscale=lengthscale, outputscale=outputscale)
    L = jnp.linalg.cholesky(K + noise * jnp.eye(X.shape[0], dtype=K.dtype))
    if is_concrete(L) and not bool(jnp.all(jnp.isfinite(L))):
        raise ValueError("the kernel matrix k(X, X) + noise I is not positive definite "
                         f"(noise={float(noise):.3g}); add noise or remove duplicate rows of X")
    return L


def _check_targets(X, y) -> jax.Array:
    y = check_finite(check_array(y, "y", ndim=1, kind="number"), "y")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one entry per row of X ({X.shape[0]}), got shape {y.shape}")
    return y


def posterior(X, y, X_star, *, lengthscale, outputscale, noise) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and latent variance at X_star (m, d) given X (n, d), y (n,).

    Returns ``(mean, variance)``, each of shape (m,); ``variance`` is that of f(X_star), without
    the observation noise, clipped at 0 against rounding.
    """
    _check_hyper(lengthscale, outputscale, noise)
    X, X_star = _check_inputs(X, "X"), _check_inputs(X_star, "X_star")
    y = _check_targets(X, y)
    if X_star.shape[1] != X.shape[1]:
        raise ValueError(f"X_star must have d = {X.shape[1]} columns like X, got shape {X_star.shape}")
    L = _cholesky(X, lengthscale=lengthscale, outputscale=outputscale, noise=noise)
    k_star = rbf_kernel(X, X_star, lengthscale=lengthscale, outputscale=outputscale)
    alpha = jsl.cho_solve((L, True), y.astype(L.dtype))
    v = jsl.solve_triangular(L, k_star, lower=True)
    mean = k_star.T @ alpha
    variance = outputscale - jnp.sum(v**2, axis=0)
    return mean, jnp.maximum(variance, 0.0)


def log_marginal_likelihood(X, y, *, lengthscale, outputscale, noise) -> jax.Array:
    """log p(y | X) under the GP prior, a scalar."""
    _check_hyper(lengthscale, outputscale, noise)
    X = _check_inputs(X, "X")
    y = _check_targets(X, y)
    L = _cholesky(X, lengthscale=lengthscale, outputscale=outputscale, noise=noise)
    alpha = jsl.cho_solve((L, True), y.astype(L.dtype))
    n = X.shape[0]
    return -0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * n * jnp.log(2.0 * jnp.pi)
