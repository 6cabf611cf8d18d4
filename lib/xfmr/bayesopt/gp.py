"""Exact Gaussian-process regression with the squared-exponential (RBF) kernel.

Model: f ~ GP(0, k) with k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2)) (``outputscale`` = s^2,
``lengthscale`` = l), observations y = f(X) + eps with eps ~ N(0, noise I).
With K = k(X, X) + noise I = L L^T (Cholesky) and k_* = k(X, x_*):

    mean(x_*)     = k_*^T K^{-1} y
    variance(x_*) = k(x_*, x_*) - k_*^T K^{-1} k_*            (of the latent f, without noise)
    log p(y | X)  = -1/2 y^T K^{-1} y - sum_i log L_ii - n/2 log(2 pi)

Computed in the dtype of the inputs (float64 when ``jax_enable_x64`` is on).

Part IV adds, on top of the two contract functions:

- :func:`posterior_covariance`: the joint posterior of f at X_star (Thompson sampling);
- :func:`masked_posterior`, :func:`masked_log_marginal_likelihood`: the same computations on a
  fixed-size array of which only the rows with ``mask == 1`` are observations. A masked-out row
  gets kernel row/column e_i and target 0, so it decouples exactly (its factor of the Cholesky is
  1); its log-likelihood term -1/2 log(2 pi) is removed. This keeps shapes fixed so a whole
  BayesOpt run is one ``lax.scan``;
- :func:`fit_hyperparameters`: type-II maximum likelihood, Adam on (log l, log s^2, log noise)
  inside a box, from several starts, the best evidence kept.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from xfmr.core.validate import check_array, check_finite, check_real, is_concrete

__all__ = ["rbf_kernel", "posterior", "log_marginal_likelihood", "posterior_covariance",
           "masked_posterior", "masked_log_marginal_likelihood", "fit_hyperparameters", "HYPER_BOUNDS"]


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


def _cholesky(X, *, lengthscale, outputscale, noise, jitter=0.0) -> jax.Array:
    K = rbf_kernel(X, X, lengthscale=lengthscale, outputscale=outputscale)
    L = jnp.linalg.cholesky(K + (noise + jitter) * jnp.eye(X.shape[0], dtype=K.dtype))
    if is_concrete(L) and not bool(jnp.all(jnp.isfinite(L))):
        raise ValueError("the kernel matrix k(X, X) + noise I is not positive definite after jitter "
                         f"(noise={float(noise):.3g}, jitter={float(jitter):.3g}); "
                         "add noise or remove duplicate rows of X")
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


def posterior_covariance(X, y, X_star, *, lengthscale, outputscale, noise, jitter=0.0
                         ) -> tuple[jax.Array, jax.Array]:
    """Posterior mean (m,) and full covariance (m, m) of the latent f at X_star (m, d).

    cov = k(X_star, X_star) - V^T V with V = L^{-1} k(X, X_star). ``jitter`` is added to the
    diagonal of k(X, X) + noise I before the Cholesky factorisation.
    """
    _check_hyper(lengthscale, outputscale, noise)
    check_real(jitter, "jitter", minimum=0.0)
    X, X_star = _check_inputs(X, "X"), _check_inputs(X_star, "X_star")
    y = _check_targets(X, y)
    if X_star.shape[1] != X.shape[1]:
        raise ValueError(f"X_star must have d = {X.shape[1]} columns like X, got shape {X_star.shape}")
    L = _cholesky(X, lengthscale=lengthscale, outputscale=outputscale, noise=noise, jitter=jitter)
    k_star = rbf_kernel(X, X_star, lengthscale=lengthscale, outputscale=outputscale)
    v = jsl.solve_triangular(L, k_star, lower=True)
    mean = k_star.T @ jsl.cho_solve((L, True), y.astype(L.dtype))
    cov = rbf_kernel(X_star, X_star, lengthscale=lengthscale, outputscale=outputscale) - v.T @ v
    return mean, 0.5 * (cov + cov.T)


# --- fixed-shape (masked) versions, traceable: no concrete checks inside -----------------

def _sqdist(A, B):
    return jnp.maximum(jnp.sum(A**2, -1)[:, None] + jnp.sum(B**2, -1)[None, :] - 2.0 * A @ B.T, 0.0)


def _masked_factor(X, y, mask, lengthscale, outputscale, noise):
    m = mask.astype(X.dtype)
    K = outputscale * jnp.exp(-_sqdist(X, X) / (2.0 * lengthscale**2))
    K = K * m[:, None] * m[None, :] + jnp.diag(noise * m + (1.0 - m))
    L = jnp.linalg.cholesky(K)
    return L, y * m, m


def masked_posterior(X, y, mask, X_star, *, lengthscale, outputscale, noise):
    """:func:`posterior` using only the rows of X (n, d), y (n,) where ``mask`` (n,) is 1.

    Traceable (jit/vmap); a non-positive-definite kernel gives NaN instead of an error.
    Returns ``(mean, variance)`` at X_star (m, d).
    """
    L, y0, m = _masked_factor(X, y, mask, lengthscale, outputscale, noise)
    k_star = outputscale * jnp.exp(-_sqdist(X, X_star) / (2.0 * lengthscale**2)) * m[:, None]
    v = jsl.solve_triangular(L, k_star, lower=True)
    # As in tcbo._solve_factor: the solve above and cho_solve's below are independent, and two
    # batched LAPACK solves run at once (under vmap) can deadlock jaxlib's two-thread pool. The
    # barrier orders them; the values are those of the unordered computation.
    v, L = jax.lax.optimization_barrier((v, L))
    mean = k_star.T @ jsl.cho_solve((L, True), y0)
    return mean, jnp.maximum(outputscale - jnp.sum(v**2, axis=0), 0.0)


def masked_log_marginal_likelihood(X, y, mask, *, lengthscale, outputscale, noise):
    """:func:`log_marginal_likelihood` of the rows where ``mask`` is 1 (traceable)."""
    L, y0, m = _masked_factor(X, y, mask, lengthscale, outputscale, noise)
    alpha = jsl.cho_solve((L, True), y0)
    return -0.5 * y0 @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * jnp.sum(m) * jnp.log(2.0 * jnp.pi)


HYPER_BOUNDS = {"lengthscale": (0.02, 5.0), "outputscale": (0.05, 20.0), "noise": (1e-6, 0.5)}
"""Box of the type-II ML search (inputs in the unit cube, standardised targets)."""


def _unpack(theta, bounds):
    names = ("lengthscale", "outputscale", "noise")
    lo = jnp.log(jnp.array([bounds[k][0] for k in names], theta.dtype))
    hi = jnp.log(jnp.array([bounds[k][1] for k in names], theta.dtype))
    t = jnp.clip(theta, lo, hi)
    return dict(zip(names, jnp.exp(t))), lo, hi


def fit_hyperparameters(X, y, mask, key, *, n_restarts: int = 4, n_steps: int = 80,
                        learning_rate: float = 0.1, init=None, bounds=None) -> dict:
    """Type-II maximum likelihood: maximise log p(y | X, l, s^2, sigma^2) over the box ``bounds``.

    Adam on theta = (log l, log s^2, log sigma^2), clipped to the box, from ``n_restarts``
    starts drawn log-uniformly in the box (start 0 is ``init`` when given, e.g. the previous
    fit of a BayesOpt run); the start with the highest final evidence wins. Traceable and
    vmappable (``n_restarts``/``n_steps`` are static). X (n, d), y (n,), mask (n,) as in
    :func:`masked_posterior`.

    Returns ``{"lengthscale", "outputscale", "noise", "lml"}`` (scalars).
    """
    bounds = HYPER_BOUNDS if bounds is None else bounds
    dtype = X.dtype
    _, lo, hi = _unpack(jnp.zeros(3, dtype), bounds)
    starts = lo + (hi - lo) * jax.random.uniform(key, (n_restarts, 3), dtype)
    if init is not None:
        first = jnp.log(jnp.stack([init["lengthscale"], init["outputscale"], init["noise"]]).astype(dtype))
        starts = starts.at[0].set(first)

    def neg_lml(theta):
        h, _, _ = _unpack(theta, bounds)
        return -masked_log_marginal_likelihood(X, y, mask, **h)

    grad = jax.value_and_grad(neg_lml)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def run(theta0):
        def step(carry, t):
            theta, m1, m2 = carry
            _, g = grad(theta)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            m1 = b1 * m1 + (1 - b1) * g
            m2 = b2 * m2 + (1 - b2) * g**2
            upd = learning_rate * (m1 / (1 - b1 ** (t + 1))) / (jnp.sqrt(m2 / (1 - b2 ** (t + 1))) + eps)
            return (jnp.clip(theta - upd, lo, hi), m1, m2), None

        z = jnp.zeros_like(theta0)
        (theta, _, _), _ = jax.lax.scan(step, (theta0, z, z), jnp.arange(n_steps, dtype=dtype))
        return theta, -neg_lml(theta)

    thetas, lmls = jax.vmap(run)(starts)
    lmls = jnp.where(jnp.isfinite(lmls), lmls, -jnp.inf)
    best = jnp.argmax(lmls)
    h, _, _ = _unpack(thetas[best], bounds)
    return {**h, "lml": lmls[best]}
