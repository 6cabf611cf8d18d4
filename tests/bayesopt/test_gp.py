"""xfmr.bayesopt.gp against a direct NumPy evaluation of the textbook formulas (float64)."""

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xfmr.bayesopt import gp

jax.config.update("jax_enable_x64", True)


def numpy_reference(X, y, Xs, ell, s2, noise):
    def k(A, B):
        d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
        return s2 * np.exp(-d2 / (2 * ell**2))

    K = k(X, X) + noise * np.eye(len(X))
    Kinv = np.linalg.inv(K)
    mean = k(Xs, X) @ Kinv @ y
    var = s2 - np.einsum("ij,jk,ki->i", k(Xs, X), Kinv, k(X, Xs))
    lml = -0.5 * y @ Kinv @ y - 0.5 * np.linalg.slogdet(K)[1] - 0.5 * len(X) * np.log(2 * np.pi)
    return mean, var, lml


@pytest.mark.parametrize("seed,n,d", [(0, 5, 1), (1, 12, 2), (2, 20, 3)])
def test_posterior_and_evidence_match_the_formulas(seed, n, d):
    rng = np.random.default_rng(seed)
    X, Xs, y = rng.uniform(size=(n, d)), rng.uniform(size=(7, d)), rng.normal(size=n)
    hyper = dict(lengthscale=0.3 + rng.uniform(), outputscale=0.5 + rng.uniform(), noise=0.05)
    mean, var = gp.posterior(X, y, Xs, **hyper)
    m_ref, v_ref, lml_ref = numpy_reference(X, y, Xs, hyper["lengthscale"], hyper["outputscale"], hyper["noise"])
    np.testing.assert_allclose(mean, m_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(var, np.maximum(v_ref, 0), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(gp.log_marginal_likelihood(X, y, **hyper), lml_ref, rtol=1e-10)


def test_bad_inputs_name_the_argument():
    X, y = np.zeros((3, 1)), np.zeros(3)
    h = dict(lengthscale=1.0, outputscale=1.0, noise=0.1)
    with pytest.raises(ValueError, match="^lengthscale must be"):
        gp.posterior(X, y, X, lengthscale=0.0, outputscale=1.0, noise=0.1)
    with pytest.raises(TypeError, match="^noise must be a real number"):
        gp.posterior(X, y, X, lengthscale=1.0, outputscale=1.0, noise="0.1")
    with pytest.raises(ValueError, match="^y must be finite"):
        gp.posterior(X, np.array([0.0, np.nan, 1.0]), X, **h)
    with pytest.raises(ValueError, match="^y must have one entry per row of X"):
        gp.log_marginal_likelihood(X, np.zeros(4), **h)
    with pytest.raises(ValueError, match="^X_star must have d = 1 columns"):
        gp.posterior(X, y, np.zeros((2, 2)), **h)
    with pytest.raises(ValueError, match="^X must be 2-D"):
        gp.posterior(np.zeros(3), y, X, **h)
    with pytest.raises(ValueError, match="not positive definite"):
        gp.posterior(X, y, X, lengthscale=1.0, outputscale=1.0, noise=0.0)


# --- against tinygp (a maintained JAX GP library), masked versions, type-II ML -----------

@pytest.mark.parametrize("seed,n,d,m", [(3, 8, 1, 5), (4, 40, 3, 9)])
def test_posterior_and_evidence_match_tinygp(seed, n, d, m):
    import jax.numpy as jnp
    import tinygp

    rng = np.random.default_rng(seed)
    X, Xs, y = rng.uniform(size=(n, d)), rng.uniform(size=(m, d)), rng.normal(size=n)
    ell, s2, noise = 0.2 + rng.uniform(), 0.5 + 2 * rng.uniform(), 10 ** rng.uniform(-3, -1)
    ref = tinygp.GaussianProcess(s2 * tinygp.kernels.ExpSquared(scale=ell), jnp.asarray(X), diag=noise)
    cond = ref.condition(jnp.asarray(y), jnp.asarray(Xs), diag=0.0).gp  # tinygp adds sqrt(eps) by default
    mean, var = gp.posterior(X, y, Xs, lengthscale=ell, outputscale=s2, noise=noise)
    np.testing.assert_allclose(mean, cond.loc, rtol=0, atol=1e-10)
    np.testing.assert_allclose(var, cond.variance, rtol=0, atol=1e-10)
    lml = gp.log_marginal_likelihood(X, y, lengthscale=ell, outputscale=s2, noise=noise)
    np.testing.assert_allclose(lml, ref.log_probability(jnp.asarray(y)), rtol=0, atol=1e-10)
    _, cov = gp.posterior_covariance(X, y, Xs, lengthscale=ell, outputscale=s2, noise=noise)
    np.testing.assert_allclose(np.diag(cov), var, rtol=0, atol=1e-10)


# compiled once: the masked posterior and evidence for every drawn mask (8 rows, 2-D), and the
# plain ones once per number of observed rows
_masked = jax.jit(lambda X, y, mask, Xs, h: (gp.masked_posterior(X, y, mask, Xs, **h._asdict()),
                                              gp.masked_log_marginal_likelihood(X, y, mask, **h._asdict())))
_plain = jax.jit(lambda X, y, Xs, h: (gp.posterior(X, y, Xs, **h._asdict()),
                                      gp.log_marginal_likelihood(X, y, **h._asdict())))
_fit = jax.jit(gp.fit_hyperparameters, static_argnames=("n_restarts", "n_steps"))


@settings(max_examples=20, deadline=None, derandomize=True)
@given(data=hnp.arrays(np.float64, (8, 3), elements=st.floats(0.0, 1.0)),
       mask=hnp.arrays(np.bool_, 8).filter(lambda m: m.any()),
       lengthscale=st.floats(0.1, 2.0), outputscale=st.floats(0.2, 3.0), noise=st.floats(1e-3, 0.5))
def test_masked_gp_equals_the_plain_gp_on_the_observed_rows(data, mask, lengthscale, outputscale, noise):
    """Drawn rows, targets, masks and hyperparameters: the masked computation on all 8 rows
    equals the plain one on the observed rows alone (the masked-out rows decouple exactly)."""
    X, y = data[:, :2], 3.0 * data[:, 2] - 1.5
    Xs = np.array([[0.1, 0.9], [0.5, 0.5], [0.95, 0.2]])
    h = gp.GPParams(lengthscale, outputscale, noise)
    (m1, v1), lml1 = _masked(X, y, mask.astype(float), Xs, h)
    (m2, v2), lml2 = _plain(X[mask], y[mask], Xs, h)
    np.testing.assert_allclose(m1, m2, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(v1, v2, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lml1, lml2, rtol=1e-9, atol=1e-9)


def test_type2_ml_beats_a_grid_and_stays_in_the_box():
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(30, 1))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.normal(size=30)
    mask = np.ones(30)
    fit = _fit(X, y, mask, jax.random.key(0), n_restarts=4, n_steps=150)
    for value, (lo, hi) in zip(fit.params, gp.HYPER_BOUNDS):
        assert lo * (1 - 1e-12) <= float(value) <= hi * (1 + 1e-12)
    grid = max(float(gp.log_marginal_likelihood(X, y, lengthscale=l, outputscale=s, noise=nz))
               for l in (0.1, 0.2, 0.3, 0.5) for s in (0.3, 1.0, 3.0) for nz in (1e-3, 3e-3, 1e-2))
    assert float(fit.lml) >= grid - 1e-6, (float(fit.lml), grid)
    direct = gp.log_marginal_likelihood(X, y, **gp.GPParams(*map(float, fit.params))._asdict())
    np.testing.assert_allclose(fit.lml, direct, rtol=1e-9)
    assert int(fit.n_nonfinite) == 0


def test_type2_ml_counts_steps_with_non_finite_gradients():
    """Duplicate rows and a noise box near 0 make k(X, X) + noise I singular: every step's
    gradient is NaN, and the fit says so instead of returning a silent answer."""
    X, y = np.zeros((4, 1)), np.array([0.1, -0.2, 0.3, 0.0])
    bounds = gp.HYPER_BOUNDS._replace(noise=(1e-300, 2e-300))
    fit = gp.fit_hyperparameters(X, y, np.ones(4), jax.random.key(0), n_restarts=3, n_steps=5, bounds=bounds)
    assert int(fit.n_nonfinite) == 3 * 5
    assert float(fit.lml) == -np.inf


def test_covariance_reports_non_pd_after_jitter():
    X, y = np.zeros((3, 1)), np.zeros(3)
    with pytest.raises(ValueError, match="not positive definite after jitter"):
        gp.posterior_covariance(X, y, X, lengthscale=1.0, outputscale=1.0, noise=0.0, jitter=0.0)
    _, cov = gp.posterior_covariance(X, y, X, lengthscale=1.0, outputscale=1.0, noise=0.0, jitter=1e-6)
    # three copies of one noiseless point: the posterior at it is that point's, variance ~ jitter / 3
    np.testing.assert_allclose(cov, np.full((3, 3), 1e-6 / 3), rtol=1e-3)
    with pytest.raises(ValueError, match="^jitter must be"):
        gp.posterior_covariance(X, y, X, lengthscale=1.0, outputscale=1.0, noise=0.1, jitter=-1.0)
