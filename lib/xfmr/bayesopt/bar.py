"""The bar ("Riemann") distribution: a piecewise-constant density on B buckets.

Borders b_0 < b_1 < ... < b_B, bucket widths w_i = b_{i+1} - b_i, logits l (B,):

    p(y) = softmax(l)_i / w_i        for y in [b_i, b_{i+1}),

so -log p(y) = cross-entropy on the bucket index + log w_i: training a classifier over buckets
with cross-entropy trains a density. Targets outside [b_0, b_B] are clipped into the outer
buckets (the PFN library replaces the two outer buckets by half-normal tails instead; here the
borders hold all but ``2 eps`` of the prior mass, so clipping is rare and it is applied the same
way to every distribution compared on a page).

Borders with equal prior mass: b_i = F^{-1}(eps + (1 - 2 eps) i / B) for a prior CDF F; for a
zero-mean Gaussian prior marginal this is analytic (:func:`normal_borders`).

:func:`binned_normal` is the best any bar distribution on given buckets can do for a Gaussian
target, and :func:`kl_from_masses` measures how far a bar distribution is from such bucket
masses. Expected improvement of a bar distribution is in :mod:`xfmr.bayesopt.acquisition`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm
from scipy.special import ndtri

from xfmr.core.validate import check_array, check_float_dtype, check_int, check_real, is_concrete

__all__ = ["normal_borders", "check_borders", "check_logits_and_borders", "bucket_index", "log_density", "nll",
           "probabilities", "mean", "variance", "cdf", "quantile", "binned_normal", "kl_from_masses",
           "mixture_normal_borders", "central_coverage"]


def check_borders(borders) -> jax.Array:
    """``ValueError`` unless ``borders`` is 1-D, finite, with >= 2 strictly increasing entries."""
    borders = check_array(borders, "borders", ndim=1, kind="float")
    if borders.shape[0] < 2:
        raise ValueError(f"borders must have at least 2 entries (one bucket), got {borders.shape[0]}")
    if is_concrete(borders):  # NumPy, so that the check also runs while a caller is being traced
        b = np.asarray(borders)
        if not np.all(np.isfinite(b)):
            raise ValueError("borders must be finite")
        if not np.all(np.diff(b) > 0):
            bad = int(np.argmin(np.diff(b)))
            raise ValueError(f"borders must be strictly increasing; borders[{bad}] = {b[bad]:.6g} "
                             f">= borders[{bad + 1}] = {b[bad + 1]:.6g}")
    return borders


def _finite(x, name):
    if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError(f"{name} must be finite")
    return x


def normal_borders(n_buckets: int, scale: float, *, eps: float = 1e-3, dtype=jnp.float32) -> jax.Array:
    """B + 1 borders of equal mass (1 - 2 eps)/B under N(0, scale^2), computed in float64
    (NumPy) and returned in ``dtype``."""
    n_buckets = check_int(n_buckets, "n_buckets", minimum=1)
    scale = check_real(scale, "scale", minimum=0.0, strict_minimum=True)
    eps = check_real(eps, "eps", minimum=0.0, maximum=0.5, strict_minimum=True)
    dtype = check_float_dtype(dtype)
    u = eps + (1 - 2 * eps) * np.arange(n_buckets + 1, dtype=np.float64) / n_buckets
    return jnp.asarray(scale * ndtri(u), dtype)


def mixture_normal_borders(n_buckets: int, scales, *, eps: float = 1e-3, dtype=jnp.float32) -> jax.Array:
    """B + 1 borders of equal mass (1 - 2 eps)/B under the equal-weight mixture of
    N(0, scales_k^2), k = 1..K: the prior marginal of y when the outputscale and noise are
    drawn from a hyper-prior (``scales`` = sqrt(s^2 + sigma^2) of K prior draws).

    Each border solves F(b) = eps + (1 - 2 eps) i / B with F(y) = mean_k Phi(y / scale_k),
    by bisection in float64 (NumPy) to 1e-12 relative; a single scale gives
    :func:`normal_borders`.
    """
    n_buckets = check_int(n_buckets, "n_buckets", minimum=1)
    s = np.asarray(scales, np.float64).reshape(-1)
    if s.size == 0 or not np.all(np.isfinite(s)) or not np.all(s > 0):
        raise ValueError(f"scales must be a non-empty array of finite positive values, got {s.size} entries")
    eps = check_real(eps, "eps", minimum=0.0, maximum=0.5, strict_minimum=True)
    dtype = check_float_dtype(dtype)
    from scipy.special import ndtr

    u = eps + (1 - 2 * eps) * np.arange(n_buckets + 1, dtype=np.float64) / n_buckets
    lo = np.full_like(u, ndtri(u.min()) * s.max())
    hi = np.full_like(u, ndtri(u.max()) * s.max())
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = ndtr(mid[:, None] / s[None, :]).mean(1) < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= 1e-12 * np.maximum(1.0, np.abs(mid))):
            break
    return jnp.asarray(0.5 * (lo + hi), dtype)


def central_coverage(cdf_values, level) -> jax.Array:
    """Whether y lies in the central ``level`` interval of its predictive, from u = F(y):
    |u - 1/2| <= level / 2 (elementwise, float 0/1). For a calibrated predictive u is uniform
    and the mean is ``level``."""
    level = check_real(level, "level", minimum=0.0, maximum=1.0)
    u = check_array(cdf_values, "cdf_values", kind="float")
    return (jnp.abs(u - 0.5) <= 0.5 * level).astype(u.dtype)


def check_logits_and_borders(logits, borders) -> tuple[jax.Array, jax.Array]:
    """``(logits, borders)`` checked: borders as :func:`check_borders`, float logits with
    B = len(borders) - 1 entries on the last axis."""
    borders = check_borders(borders)
    logits = check_array(logits, "logits", kind="float")
    if logits.shape[-1] != borders.shape[0] - 1:
        raise ValueError(f"logits must have B = {borders.shape[0] - 1} entries on the last axis "
                         f"(len(borders) - 1), got shape {logits.shape}")
    return logits, borders


def bucket_index(y, borders) -> jax.Array:
    """Index i of the bucket [b_i, b_{i+1}) holding y, clipped to 0..B-1."""
    borders = check_borders(borders)
    y = _finite(check_array(y, "y", kind="number"), "y")
    return jnp.clip(jnp.searchsorted(borders, y, side="right") - 1, 0, borders.shape[0] - 2)


def probabilities(logits, borders=None) -> jax.Array:
    """softmax(logits) over the last axis (bucket masses)."""
    return jax.nn.softmax(logits, axis=-1)


def log_density(logits, borders, y) -> jax.Array:
    """log p(y) = log softmax(logits)_i - log w_i with i the (clipped) bucket of y; broadcasts
    logits (..., B) against y (...)."""
    logits, borders = check_logits_and_borders(logits, borders)
    i = bucket_index(y, borders)
    logp = jax.nn.log_softmax(logits, axis=-1)
    widths = jnp.diff(borders)
    return jnp.take_along_axis(logp, i[..., None], axis=-1)[..., 0] - jnp.log(widths[i])


def nll(logits, borders, y) -> jax.Array:
    """Mean of -log p(y): the PFN training loss (a B-way cross-entropy plus log widths)."""
    return -jnp.mean(log_density(logits, borders, y))


def mean(logits, borders) -> jax.Array:
    """E[y] = sum_i p_i (b_i + b_{i+1}) / 2."""
    logits, borders = check_logits_and_borders(logits, borders)
    return probabilities(logits) @ (0.5 * (borders[1:] + borders[:-1]))


def variance(logits, borders) -> jax.Array:
    """Var[y] with E[y^2] = sum_i p_i (a^2 + ab + b^2) / 3 per bucket [a, b)."""
    logits, borders = check_logits_and_borders(logits, borders)
    a, b = borders[:-1], borders[1:]
    p = probabilities(logits)
    return p @ ((a * a + a * b + b * b) / 3.0) - (p @ (0.5 * (a + b))) ** 2


def cdf(logits, borders, y) -> jax.Array:
    """P(Y <= y), piecewise linear; logits (..., B), y (...)."""
    logits, borders = check_logits_and_borders(logits, borders)
    a, b = borders[:-1], borders[1:]
    frac = jnp.clip((jnp.asarray(y)[..., None] - a) / (b - a), 0.0, 1.0)
    return jnp.sum(probabilities(logits) * frac, axis=-1)


def quantile(logits, borders, q) -> jax.Array:
    """The q-quantile (inverse of the piecewise-linear CDF); logits (B,), q scalar in (0, 1)."""
    logits, borders = check_logits_and_borders(logits, borders)
    c = jnp.concatenate([jnp.zeros(1, logits.dtype), jnp.cumsum(probabilities(logits))])
    return jnp.interp(q, c, borders)


def binned_normal(mu, sd, borders) -> jax.Array:
    """Bucket masses of N(mu, sd^2) on ``borders``, the outer buckets absorbing the tails
    (the same clipping as :func:`bucket_index`): the best any bar distribution on these
    buckets can do. mu, sd (...) -> (..., B)."""
    borders = check_borders(borders)
    inner = borders[1:-1]
    c = norm.cdf((inner - jnp.asarray(mu)[..., None]) / jnp.asarray(sd)[..., None])
    zeros, ones = jnp.zeros_like(c[..., :1]), jnp.ones_like(c[..., :1])
    return jnp.diff(jnp.concatenate([zeros, c, ones], axis=-1), axis=-1)


def kl_from_masses(p, logits, *, floor: float = 1e-300) -> jax.Array:
    """KL(p || q) = sum_i p_i (log p_i - log q_i) in nats, from bucket masses p (..., B) to the
    bar distribution q = softmax(logits) (..., B); -> (...).

    ``logits`` may be any log-masses (``log q`` itself, or a network's output). A bucket with
    p_i = 0 contributes 0; log q_i is floored at log(``floor``), so a q that puts (numerically)
    no mass where p has some gives a large finite KL instead of infinity.
    """
    p = check_array(p, "p", kind="float")
    logits = check_array(logits, "logits", kind="float")
    log_q = jnp.maximum(jax.nn.log_softmax(logits, axis=-1), jnp.log(jnp.asarray(floor, logits.dtype)))
    safe_p = jnp.where(p > 0, p, 1.0)
    return jnp.sum(jnp.where(p > 0, p * (jnp.log(safe_p) - log_q), 0.0), axis=-1)
