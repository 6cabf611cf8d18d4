"""xfmr.pfn: permutation invariance, query independence, errors; a short training lowers the loss."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr import bar, pfn
from xfmr.train import train

CFG = pfn.PFNConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32, n_buckets=20, max_context=8, n_points=12)


def random_params():
    params = pfn.init_params(jax.random.key(0), CFG)
    # zero-initialised projections would hide attention: randomise every leaf
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    return jax.tree_util.tree_unflatten(tree, [l + 0.3 * jax.random.normal(k, l.shape) for l, k in zip(leaves, keys)])


def test_context_order_and_other_queries_do_not_matter():
    params = random_params()
    k = jax.random.split(jax.random.key(2), 3)
    xc, yc, xq = jax.random.uniform(k[0], (6, 1)), jax.random.normal(k[1], (6,)), jax.random.uniform(k[2], (5, 1))
    out = pfn.predict(params, CFG, xc, yc, xq)
    perm = jnp.array([3, 0, 5, 1, 4, 2])
    np.testing.assert_allclose(pfn.predict(params, CFG, xc[perm], yc[perm], xq), out, atol=1e-5)
    alone = pfn.predict(params, CFG, xc, yc, xq[2:3])
    np.testing.assert_allclose(alone[0], out[2], atol=1e-5)
    moved = pfn.predict(params, CFG, xc, yc.at[0].add(1.0), xq)
    assert float(jnp.max(jnp.abs(moved - out))) > 1e-3  # the context is read


def test_errors_name_the_problem():
    params = pfn.init_params(jax.random.key(0), CFG)
    with pytest.raises(ValueError, match="longer than the model was trained for"):
        pfn.predict(params, CFG, jnp.zeros((9, 1)), jnp.zeros(9), jnp.zeros((2, 1)))
    with pytest.raises(ValueError, match="^x_query must have d = 1 columns"):
        pfn.predict(params, CFG, jnp.zeros((2, 1)), jnp.zeros(2), jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="^y_ctx must be finite"):
        pfn.predict(params, CFG, jnp.zeros((2, 1)), jnp.array([0.0, jnp.inf]), jnp.zeros((2, 1)))
    with pytest.raises(ValueError, match="must exceed config.max_context"):
        pfn.init_params(jax.random.key(0), CFG._replace(n_points=8))


def test_short_training_lowers_the_loss():
    borders = bar.normal_borders(CFG.n_buckets, 1.0)
    params = pfn.init_params(jax.random.key(0), CFG)
    sampler = pfn.make_sampler(CFG, 16, lengthscale=0.3, outputscale=1.0, noise=0.01)
    res = train(pfn.loss_fn(CFG, borders), params, sampler, optax.adam(3e-3), 150, jax.random.key(3), chunk=150)
    first, last = res.losses[:20].mean(), res.losses[-20:].mean()
    # at initialisation the output is uniform over the buckets: loss = log(B) + mean log width
    assert last < first - 0.2, (first, last)


def test_model_stays_float32_under_x64():
    # a NumPy float64 scalar in the attention once promoted the whole model to float64 (2x slower)
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        params = pfn.init_params(jax.random.key(0), CFG)
        assert {str(l.dtype) for l in jax.tree_util.tree_leaves(params)} == {"float32"}
        x, y, n = pfn.make_sampler(CFG, 2, lengthscale=0.3, outputscale=1.0, noise=0.01)(jax.random.key(1))
        assert x.dtype == y.dtype == jnp.float32
        logits = pfn.forward(params, CFG, x[0], y[0], 4)
        assert logits.dtype == jnp.float32
        assert pfn.seconds_per_step(CFG, bar.normal_borders(CFG.n_buckets, 1.0), 8, repeats=1) > 0
    finally:
        jax.config.update("jax_enable_x64", before)  # the suite runs with x64 on (conftest)
