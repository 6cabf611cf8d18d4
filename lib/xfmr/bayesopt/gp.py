"""Exact Gaussian-process regression with the squared-exponential (RBF) kernel.

Model: f ~ GP(0, k) with k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2)) (``outputscale`` = s^2,
``lengthscale`` = l), observations y = f(X) + eps with eps ~ N(0, noise I).
With K = k(X, X) + noise I = L L^T (Cholesky) and k_* = k(X, x_*):

    mean(x_*)     = k_*^T K^{-1} y
    variance(x_*) = k(x_*, x_*) - k_*^T K^{-1} k_*            (of the latent f, without noise)
    log p(y | X)  = -1/2 y^T K^{-1} y - sum_i log L_ii - n/2 log(2 pi)

Computed in the dtype of the inputs (float64 when the caller passes float64 with
``jax_enable_x64`` on). :func:`rbf_kernel` is the one Gram function of the book (the test
functions, the PFN's prior and Part V's features call it); every factor and solve goes through
:mod:`xfmr.core.linalg`. The three hyperparameters travel together as one :class:`GPParams`.

Every computation is a *masked* one: :func:`masked_posterior`,
:func:`masked_posterior_covariance` and :func:`masked_log_marginal_likelihood` use only the
rows of a fixed-size X with ``mask == 1``. A masked-out row gets kernel row/column e_i and
target 0, so it decouples exactly (its factor of the Cholesky is 1); its log-likelihood term
-1/2 log(2 pi) is removed. Fixed shapes let a whole BayesOpt run be one ``lax.scan``. The
plain :func:`posterior`, :func:`posterior_covariance` and :func:`log_marginal_likelihood` are
the masked ones with every row observed, plus checks of concrete inputs (and a clear error
where the kernel matrix is not positive definite).

:func:`fit_hyperparameters` is type-II maximum likelihood: Adam (optax) on the logarithms of
the three hyperparameters inside a box, from several starts, the best evidence kept.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from xfmr.core import linalg
from xfmr.core.validate import check_array, check_finite, check_int, check_real, is_concrete

__all__ = ["GPParams", "HyperFit", "HYPER_BOUNDS", "rbf_kernel", "posterior", "log_marginal_likelihood",
           "posterior_covariance", "masked_posterior", "masked_posterior_covariance",
           "masked_log_marginal_likelihood", "fit_hyperparameters"]


class GPParams(NamedTuple):
    """The kernel's hyperparameters: lengthscale l, outputscale s^2 and noise variance.

    Pass them to the functions of this module as keywords: ``gp.posterior(X, y, Xs, **h._asdict())``.
    """

    lengthscale: Any
    outputscale: Any
    noise: Any


HYPER_BOUNDS = GPParams(lengthscale=(0.02, 5.0), outputscale=(0.05, 20.0), noise=(1e-6, 0.5))
"""Box (lower, upper) of each hyperparameter in the type-II ML search (inputs in the unit cube,
standardized targets)."""


class HyperFit(NamedTuple):
    """Result of :func:`fit_hyperparameters`.

    Attributes:
        params: the fitted :class:`GPParams` (scalars).
        lml: its log marginal likelihood.
        n_nonfinite: the number of Adam steps, over all restarts, whose gradient had a
            non-finite entry (those entries were set to 0 for that step); 0 in a healthy fit.
    """

    params: GPParams
    lml: jax.Array
    n_nonfinite: jax.Array


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
    """The kernel matrix k(X1, X2), shape (n, m), for X1 (n, d) and X2 (m, d).

    Squared distances as |a|^2 + |b|^2 - 2 a.b (one matrix product), floored at 0 against
    rounding. Traceable; the checks apply to concrete arguments.
    """
    _check_hyper(lengthscale, outputscale)
    X1, X2 = _check_inputs(X1, "X1"), _check_inputs(X2, "X2")
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"X1 and X2 must have the same number of columns d, got {X1.shape} and {X2.shape}")
    sq = jnp.sum(X1**2, 1)[:, None] + jnp.sum(X2**2, 1)[None, :] - 2.0 * X1 @ X2.T
    return outputscale * jnp.exp(-jnp.maximum(sq, 0.0) / (2.0 * lengthscale**2))


# --- the masked computations (traceable: no checks that need concrete values) -------------

def _factor(X, mask, lengthscale, outputscale, noise, jitter):
    """Cholesky factor L of k(X, X) + (noise + jitter) I restricted to the masked rows (the
    others decoupled), and the mask as a float array of X's dtype."""
    m = mask.astype(X.dtype)
    K = rbf_kernel(X, X, lengthscale=lengthscale, outputscale=outputscale)
    K = K * m[:, None] * m[None, :] + jnp.diag((noise + jitter) * m + (1.0 - m))
    return linalg.cholesky(K), m


