"""Acquisition functions for Bayesian optimisation (maximisation throughout).

Given a Gaussian belief f(x) ~ N(mu, sd^2) and the best value observed so far y*:

    EI(x)  = E[max(f(x) - y*, 0)] = (mu - y*) Phi(z) + sd phi(z),   z = (mu - y*) / sd
    UCB(x) = mu + sqrt(beta) sd
    TS     : one joint sample of f from the posterior, maximised.

EI at sd = 0 is max(mu - y*, 0) exactly (the limit sd -> 0); the formula is evaluated only
where sd > 0, so neither value nor gradient is NaN there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.stats import norm

from xfmr.core.validate import check_array, check_finite, check_real, is_concrete

__all__ = ["expected_improvement", "upper_confidence_bound", "thompson_sample"]


def _check(mean, std):
    mean = check_finite(check_array(mean, "mean", kind="number"), "mean")
    std = check_finite(check_array(std, "std", kind="number"), "std")
    if is_concrete(std) and bool(jnp.any(std < 0)):
        raise ValueError("std must be >= 0 everywhere")
    return mean, std


def expected_improvement(mean, std, best) -> jax.Array:
    """EI for maximisation, elementwise over broadcast ``mean``, ``std`` (and ``best``).

    Where ``std == 0`` the result is ``max(mean - best, 0)`` exactly.
    """
    mean, std = _check(mean, std)
    best = check_finite(check_array(best, "best", kind="number"), "best")
    diff = mean - best
    positive = std > 0
    safe = jnp.where(positive, std, 1.0)
    z = diff / safe
    ei = diff * norm.cdf(z) + safe * norm.pdf(z)
    return jnp.where(positive, jnp.maximum(ei, 0.0), jnp.maximum(diff, 0.0))


def upper_confidence_bound(mean, std, beta) -> jax.Array:
    """mu + sqrt(beta) sd, elementwise; ``beta >= 0`` sets how much uncertainty is worth."""
    mean, std = _check(mean, std)
    if is_concrete(beta):
        check_real(float(beta) if hasattr(beta, "item") else beta, "beta", minimum=0.0)
    return mean + jnp.sqrt(beta) * std


def thompson_sample(mean, cov, key, *, jitter: float = 1e-9) -> jax.Array:
    """One draw of f ~ N(mean, cov) at the m candidates, shape (m,).

    Uses the Cholesky factor of cov + jitter * max(diag) I (float64 advised).
    """
    mean = check_finite(check_array(mean, "mean", ndim=1, kind="number"), "mean")
    cov = check_finite(check_array(cov, "cov", ndim=2, kind="number"), "cov")
    if cov.shape != (mean.shape[0], mean.shape[0]):
        raise ValueError(f"cov must have shape ({mean.shape[0]}, {mean.shape[0]}), got {cov.shape}")
    check_real(jitter, "jitter", minimum=0.0)
    scale = jnp.maximum(jnp.max(jnp.diag(cov)), 1e-300)
    L = jnp.linalg.cholesky(cov + jitter * scale * jnp.eye(cov.shape[0], dtype=cov.dtype))
    if is_concrete(L) and not bool(jnp.all(jnp.isfinite(L))):
        raise ValueError(f"cov is not positive definite after jitter {jitter:.3g}; raise jitter")
    return mean + L @ jax.random.normal(key, mean.shape, cov.dtype)
