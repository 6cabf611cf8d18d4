"""xfmr.bayesopt.bar: equal-mass borders, density normalisation, moments, closed-form EI vs Monte Carlo."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from xfmr.bayesopt import acquisition, bar

jax.config.update("jax_enable_x64", True)


def test_borders_have_equal_mass_and_density_integrates_to_one():
    b = bar.normal_borders(50, 1.5, eps=1e-3, dtype=jnp.float64)
    mass = np.diff(stats.norm.cdf(np.asarray(b) / 1.5))
    np.testing.assert_allclose(mass, (1 - 2e-3) / 50, rtol=1e-9)
    logits = jax.random.normal(jax.random.key(0), (50,))
    ys = jnp.linspace(b[0], b[-1], 20_001)[:-1]
    dens = jnp.exp(bar.log_density(jnp.broadcast_to(logits, (ys.size, 50)), b, ys))
    np.testing.assert_allclose(jnp.sum(dens) * (b[-1] - b[0]) / ys.size, 1.0, atol=5e-3)
    np.testing.assert_allclose(bar.cdf(logits, b, b[-1]), 1.0, rtol=1e-12)
    np.testing.assert_allclose(bar.cdf(logits, b, bar.quantile(logits, b, 0.3)), 0.3, rtol=1e-9)


def test_ei_closed_form_matches_monte_carlo_and_gaussian_ei():
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
        ei = float(bar.expected_improvement(logits, b, best))
        assert abs(ei - mc) <= 4 * se + 1e-12, (best, ei, mc, se)
    gauss = acquisition.expected_improvement(0.3, 0.7, 0.5)
    np.testing.assert_allclose(bar.expected_improvement(logits, b, 0.5), gauss, atol=2e-3)
    np.testing.assert_allclose(bar.mean(logits, b), 0.3, atol=2e-3)
    np.testing.assert_allclose(bar.variance(logits, b), 0.49, atol=5e-3)


def test_nll_is_cross_entropy_plus_log_width_and_errors():
    b = jnp.array([0.0, 1.0, 3.0])
    logits = jnp.array([0.0, jnp.log(3.0)])
    np.testing.assert_allclose(bar.log_density(logits, b, 2.0), np.log(0.75 / 2.0))
    assert bar.bucket_index(jnp.array([-5.0, 0.5, 1.0, 7.0]), b).tolist() == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="^borders must be strictly increasing"):
        bar.log_density(logits, jnp.array([0.0, 1.0, 1.0]), 0.5)
    with pytest.raises(ValueError, match="^logits must have B = 2"):
        bar.mean(jnp.zeros(3), b)
    with pytest.raises(ValueError, match="^borders must be finite"):
        bar.check_borders(jnp.array([0.0, jnp.inf]))
    with pytest.raises(ValueError, match="^y must be finite"):
        bar.log_density(logits, b, jnp.nan)
