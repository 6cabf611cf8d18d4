"""xfmr.bayesopt.objectives: known minima of the test functions; GP sample paths have the kernel's covariance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.bayesopt import gp, objectives

jax.config.update("jax_enable_x64", True)


def test_known_minima():
    u = (objectives.BRANIN_MINIMISERS - np.array([-5.0, 0.0])) / 15.0
    np.testing.assert_allclose(objectives.branin(u), objectives.BRANIN_MIN, atol=1e-5)
    x = jnp.array([0.114614, 0.555649, 0.852547])
    np.testing.assert_allclose(objectives.hartmann3(x), objectives.HARTMANN3_MIN, atol=1e-5)
    np.testing.assert_allclose(objectives.forrester(jnp.array([0.757249])), objectives.FORRESTER_MIN, atol=1e-5)
    assert float(jnp.min(objectives.forrester(jnp.linspace(0, 1, 10001)[:, None]))) >= objectives.FORRESTER_MIN - 1e-6
    grid = jax.random.uniform(jax.random.key(0), (20000, 3))
    assert float(jnp.min(objectives.hartmann3(grid))) > objectives.HARTMANN3_MIN


def test_gp_samples_have_the_kernel_as_covariance():
    """Sample paths on 5 points: zero mean and the RBF kernel matrix as covariance (each entry
    within 4.5 standard errors of 4000 draws)."""
    C = jnp.array([[0.0], [0.1], [0.25], [0.5], [0.9]])
    draw = jax.jit(jax.vmap(lambda k: objectives.gp_sample_on_grid(k, C, lengthscale=0.2, outputscale=1.5)))
    f = np.asarray(draw(jax.random.split(jax.random.key(0), 4000)))
    K = np.asarray(gp.rbf_kernel(C, C, lengthscale=0.2, outputscale=1.5))
    se = np.sqrt((np.outer(np.diag(K), np.diag(K)) + K**2) / f.shape[0])
    assert np.all(np.abs(f.mean(0)) <= 4.5 * np.sqrt(np.diag(K) / f.shape[0]))
    assert np.all(np.abs(f.T @ f / f.shape[0] - K) <= 4.5 * se), (f.T @ f / f.shape[0], K)
    assert f.dtype == np.float64


def test_errors():
    with pytest.raises(ValueError, match="^x must have d = 2 columns"):
        objectives.branin(jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="^x must be finite"):
        objectives.hartmann3(jnp.array([0.1, jnp.nan, 0.2]))
    with pytest.raises(ValueError, match="not positive definite after jitter"):
        objectives.gp_sample_on_grid(jax.random.key(0), jnp.zeros((3, 1)), lengthscale=0.2, outputscale=1.0, jitter=0.0)
