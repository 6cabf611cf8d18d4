"""xfmr.bayesopt.acquisition: EI against Monte Carlo and its limits, UCB, Thompson samples."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.bayesopt import acquisition

jax.config.update("jax_enable_x64", True)


def test_ei_matches_monte_carlo_and_the_zero_std_limit():
    mean, std = jnp.array([-1.0, 0.0, 0.3, 2.0]), jnp.array([0.5, 1.0, 0.2, 1.5])
    z = jax.random.normal(jax.random.key(0), (100_000, 1))
    imp = jnp.maximum(mean + std * z - 0.1, 0.0)
    ei = acquisition.expected_improvement(mean, std, 0.1)
    assert np.all(np.abs(ei - imp.mean(0)) <= 4 * imp.std(0) / np.sqrt(z.shape[0]) + 1e-12)
    exact = acquisition.expected_improvement(jnp.array([0.5, -0.5, 0.1]), jnp.zeros(3), 0.1)
    assert exact.tolist() == [0.4, 0.0, 0.0]
    g = jax.grad(lambda s: acquisition.expected_improvement(0.3, s, 0.1))(0.0)
    assert np.isfinite(g)
    tiny = acquisition.expected_improvement(0.5, 1e-12, 0.1)
    np.testing.assert_allclose(tiny, 0.4, rtol=1e-12)


def test_ucb_and_errors():
    np.testing.assert_allclose(acquisition.upper_confidence_bound(jnp.array([1.0]), jnp.array([2.0]), 4.0), [5.0])
    with pytest.raises(ValueError, match="^std must be >= 0"):
        acquisition.expected_improvement(jnp.zeros(2), jnp.array([1.0, -1.0]), 0.0)
    with pytest.raises(ValueError, match="^mean must be finite"):
        acquisition.expected_improvement(jnp.array([np.nan]), jnp.ones(1), 0.0)
    with pytest.raises(ValueError, match="^beta must be"):
        acquisition.upper_confidence_bound(jnp.zeros(1), jnp.ones(1), -1.0)


def test_thompson_samples_have_the_posterior_moments():
    mean = jnp.array([0.0, 1.0])
    cov = jnp.array([[1.0, 0.8], [0.8, 1.0]])
    draws = jax.vmap(lambda k: acquisition.thompson_sample(mean, cov, k))(jax.random.split(jax.random.key(1), 5000))
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.06)
    np.testing.assert_allclose(np.cov(np.asarray(draws).T), cov, atol=0.08)
    with pytest.raises(ValueError, match="not positive definite after jitter"):
        acquisition.thompson_sample(mean, jnp.array([[1.0, 2.0], [2.0, 1.0]]), jax.random.key(0), jitter=0.0)
