"""xfmr.bayesopt.pfn_eval: on an untrained PFN (equal mass on every bucket) every column has
an independent closed form; shapes and argument checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from xfmr.bayesopt import bar, gp, pfn_eval, pfn_model, pfn_prior

jax.config.update("jax_enable_x64", True)

H = {"lengthscale": 0.3, "outputscale": 1.0, "noise": 0.01}


def _setup(d=2):
    cfg = pfn_model.PFNConfig(d_in=d, d_model=16, n_heads=2, n_layers=1, d_ff=16, n_buckets=20,
                              max_context=8, n_points=12)
    params = pfn_model.init_params(jax.random.key(0), cfg)
    borders = bar.normal_borders(20, 1.01**0.5)
    x, y = pfn_prior.sample_gp_datasets(jax.random.key(1), 6, 12, d, **H)
    return cfg, params, borders, x, y


def test_untrained_pfn_columns_match_closed_forms():
    cfg, params, borders, x, y = _setup()
    table = pfn_eval.kl_table(params, cfg, borders, x, y, [0, 3, 8], n_queries=4, **H)
    assert table.shape == (3, 4)
    b = np.asarray(borders, np.float64)
    for row, n in zip(table, [0, 3, 8]):
        exact, pfn_nll, kl = [], [], []
        for xi, yi in zip(np.asarray(x), np.asarray(y)):
            if n:
                m, v = gp.posterior(xi[:n], yi[:n], xi[8:], **H)
            else:
                m, v = np.zeros(4), np.full(4, H["outputscale"])
            sd = np.sqrt(np.asarray(v) + H["noise"])
            exact.append(-stats.norm.logpdf(yi[8:], m, sd))
            i = np.clip(np.searchsorted(b, yi[8:], side="right") - 1, 0, 19)
            pfn_nll.append(np.log(20) + np.log(np.diff(b)[i]))
            p = np.asarray(bar.binned_normal(jnp.asarray(m), jnp.asarray(sd), jnp.asarray(b)))
            kl.append(np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1) * 20), 0), -1))
        np.testing.assert_allclose(row[0], np.mean(exact), rtol=1e-9)
        np.testing.assert_allclose(row[2], np.mean(pfn_nll), rtol=1e-5)
        np.testing.assert_allclose(row[3], np.mean(kl), rtol=1e-6, atol=1e-9)
        assert row[1] >= row[0] - 0.05  # the bucket floor is non-negative up to bucket clipping


def test_bad_arguments_are_named():
    cfg, params, borders, x, y = _setup()
    with pytest.raises(ValueError, match="n_values"):
        pfn_eval.kl_table(params, cfg, borders, x, y, [9], n_queries=4, **H)
    with pytest.raises(ValueError, match="d_in"):
        pfn_eval.kl_table(params, cfg, borders, x[..., :1], y, [1], n_queries=4, **H)
