"""xfmr.bayesopt.pfn_train: a short training lowers the query NLL; the hyper-prior PFN is trained
once per cache folder and settings, and loaded with identical parameters after that."""

import jax
import numpy as np
import optax

from xfmr.bayesopt import bar, pfn_model, pfn_prior, pfn_train
from xfmr.core.train import train

CFG = pfn_model.PFNConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32, n_buckets=20, max_context=8, n_points=12)


def test_short_training_lowers_the_loss():
    borders = bar.normal_borders(CFG.n_buckets, 1.0)
    params = pfn_model.init_params(jax.random.key(0), CFG)
    sampler = pfn_prior.gp_dataset_sampler(CFG, 16, lengthscale=0.3, outputscale=1.0, noise=0.01)
    res = train(pfn_train.query_nll(CFG, borders), params, sampler, optax.adam(3e-3), 150, jax.random.key(3),
                chunk=150)
    first, last = res.losses[:20].mean(), res.losses[-20:].mean()
    # at initialisation the output is uniform over the buckets: loss = log(B) + mean log width
    assert last < first - 0.2, (first, last)


def test_the_hyperprior_pfn_is_trained_once_per_cache_folder(tmp_path, monkeypatch):
    kw = dict(ls_min=0.1, ls_max=0.5, noise=0.01, seed=7, batch_size=4, n_steps=3, learning_rate=1e-3,
              warmup_steps=1)
    calls = []
    fit = pfn_train.fit_pfn_on_hyperprior
    monkeypatch.setattr(pfn_train, "fit_pfn_on_hyperprior", lambda *a, **k: calls.append(k) or fit(*a, **k))
    first = pfn_train.trained_hyperprior_pfn(CFG, cache_dir=tmp_path, **kw)
    again = pfn_train.trained_hyperprior_pfn(CFG, cache_dir=tmp_path, **kw)
    assert len(calls) == 1 and first.cpu_seconds == again.cpu_seconds
    for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(first.borders), np.asarray(bar.normal_borders(CFG.n_buckets, 1.01**0.5)))
    other = pfn_train.trained_hyperprior_pfn(CFG, cache_dir=tmp_path, **{**kw, "seed": 8})
    assert len(calls) == 2 and not np.array_equal(other.losses, first.losses)
    uncached = pfn_train.trained_hyperprior_pfn(CFG, **kw)   # no folder: trained again, same result
    assert len(calls) == 3
    np.testing.assert_array_equal(uncached.losses, first.losses)
