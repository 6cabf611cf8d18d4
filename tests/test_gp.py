"""xfmr.gp against a direct NumPy evaluation of the textbook formulas (float64)."""

import jax
import numpy as np
import pytest

from xfmr import gp

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
