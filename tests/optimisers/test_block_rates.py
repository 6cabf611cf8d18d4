"""Tests of xfmr.optimisers.block_rates: the rates against dense eigenvalues of the blocks,
the floor, fixed versus re-probed rates, stacked models, and error paths."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.core.ensemble import stack
from xfmr.optimisers.block_rates import block_curvature_rates, scale_by_block_curvature

jax.config.update("jax_enable_x64", True)


def _loss(params, batch):
    """A small two-block model whose blocks differ in curvature."""
    h = jnp.tanh(batch @ params["w1"])
    return jnp.mean((h @ params["w2"]) ** 2) + 1e-3 * jnp.sum(params["b"] ** 4)


def _params(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    return {"w1": jax.random.normal(k1, (3, 4)), "w2": 3 * jax.random.normal(k2, (4,)),
            "b": jax.random.normal(k3, (2,))}


BATCH = jax.random.normal(jax.random.key(9), (16, 3))


def _dense_top(params):
    out = {}
    for name in params:
        def f(t, name=name):
            return _loss({**params, name: t.reshape(params[name].shape)}, BATCH)
        H = jax.hessian(f)(params[name].reshape(-1).astype(jnp.float64))
        out[name] = float(np.linalg.eigvalsh(np.asarray(H))[-1])
    return out


@pytest.mark.parametrize("floor", [0.0, 0.1])
def test_rates_are_inverse_top_eigenvalues_with_floor(floor):
    p = _params(0)
    lam = _dense_top(p)
    rates = block_curvature_rates(_loss, p, BATCH, jax.random.key(1), 12, 2.0, floor)
    top = max(lam.values())
    for name in p:
        expect = 2.0 / max(lam[name], floor * top, 1e-12 * top)
        np.testing.assert_allclose(float(rates[name]), expect, rtol=1e-6)
    if floor > 0:   # the floor binds for the flattest block here (the test can fail)
        assert min(lam.values()) < floor * top


def test_stacked_models_and_factors():
    ps = [_params(s) for s in range(3)]
    r = block_curvature_rates(_loss, stack(ps), BATCH, jax.random.key(1), 12,
                              jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, 0.1, 0.0]),
                              batch_dims=1)
    for i in range(3):
        one = block_curvature_rates(_loss, ps[i], BATCH, jax.random.key(1), 12, 1.0 + i,
                                    [0.0, 0.1, 0.0][i])
        for name in ps[i]:
            np.testing.assert_allclose(float(r[name][i]), float(one[name]), rtol=1e-8)


def test_fixed_versus_reprobed():
    p = _params(0)
    grads = jax.tree_util.tree_map(jnp.ones_like, p)
    fixed = scale_by_block_curvature(_loss, BATCH, jax.random.key(1), 12, 1.0, 0.0)
    again = scale_by_block_curvature(_loss, BATCH, jax.random.key(1), 12, 1.0, 0.0, every=2)
    sf, sa = fixed.init(p), again.init(p)
    rates0 = block_curvature_rates(_loss, p, BATCH, jax.random.key(1), 12, 1.0, 0.0)
    q = p
    for t in range(3):
        uf, sf = fixed.update(grads, sf, q)
        ua, sa = again.update(grads, sa, q)
        if t < 2:
            for name in p:
                np.testing.assert_allclose(ua[name], uf[name], rtol=1e-12)
        q = jax.tree_util.tree_map(lambda x: x + 0.5, q)   # the model moves
    # step 2 re-probed at the moved parameters, the fixed one did not
    moved = block_curvature_rates(_loss, q_prev := jax.tree_util.tree_map(
        lambda x: x + 1.0, p), BATCH, jax.random.key(1), 12, 1.0, 0.0)
    del q_prev
    for name in p:
        np.testing.assert_allclose(uf[name], rates0[name] * grads[name], rtol=1e-12)
        np.testing.assert_allclose(ua[name], moved[name] * grads[name], rtol=1e-8)
    assert not np.allclose(float(moved["w1"]), float(rates0["w1"]))
    # in optax.chain with momentum, inside jit
    opt = optax.chain(optax.trace(0.9), again)
    s = opt.init(p)
    u, s = jax.jit(opt.update)(grads, s, p)
    assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(u))


def test_errors():
    p = _params(0)
    with pytest.raises(ValueError, match="floor_ratio"):
        block_curvature_rates(_loss, p, BATCH, jax.random.key(1), 4, 1.0, 1.5)
    with pytest.raises(ValueError, match="n_steps"):
        block_curvature_rates(_loss, p, BATCH, jax.random.key(1), 0)
    with pytest.raises(ValueError, match="every"):
        scale_by_block_curvature(_loss, BATCH, jax.random.key(1), 4, every=-1)
    opt = scale_by_block_curvature(_loss, BATCH, jax.random.key(1), 4, every=1)
    s = opt.init(p)
    with pytest.raises(ValueError, match="params"):
        opt.update(p, s)