def _solves(X, y, mask, X_star, lengthscale, outputscale, noise, jitter):
    """``(k_star, V, alpha)``: k(X, X_star) on the masked rows, V = L^{-1} k_star and
    alpha = K^{-1} y (the two solves ordered, :func:`xfmr.core.linalg.ordered_solves`)."""
    L, m = _factor(X, mask, lengthscale, outputscale, noise, jitter)
    k_star = rbf_kernel(X, X_star, lengthscale=lengthscale, outputscale=outputscale) * m[:, None]
    V, alpha = linalg.ordered_solves(L, k_star, (y * m).astype(L.dtype))
    return k_star, V, alpha


def masked_posterior(X, y, mask, X_star, *, lengthscale, outputscale, noise):
    """:func:`posterior` using only the rows of X (n, d), y (n,) where ``mask`` (n,) is 1.

    Traceable (jit/vmap); a non-positive-definite kernel gives NaN instead of an error.
    Returns ``(mean, variance)`` at X_star (m, d), the variance clipped at 0.
    """
    k_star, V, alpha = _solves(X, y, mask, X_star, lengthscale, outputscale, noise, 0.0)
    return k_star.T @ alpha, jnp.maximum(outputscale - jnp.sum(V**2, axis=0), 0.0)


def masked_posterior_covariance(X, y, mask, X_star, *, lengthscale, outputscale, noise, jitter=0.0):
    """:func:`posterior_covariance` using only the rows where ``mask`` is 1 (traceable).

    cov = k(X_star, X_star) - V^T V with V = L^{-1} k(X, X_star), symmetrized.
    """
    k_star, V, alpha = _solves(X, y, mask, X_star, lengthscale, outputscale, noise, jitter)
    cov = rbf_kernel(X_star, X_star, lengthscale=lengthscale, outputscale=outputscale) - V.T @ V
    return k_star.T @ alpha, 0.5 * (cov + cov.T)


def masked_log_marginal_likelihood(X, y, mask, *, lengthscale, outputscale, noise):
    """:func:`log_marginal_likelihood` of the rows where ``mask`` is 1 (traceable)."""
    L, m = _factor(X, mask, lengthscale, outputscale, noise, 0.0)
    y0 = (y * m).astype(L.dtype)
    alpha = linalg.cho_solve(L, y0)
    return -0.5 * y0 @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * jnp.sum(m) * jnp.log(2.0 * jnp.pi)


# --- the plain functions: checked inputs, every row observed ------------------------------

def _check_targets(X, y) -> jax.Array:
    y = check_finite(check_array(y, "y", ndim=1, kind="number"), "y")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one entry per row of X ({X.shape[0]}), got shape {y.shape}")
    return y


def _checked(X, y, X_star, lengthscale, outputscale, noise):
    """The checked inputs of a plain function (``X_star`` None for the evidence) and a full mask."""
    _check_hyper(lengthscale, outputscale, noise)
    X = _check_inputs(X, "X")
    y = _check_targets(X, y)
    if X_star is not None:
        X_star = _check_inputs(X_star, "X_star")
        if X_star.shape[1] != X.shape[1]:
            raise ValueError(f"X_star must have d = {X.shape[1]} columns like X, got shape {X_star.shape}")
    return X, y, X_star, jnp.ones(X.shape[0], X.dtype)


def _positive_definite(result, noise, jitter=0.0):
    """``result`` unless a concrete entry is NaN: then the Cholesky factor failed (the inputs
    were checked finite), and the error says what to change."""
    if all(is_concrete(r) for r in result) and not all(bool(jnp.all(jnp.isfinite(r))) for r in result):
        raise ValueError("the kernel matrix k(X, X) + noise I is not positive definite after jitter "
                         f"(noise={float(noise):.3g}, jitter={float(jitter):.3g}); "
                         "add noise or remove duplicate rows of X")
    return result


