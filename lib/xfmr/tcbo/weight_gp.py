"""The Gaussian process of transition-constrained BO, in weight space on a finite set of states.

f(s) = phi(s)^T theta, theta ~ N(0, I). The features are Phi = U sqrt(Lambda) from the
eigendecomposition of the RBF kernel matrix on the states (``xfmr.bayesopt.gp.rbf_kernel``),
so Phi Phi^T = K up to the dropped eigenvalues. After measurements with features phi_t and
noise sd sigma_t the posterior of theta has precision and shift

    V = I + sum_t phi_t phi_t^T / sigma_t^2,      b = sum_t phi_t y_t / sigma_t^2,

mean(s) = phi(s)^T V^-1 b, variance(s) = phi(s)^T V^-1 phi(s) = ||L^-1 phi(s)||^2 with
V = L L^T. The variance of a difference f(z) - f(z') is (phi_z - phi_z')^T V^-1 (phi_z - phi_z')
(:func:`pair_variances`). Factors and solves go through ``xfmr.core.linalg``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.bayesopt.gp import rbf_kernel
from xfmr.core import linalg
from xfmr.core.validate import check_float_dtype, check_int, check_real

__all__ = [
    "features",
    "Posterior",
    "prior",
    "update",
    "posterior_solves",
    "predict_states",
    "whitened_pair_variances",
    "pair_variances",
]


def features(coords, *, lengthscale: float, outputscale: float = 1.0, rel_tol: float = 1e-10,
             dtype=jnp.float64) -> jax.Array:
    """Features Phi (S, m) with Phi Phi^T = K = rbf_kernel(coords, coords) up to dropped eigenvalues.

    Phi = U_m sqrt(Lambda_m) keeps the eigenpairs of K with eigenvalue > rel_tol * max eigenvalue
    (computed in float64, returned as ``dtype``).
    """
    check_real(rel_tol, "rel_tol", minimum=0.0, maximum=1.0)
    dtype = check_float_dtype(dtype)
    K = np.asarray(rbf_kernel(coords, coords, lengthscale=lengthscale, outputscale=outputscale), float)
    lam, U = np.linalg.eigh(K)
    keep = lam > rel_tol * lam.max()
    order = np.argsort(-lam[keep])
    return jnp.asarray(U[:, keep][:, order] * np.sqrt(lam[keep][order]), dtype)


class Posterior(NamedTuple):
    """Posterior of theta ~ N(0, I) in weight space: precision V (m, m) and shift b (m,)."""

    precision: jax.Array
    shift: jax.Array


def prior(n_features: int, dtype=jnp.float64) -> Posterior:
    """The prior theta ~ N(0, I): V = I, b = 0."""
    m = check_int(n_features, "n_features", minimum=1)
    dtype = check_float_dtype(dtype)
    return Posterior(jnp.eye(m, dtype=dtype), jnp.zeros(m, dtype))


@jax.jit
def update(post: Posterior, phi, y, noise_sd) -> Posterior:
    """Add one measurement y = phi^T theta + sigma eps (phi (m,)): V += phi phi^T / s^2, b += phi y / s^2."""
    w = 1.0 / noise_sd**2
    return Posterior(post.precision + w * jnp.outer(phi, phi), post.shift + w * y * phi)


def posterior_solves(post: Posterior, Phi) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(mean, A, L)``: the posterior mean (S,) at the states with features Phi (S, m), the
    whitened features A = L^-1 Phi^T (m, S) (variance = column sums of A^2) and the Cholesky
    factor L of V (the two solves ordered by ``linalg.ordered_solves``)."""
    L = linalg.cholesky(post.precision)
    A, alpha = linalg.ordered_solves(L, Phi.T, post.shift)
    return Phi @ alpha, A, L


@jax.jit
def predict_states(post: Posterior, Phi) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and variance of f at the states with features Phi (S, m); each (S,)."""
    mean, A, _ = posterior_solves(post, Phi)
    return mean, jnp.sum(A**2, 0)


def whitened_pair_variances(A) -> jax.Array:
    """D[z, z'] = ||a_z - a_z'||^2 for the columns of the whitened features A = L^-1 Phi^T (m, S)."""
    G = A.T @ A
    g = jnp.diag(G)
    return g[:, None] + g[None, :] - 2.0 * G


@jax.jit
def pair_variances(precision, Phi) -> jax.Array:
    """D[z, z'] = (phi_z - phi_z')^T V^-1 (phi_z - phi_z'), shape (S, S)."""
    return whitened_pair_variances(linalg.solve_lower(linalg.cholesky(precision), Phi.T))
