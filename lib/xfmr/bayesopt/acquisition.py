"""Acquisition functions for Bayesian optimisation (maximisation throughout).

Given a Gaussian belief f(x) ~ N(mu, sd^2) and the best value observed so far y*:

    EI(x)  = E[max(f(x) - y*, 0)] = sd h(z),   h(z) = z Phi(z) + phi(z),   z = (mu - y*) / sd
    UCB(x) = mu + sqrt(beta) sd                (the book's one UCB convention, Parts IV and V)
    TS     : one joint sample of f from the posterior, maximised.

EI at sd = 0 is max(mu - y*, 0) exactly (the limit sd -> 0); the formula is evaluated only
where sd > 0, so neither value nor gradient is NaN there.

EI underflows to exactly 0 in floating point once z < -38 (float64) or z < -13 (float32):
far from the incumbent every candidate then scores 0, and an argmax picks the first one.
:func:`log_expected_improvement` computes log EI = log sd + log h(z) without forming h, as
BoTorch's LogEI does (Ament et al., NeurIPS 2023): for z <= -1,
h(z) = phi(z) (1 - |z| Phi(z)/phi(z)) with Phi(z)/phi(z) = sqrt(pi/2) erfcx(-z/sqrt 2), and for
very negative z the asymptotic series 1 - |z| Phi(z)/phi(z) = z^-2 (1 - 3 z^-2 + 15 z^-4 - ...).
The BayesOpt loop maximises log-EI.

A bar distribution (:mod:`xfmr.bayesopt.bar`) has EI in closed form, bucket by bucket: a
uniform density on [a, b) with mass p contributes p ((a + b)/2 - y*) if y* <= a,
p (b - y*)^2 / (2 (b - a)) if a < y* < b, and 0 if y* >= b
(:func:`bar_expected_improvement`, and its logarithm :func:`bar_log_expected_improvement`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx, logsumexp
from jax.scipy.stats import norm

from xfmr.bayesopt import bar
from xfmr.core import linalg
from xfmr.core.validate import check_array, check_finite, check_real, is_concrete

__all__ = ["expected_improvement", "log_expected_improvement", "upper_confidence_bound", "thompson_sample",
           "bar_expected_improvement", "bar_log_expected_improvement"]


def _check(mean, std):
    mean = check_finite(check_array(mean, "mean", kind="number"), "mean")
    std = check_finite(check_array(std, "std", kind="number"), "std")
    if is_concrete(std) and bool(jnp.any(std < 0)):
        raise ValueError("std must be >= 0 everywhere")
    return mean, std


def expected_improvement(mean, std, best) -> jax.Array:
    """EI for maximisation, elementwise over broadcast ``mean``, ``std``
    (and ``best``).

    Where ``std == 0`` the result is ``max(mean - best, 0)`` exactly.
    """
    mean, std = _check(mean, std)
    best = check_finite(
        check_array(best, "best", kind="number"), "best"
    )
    diff = mean - best
    positive = std > 0
    safe = jnp.where(positive, std, 1.0)
    z = diff / safe
    ei = diff * norm.cdf(z) + safe * norm.pdf(z)
    return jnp.where(
        positive, jnp.maximum(ei, 0.0), jnp.maximum(diff, 0.0)
    )


def _log_h(z: jax.Array) -> jax.Array:
    """log h(z) = log(z Phi(z) + phi(z)) for every real z, without underflow.

    Three branches, each evaluated at a clipped z so that no branch makes a NaN (nor a NaN
    gradient) where it is not selected:

    - z > -1: the formula itself (no cancellation there);
    - -T < z <= -1: log phi(z) + log(1 - e^w), w = log(|z| sqrt(pi/2) erfcx(-z/sqrt 2)), whose
      relative error grows like eps z^2 (1 - e^w is about z^-2);
    - z <= -T: log phi(z) - 2 log|z| + log(1 - 3 z^-2 + 15 z^-4 - 105 z^-6), whose error is
      about 945 z^-8; T = (945 / eps)^(1/10) balances the two (75 in float64, 9.4 in float32).
    """
    far = float((945.0 / jnp.finfo(z.dtype).eps) ** 0.1)
    log_phi = -0.5 * z**2 - 0.5 * math.log(2.0 * math.pi)
    near = jnp.maximum(z, -1.0)
    direct = jnp.log(near * norm.cdf(near) + norm.pdf(near))
    mid = jnp.clip(z, -far, -1.0)
    w = jnp.log(-mid * math.sqrt(math.pi / 2.0) * erfcx(-mid / math.sqrt(2.0)))
    via_erfcx = log_phi + jnp.log(-jnp.expm1(w))
    tail = jnp.minimum(z, -far)
    r = 1.0 / tail**2
    asymptotic = log_phi - 2.0 * jnp.log(-tail) + jnp.log1p(r * (-3.0 + r * (15.0 - 105.0 * r)))
    return jnp.where(z > -1.0, direct, jnp.where(z > -far, via_erfcx, asymptotic))


def log_expected_improvement(mean, std, best) -> jax.Array:
    """log EI, elementwise over broadcast ``mean``, ``std`` (and ``best``), finite wherever EI > 0
    in exact arithmetic (see the module docstring).

    Where ``std == 0`` the result is ``log(max(mean - best, 0))`` (``-inf`` at no improvement).
    Where EI does not underflow, ``log(expected_improvement(...))`` to rounding.
    """
    mean, std = _check(mean, std)
    best = check_finite(check_array(best, "best", kind="number"), "best")
    diff = mean - best
    positive = std > 0
    safe = jnp.where(positive, std, 1.0)
    at_zero = jnp.log(jnp.where(diff > 0, diff, 1.0))
    return jnp.where(positive, jnp.log(safe) + _log_h(diff / safe), jnp.where(diff > 0, at_zero, -jnp.inf))


def upper_confidence_bound(mean, std, beta) -> jax.Array:
    """mu + sqrt(beta) sd, elementwise; ``beta >= 0`` sets how much uncertainty is worth."""
    mean, std = _check(mean, std)
    if is_concrete(beta):
        check_real(float(beta) if hasattr(beta, "item") else beta, "beta", minimum=0.0)
    return mean + jnp.sqrt(beta) * std


def thompson_sample(mean, cov, key, *, jitter: float = 1e-9) -> jax.Array:
    """One draw of f ~ N(mean, cov) at the m candidates, shape (m,), in the dtype of ``cov``.

    Uses the Cholesky factor of cov + jitter * max(diag) I (float64 advised).
    """
    mean = check_finite(check_array(mean, "mean", ndim=1, kind="number"), "mean")
    cov = check_finite(check_array(cov, "cov", ndim=2, kind="number"), "cov")
    if cov.shape != (mean.shape[0], mean.shape[0]):
        raise ValueError(f"cov must have shape ({mean.shape[0]}, {mean.shape[0]}), got {cov.shape}")
    check_real(jitter, "jitter", minimum=0.0)
    scale = jnp.maximum(jnp.max(jnp.diag(cov)), 1e-300)
    L = linalg.cholesky(cov + jitter * scale * jnp.eye(cov.shape[0], dtype=cov.dtype))
    if is_concrete(L) and not bool(jnp.all(jnp.isfinite(L))):
        raise ValueError(f"cov is not positive definite after jitter {jitter:.3g}; raise jitter")
    return mean + L @ jax.random.normal(key, mean.shape, cov.dtype)


def _bar_improvement(logits, borders, best):
    """Bucket masses p (..., B) and each bucket's improvement per unit
    mass (..., B).
    """
    logits, borders = bar.check_logits_and_borders(logits, borders)
    best = check_finite(
        check_array(best, "best", kind="number"), "best"
    )[..., None]
    a, b = borders[:-1], borders[1:]
    above = 0.5 * (a + b) - best
    inside = (b - best) ** 2 / (2.0 * (b - a))
    return logits, jnp.where(
        best <= a, above, jnp.where(best < b, inside, 0.0)
    )


def bar_expected_improvement(logits, borders, best) -> jax.Array:
    """E[max(Y - best, 0)] under the bar distribution, closed form;
    logits (..., B), best (...).
    """
    logits, per = _bar_improvement(logits, borders, best)
    return jnp.sum(bar.probabilities(logits) * per, axis=-1)


def bar_log_expected_improvement(logits, borders, best) -> jax.Array:
    """log of :func:`bar_expected_improvement` as a log-sum-exp over the buckets, so that bucket
    masses far below the float range still count; ``-inf`` where no bucket lies above ``best``."""
    logits, per = _bar_improvement(logits, borders, best)
    log_per = jnp.log(jnp.where(per > 0, per, 1.0))
    terms = jnp.where(per > 0, jax.nn.log_softmax(logits, axis=-1) + log_per, -jnp.inf)
    return logsumexp(terms, axis=-1)
