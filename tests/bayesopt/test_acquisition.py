"""xfmr.bayesopt.acquisition: EI against Monte Carlo and its limits, log-EI where EI underflows,
UCB, Thompson samples, and EI of a bar distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from xfmr.bayesopt import acquisition, bar

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


_log_ei = jax.jit(acquisition.log_expected_improvement)
_ei = jax.jit(acquisition.expected_improvement)
_d_log_ei = jax.jit(jax.grad(acquisition.log_expected_improvement, argnums=(0, 1)))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(z=st.one_of(st.floats(-30.0, 8.0), st.floats(-1e6, -40.0)), sd=st.floats(1e-3, 1e3),
       best=st.floats(-5.0, 5.0))
def test_log_ei_is_log_of_ei_or_its_asymptote_where_ei_underflows(z, sd, best):
    """Where EI is a normal float64 number, log-EI is its logarithm; where EI underflows to 0
    (z < -38), log-EI follows log sd + log phi(z) - 2 log|z| within the next term, 3 / z^2."""
    mean = best + z * sd
    z = (mean - best) / sd   # as the function sees it
    log_ei = float(_log_ei(mean, sd, best))
    ei = float(_ei(mean, sd, best))
    if ei > 1e-300:
        np.testing.assert_allclose(log_ei, np.log(ei), rtol=1e-10, atol=1e-9)
    else:
        assert ei == 0.0 and z < -37
        asymptote = np.log(sd) + stats.norm.logpdf(z) - 2 * np.log(-z)
        assert abs(log_ei - asymptote) <= 3.5 / z**2, (z, log_ei, asymptote)
    assert np.all(np.isfinite(_d_log_ei(mean, sd, best)))


def test_log_ei_is_smooth_across_its_branches_and_in_float32():
    """The three branches meet: log-EI against z is continuous at z = -1 and at the asymptotic
    switch (-75 in float64, -9.4 in float32), and float32 agrees with float64."""
    for dtype, switch, tol in ((jnp.float64, 74.6, 1e-9), (jnp.float32, 9.4, 2e-4)):
        z = jnp.concatenate([jnp.linspace(-1.01, -0.99, 5), -switch + jnp.linspace(-0.05, 0.05, 5)]).astype(dtype)
        f = np.asarray(acquisition.log_expected_improvement(z, jnp.ones_like(z), jnp.zeros((), dtype)), np.float64)
        ref = np.asarray(acquisition.log_expected_improvement(z.astype(jnp.float64), jnp.ones(10), 0.0))
        np.testing.assert_allclose(f, ref, rtol=tol)
        assert np.all(np.diff(f[:5]) > 0) and np.all(np.diff(f[5:]) > 0)   # increasing in the mean
    assert float(acquisition.log_expected_improvement(-0.3, 0.0, 0.0)) == -np.inf
    np.testing.assert_allclose(acquisition.log_expected_improvement(0.5, 0.0, 0.1), np.log(0.4), rtol=1e-12)


def test_ucb_and_errors():
    np.testing.assert_allclose(acquisition.upper_confidence_bound(jnp.array([1.0]), jnp.array([2.0]), 4.0), [5.0])
    with pytest.raises(ValueError, match="^std must be >= 0"):
        acquisition.expected_improvement(jnp.zeros(2), jnp.array([1.0, -1.0]), 0.0)
    with pytest.raises(ValueError, match="^mean must be finite"):
        acquisition.log_expected_improvement(jnp.array([np.nan]), jnp.ones(1), 0.0)
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


def test_bar_ei_closed_form_matches_monte_carlo_and_gaussian_ei():
    b = bar.normal_borders(400, 2.0, eps=1e-4, dtype=jnp.float64)
    p = bar.binned_normal(0.3, 0.7, b)
    logits = jnp.log(p)
    # Monte Carlo from the bar distribution itself: bucket, then uniform inside it
    k1, k2 = jax.random.split(jax.random.key(2))
    i = jax.random.categorical(k1, logits, shape=(100_000,))
    y = b[i] + jax.random.uniform(k2, (100_000,)) * (b[i + 1] - b[i])
    for best in (-0.5, 0.3, 1.2, 9.0):
        imp = jnp.maximum(y - best, 0.0)
        mc, se = float(jnp.mean(imp)), float(jnp.std(imp)) / np.sqrt(y.size)
        ei = float(acquisition.bar_expected_improvement(logits, b, best))
        assert abs(ei - mc) <= 4 * se + 1e-12, (best, ei, mc, se)
    gauss = acquisition.expected_improvement(0.3, 0.7, 0.5)
    np.testing.assert_allclose(acquisition.bar_expected_improvement(logits, b, 0.5), gauss, atol=2e-3)


def test_bar_log_ei_survives_where_float32_ei_underflows():
    """A float32 bar distribution whose mass above ``best`` is e^-120: its EI underflows to 0,
    its log-EI is finite and equals the float64 log of the float64 EI; at best above the last
    border it is -inf (no bucket can improve)."""
    b = bar.normal_borders(20, 1.0)
    logits = jnp.where(jnp.arange(20) < 10, 0.0, -120.0).astype(jnp.float32)
    assert float(acquisition.bar_expected_improvement(logits, b, 0.5)) == 0.0
    log_ei = float(acquisition.bar_log_expected_improvement(logits, b, 0.5))
    ref = np.log(float(acquisition.bar_expected_improvement(logits.astype(jnp.float64), b.astype(jnp.float64), 0.5)))
    np.testing.assert_allclose(log_ei, ref, rtol=1e-5)
    assert float(acquisition.bar_log_expected_improvement(logits, b, float(b[-1]) + 1.0)) == -np.inf
