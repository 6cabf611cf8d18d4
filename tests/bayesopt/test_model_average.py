"""xfmr.bayesopt.model_average: the grid's nodes, the average's weights against the evidence
computed directly, its masses, the plug-in, and the effective sample size."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.bayesopt import bar, gp, model_average, pfn_prior

jax.config.update("jax_enable_x64", True)


def test_log_grid_is_the_midpoint_rule_in_log_space():
    nodes = np.asarray(model_average.log_grid([(0.1, 10.0), (1.0, 4.0), (1e-3, 1e-1)], [2, 3, 4]))
    assert nodes.shape == (24, 3)
    np.testing.assert_allclose(np.unique(nodes[:, 0]), [10 ** -0.5, 10 ** 0.5], rtol=1e-12)
    np.testing.assert_allclose(np.diff(np.log(np.unique(nodes[:, 2]))), np.log(100) / 4, rtol=1e-12)
    with pytest.raises(ValueError, match="box"):
        model_average.log_grid([(1.0, 0.5)], [3])
    with pytest.raises(ValueError, match="same length"):
        model_average.log_grid([(0.1, 1.0)], [3, 4])


def _context():
    x, y = pfn_prior.sample_gp_datasets(jax.random.key(0), 1, 9, 2, lengthscale=0.3, outputscale=1.5, noise=0.01)
    return x[0, :6], y[0, :6], x[0, 6:]


def test_weights_are_prior_times_evidence_and_masses_are_the_mixture():
    X, y, Xs = _context()
    nodes = jnp.array([[0.3, 1.5, 0.01], [0.1, 0.5, 0.1], [1.0, 3.0, 1e-3]])
    log_prior = jnp.log(jnp.array([0.2, 0.5, 0.3]))
    borders = bar.normal_borders(30, 1.5, dtype=jnp.float64)
    mask = jnp.ones(6)
    out = model_average.model_average(X, y, mask, Xs, nodes, borders, log_prior)
    lml = np.array([float(gp.log_marginal_likelihood(X, y, lengthscale=a, outputscale=b, noise=c))
                    for a, b, c in np.asarray(nodes)])
    w = np.exp(np.asarray(log_prior) + lml - np.max(lml))
    w /= w.sum()
    np.testing.assert_allclose(np.exp(out.log_weights), w, rtol=1e-10)
    comps = []
    for a, b, c in np.asarray(nodes):
        m, v = gp.posterior(X, y, Xs, lengthscale=a, outputscale=b, noise=c)
        comps.append(np.asarray(bar.binned_normal(m, jnp.sqrt(v + c), borders)))
    np.testing.assert_allclose(out.bma, np.einsum("k,kqb->qb", w, comps), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out.plugin, comps[int(np.argmax(lml))], rtol=1e-12)
    np.testing.assert_allclose(np.sum(out.bma, -1), 1.0, rtol=1e-12)


def test_masked_rows_are_ignored_and_bad_nodes_are_refused():
    X, y, Xs = _context()
    nodes = model_average.log_grid([(0.1, 1.0), (0.5, 2.0), (1e-3, 0.1)], [3, 2, 2])
    borders = bar.normal_borders(20, 1.5, dtype=jnp.float64)
    mask = jnp.array([1, 1, 1, 0, 0, 0])
    masked = model_average.model_average(X, y.at[3:].set(99.0), mask, Xs, nodes, borders)
    plain = model_average.model_average(X[:3], y[:3], jnp.ones(3), Xs, nodes, borders)
    np.testing.assert_allclose(masked.bma, plain.bma, rtol=1e-9, atol=1e-14)
    with pytest.raises(ValueError, match="3 columns"):
        model_average.model_average(X, y, mask, Xs, nodes[:, :2], borders)


def test_effective_sample_size():
    assert float(model_average.effective_sample_size(jnp.log(jnp.full(8, 1 / 8)))) == pytest.approx(8.0)
    assert float(model_average.effective_sample_size(jnp.log(jnp.array([1.0, 1e-300])))) == pytest.approx(1.0)