def posterior(
    X, y, X_star, *, lengthscale, outputscale, noise
) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and latent variance at X_star (m, d) given X (n,
    d), y (n,).

    Returns ``(mean, variance)``, each of shape (m,); ``variance`` is
    that of f(X_star), without the observation noise, clipped at 0
    against rounding. :func:`masked_posterior` with every row observed.
    """
    X, y, X_star, full = _checked(
        X, y, X_star, lengthscale, outputscale, noise
    )
    result = masked_posterior(
        X,
        y,
        full,
        X_star,
        lengthscale=lengthscale,
        outputscale=outputscale,
        noise=noise,
    )
    return _positive_definite(result, noise)


def log_marginal_likelihood(X, y, *, lengthscale, outputscale, noise) -> jax.Array:
    """log p(y | X) under the GP prior, a scalar: :func:`masked_log_marginal_likelihood` with
    every row observed."""
    X, y, _, full = _checked(X, y, None, lengthscale, outputscale, noise)
    lml = masked_log_marginal_likelihood(X, y, full, lengthscale=lengthscale, outputscale=outputscale, noise=noise)
    return _positive_definite((lml,), noise)[0]


def posterior_covariance(X, y, X_star, *, lengthscale, outputscale, noise, jitter=0.0
                         ) -> tuple[jax.Array, jax.Array]:
    """Posterior mean (m,) and full covariance (m, m) of the latent f at X_star (m, d).

    cov = k(X_star, X_star) - V^T V with V = L^{-1} k(X, X_star). ``jitter`` is added to the
    diagonal of k(X, X) + noise I before the Cholesky factorisation.
    """
    check_real(jitter, "jitter", minimum=0.0)
    X, y, X_star, full = _checked(X, y, X_star, lengthscale, outputscale, noise)
    result = masked_posterior_covariance(X, y, full, X_star, lengthscale=lengthscale, outputscale=outputscale,
                                         noise=noise, jitter=jitter)
    return _positive_definite(result, noise, jitter)


# --- type-II maximum likelihood -------------------------------------------------------------

def _log_box(bounds: GPParams, dtype):
    """The box of theta = log(lengthscale, outputscale, noise): (lower (3,), upper (3,))."""
    return tuple(jnp.log(jnp.array([b[i] for b in bounds], dtype)) for i in (0, 1))


def fit_hyperparameters(X, y, mask, key, *, n_restarts: int = 4, n_steps: int = 80,
                        learning_rate: float = 0.1, init: GPParams | None = None,
                        bounds: GPParams = HYPER_BOUNDS) -> HyperFit:
    """Type-II maximum likelihood: maximise log p(y | X, l, s^2, sigma^2) over the box ``bounds``.

    ``optax.adam(learning_rate)`` on theta = (log l, log s^2, log sigma^2), clipped to the box
    after every step, for ``n_steps`` steps from each of ``n_restarts`` starts drawn
    log-uniformly in the box (start 0 is ``init`` when given, e.g. the previous fit of a
    BayesOpt run); the start with the highest final evidence wins. A gradient entry that is not
    finite is set to 0 for its step, and the steps where that happened are counted
    (``HyperFit.n_nonfinite``). Traceable and vmappable (``n_restarts``/``n_steps`` are
    static). X (n, d), y (n,), mask (n,) as in :func:`masked_posterior`.
    """
    n_restarts = check_int(n_restarts, "n_restarts", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=0)
    dtype = X.dtype
    lo, hi = _log_box(bounds, dtype)
    starts = lo + (hi - lo) * jax.random.uniform(key, (n_restarts, 3), dtype)
    if init is not None:
        starts = starts.at[0].set(jnp.log(jnp.stack(list(init)).astype(dtype)))

    def neg_lml(theta):
        return -masked_log_marginal_likelihood(X, y, mask, **GPParams(*jnp.exp(jnp.clip(theta, lo, hi)))._asdict())

    grad = jax.grad(neg_lml)
    optimizer = optax.adam(learning_rate)

    def descend(theta0):
        def step(carry, _):
            theta, state, n_bad = carry
            g = grad(theta)
            finite = jnp.isfinite(g)
            updates, state = optimizer.update(jnp.where(finite, g, 0.0), state)
            theta = jnp.clip(optax.apply_updates(theta, updates), lo, hi)
            return (theta, state, n_bad + (~jnp.all(finite)).astype(jnp.int32)), None

        (theta, _, n_bad), _ = jax.lax.scan(step, (theta0, optimizer.init(theta0), jnp.int32(0)), None, n_steps)
        return theta, -neg_lml(theta), n_bad

    thetas, lmls, n_bad = jax.vmap(descend)(starts)
    lmls = jnp.where(jnp.isfinite(lmls), lmls, -jnp.inf)
    best = jnp.argmax(lmls)
    return HyperFit(GPParams(*jnp.exp(jnp.clip(thetas[best], lo, hi))), lmls[best], jnp.sum(n_bad))
