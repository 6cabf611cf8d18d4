"""xfmr.bayesopt.pfn_prior: the GP datasets have the kernel's covariance, the hyper-prior is
log-uniform, the sampler draws context sizes uniformly and hands the model float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from xfmr.bayesopt import gp, pfn_model, pfn_prior

jax.config.update("jax_enable_x64", True)


def test_datasets_have_the_kernel_plus_noise_as_covariance():
    """Pairs of points: E[y_0 y_1 | x] = k(x_0, x_1) and E[y_0^2] = s^2 (1 + 1e-5) + noise, as
    averages of y_0 y_1 - k(x_0, x_1) and y_0^2 over 20000 datasets (within 4.5 standard errors)."""
    s2, noise = 1.7, 0.05
    x, y = jax.jit(lambda k: pfn_prior.sample_gp_datasets(k, 20_000, 2, 2, lengthscale=0.3, outputscale=s2,
                                                         noise=noise))(jax.random.key(0))
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype == np.float64 and x.min() >= 0 and x.max() <= 1
    k01 = np.asarray(jax.vmap(lambda xi: gp.rbf_kernel(xi[:1], xi[1:], lengthscale=0.3, outputscale=s2)[0, 0])(x))
    dev = y[:, 0] * y[:, 1] - k01
    assert abs(dev.mean()) <= 4.5 * dev.std() / np.sqrt(dev.size), dev.mean()
    var = s2 * (1 + 1e-5) + noise
    sq = y[:, 0] ** 2
    assert abs(sq.mean() - var) <= 4.5 * sq.std() / np.sqrt(sq.size), (sq.mean(), var)


def test_the_hyperprior_is_loguniform():
    ls, os_ = pfn_prior.loguniform_lengthscale(0.05, 0.5)(jax.random.key(1), 4000)
    u = (np.log(np.asarray(ls)) - np.log(0.05)) / (np.log(0.5) - np.log(0.05))
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert np.all(np.asarray(os_) == 1.0)
    with pytest.raises(ValueError, match="^ls_max must be"):
        pfn_prior.loguniform_lengthscale(0.5, 0.05)


def test_the_sampler_draws_context_sizes_uniformly_and_returns_float32():
    cfg = pfn_model.PFNConfig(max_context=4, n_points=6)
    sample = jax.jit(pfn_prior.gp_dataset_sampler(cfg, 2, lengthscale=0.3, outputscale=1.0, noise=0.01))
    batches = [sample(k) for k in jax.random.split(jax.random.key(2), 500)]
    assert batches[0].x.dtype == batches[0].y.dtype == jnp.float32
    assert batches[0].x.shape == (2, 6, 1) and batches[0].y.shape == (2, 6)
    counts = np.bincount([int(b.n_ctx) for b in batches], minlength=5)
    assert counts.size == 5 and stats.chisquare(counts).pvalue > 1e-3, counts


def test_the_three_parameter_hyperprior_is_loguniform_in_its_boxes():
    boxes = ((0.05, 0.5), (0.25, 4.0), (1e-4, 0.1))
    draws = pfn_prior.loguniform_hyperprior(*boxes)(jax.random.key(2), 4000)
    for d, (lo, hi) in zip(draws, boxes):
        u = (np.log(np.asarray(d)) - np.log(lo)) / (np.log(hi) - np.log(lo))
        assert u.min() >= 0 and u.max() <= 1 and stats.kstest(u, "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(np.log(draws[0]), np.log(draws[2]))[0, 1]) < 0.1
    with pytest.raises(ValueError, match="noise"):
        pfn_prior.loguniform_hyperprior(*boxes[:2], (0.1, 1e-4))


def test_per_dataset_noise_sets_each_datasets_variance():
    """Two datasets of 2000 points at lengthscale 1e-3 (independent points): the sample
    variance of each is outputscale (1 + 1e-5) + its own noise."""
    _, y = pfn_prior.sample_gp_datasets(jax.random.key(3), 2, 1500, 1, lengthscale=1e-4, outputscale=0.5,
                                        noise=jnp.array([0.01, 2.0]))
    var = np.asarray(y).var(1)
    np.testing.assert_allclose(var, [0.51, 2.5], rtol=0.12)


def test_the_sampler_takes_the_noise_from_a_three_parameter_hyperprior():
    config = pfn_model.PFNConfig(d_in=1, n_points=1500, max_context=10)
    h = pfn_prior.loguniform_hyperprior((1e-4, 1.1e-4), (0.5, 0.51), (2.0, 2.01))
    batch = pfn_prior.gp_dataset_sampler(config, 2, lengthscale=None, outputscale=None, noise=0.0,
                                         hyperprior=h)(jax.random.key(4))
    np.testing.assert_allclose(np.asarray(batch.y).var(1), 2.5, rtol=0.12)
