"""xfmr.bayesopt.bar: equal-mass borders (whatever the x64 flag), density normalisation,
moments, and the KL from bucket masses on cases with known answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from xfmr.bayesopt import bar

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


def test_borders_do_not_depend_on_the_x64_flag():
    with_x64 = np.asarray(bar.normal_borders(100, 1.2))
    jax.config.update("jax_enable_x64", False)
    try:
        without = np.asarray(bar.normal_borders(100, 1.2))
    finally:
        jax.config.update("jax_enable_x64", True)
    assert with_x64.dtype == without.dtype == np.float32
    np.testing.assert_array_equal(with_x64, without)


def test_moments_of_a_binned_gaussian():
    b = bar.normal_borders(400, 2.0, eps=1e-4, dtype=jnp.float64)
    logits = jnp.log(bar.binned_normal(0.3, 0.7, b))
    np.testing.assert_allclose(bar.mean(logits, b), 0.3, atol=2e-3)
    np.testing.assert_allclose(bar.variance(logits, b), 0.49, atol=5e-3)


def test_kl_from_masses_known_answers():
    p = jnp.array([0.5, 0.5, 0.0])
    q = jnp.array([0.25, 0.5, 0.25])
    np.testing.assert_allclose(bar.kl_from_masses(p, jnp.log(q)), 0.5 * np.log(2.0), rtol=1e-12)
    # any logits: only differences matter; the uniform bar distribution gives log B - H(p)
    np.testing.assert_allclose(bar.kl_from_masses(p, jnp.log(q) + 7.0), 0.5 * np.log(2.0), rtol=1e-12)
    np.testing.assert_allclose(bar.kl_from_masses(p, jnp.zeros(3)), np.log(3.0) - np.log(2.0), rtol=1e-12)
    # where q has no mass but p has, log q is floored at log 1e-300
    np.testing.assert_allclose(bar.kl_from_masses(p, jnp.log(jnp.array([1.0, 0.0, 0.0]))),
                               0.5 * np.log(0.5) + 0.5 * (np.log(0.5) - np.log(1e-300)), rtol=1e-12)
    # two Gaussians binned on fine buckets: KL(N(0,1) || N(m,1)) = m^2 / 2, rows broadcast
    b = jnp.linspace(-12.0, 12.0, 4001)
    p = bar.binned_normal(jnp.zeros(2), jnp.ones(2), b)
    q = bar.binned_normal(jnp.array([0.5, 1.0]), jnp.ones(2), b)
    np.testing.assert_allclose(bar.kl_from_masses(p, jnp.log(q)), [0.125, 0.5], rtol=1e-4)


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


def test_mixture_borders_reduce_to_normal_and_have_equal_mixture_mass():
    one = bar.mixture_normal_borders(40, [1.3], dtype=jnp.float64)
    np.testing.assert_allclose(one, bar.normal_borders(40, 1.3, dtype=jnp.float64), rtol=1e-9, atol=1e-10)
    scales = np.array([0.3, 1.0, 2.5])
    b = np.asarray(bar.mixture_normal_borders(20, scales, eps=1e-3, dtype=jnp.float64))
    mass = np.diff(stats.norm.cdf(b[:, None] / scales[None, :]).mean(1))
    np.testing.assert_allclose(mass, (1 - 2e-3) / 20, rtol=1e-8)
    with pytest.raises(ValueError, match="scales"):
        bar.mixture_normal_borders(10, [1.0, -1.0])


def test_central_coverage_of_uniform_values_is_the_level():
    u = jnp.linspace(0.0, 1.0, 100_001)
    for level in (0.5, 0.9):
        assert float(bar.central_coverage(u, level).mean()) == pytest.approx(level, abs=1e-4)
    np.testing.assert_array_equal(bar.central_coverage(jnp.array([0.5, 0.01, 0.99]), 0.9), [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="level"):
        bar.central_coverage(u, 1.5)
