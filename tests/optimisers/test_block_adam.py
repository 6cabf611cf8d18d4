"""Tests of xfmr.optimisers.block_adam: block-wise Adam against a hand-written loop, per
stacked model, the coordinate-wise leaves (= optax's Adam), and error paths."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.core.ensemble import stack
from xfmr.optimisers.block_adam import scale_by_block_adam

jax.config.update("jax_enable_x64", True)


def _grads(seed, t):
    k = jax.random.fold_in(jax.random.key(seed), t)
    ka, kb = jax.random.split(k)
    return {"a": jax.random.normal(ka, (3, 4), jnp.float64) * 10.0 ** (t % 3),
            "b": [jax.random.normal(kb, (5,), jnp.float64) * 1e-3]}


def _hand(grads, b1, b2, eps):
    """The rule of the module docstring, written out with numpy, one leaf at a time."""
    out = []
    leaves = [jax.tree_util.tree_leaves(g) for g in grads]
    for j in range(len(leaves[0])):
        m, v = 0.0, 0.0
        for t, gs in enumerate(leaves, start=1):
            g = np.asarray(gs[j])
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * np.mean(g ** 2)
            u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        out.append(u)
    return out


@pytest.mark.parametrize("n_steps", [1, 5])
def test_block_adam_matches_hand_written_loop(n_steps):
    b1, b2, eps = 0.8, 0.95, 1e-6
    opt = scale_by_block_adam(b1, b2, eps)
    params = {"a": jnp.zeros((3, 4), jnp.float64), "b": [jnp.zeros(5, jnp.float64)]}
    state = opt.init(params)
    grads = [_grads(0, t) for t in range(n_steps)]
    for g in grads:
        u, state = opt.update(g, state, params)
    for x, r in zip(jax.tree_util.tree_leaves(u), _hand(grads, b1, b2, eps)):
        np.testing.assert_allclose(x, r, rtol=1e-10)
    # one scalar per block: the state's second moments are scalars
    assert all(np.shape(v) == () for v in jax.tree_util.tree_leaves(state.nu))
    # and it is not Adam (the test can fail): Adam's update differs
    a, _ = optax.scale_by_adam(b1, b2, eps).update(grads[0], optax.scale_by_adam(
        b1, b2, eps).init(params))
    if n_steps == 1:
        assert not np.allclose(jax.tree_util.tree_leaves(a)[0], jax.tree_util.tree_leaves(u)[0])


def test_coordinatewise_leaves_are_adam_and_stacked_models_are_independent():
    opt = scale_by_block_adam(coordinatewise=lambda p: p[0] == "a")
    adam = optax.scale_by_adam()
    params = {"a": jnp.zeros((3, 4), jnp.float64), "b": [jnp.zeros(5, jnp.float64)]}
    s, sa = opt.init(params), adam.init(params)
    for t in range(3):
        g = _grads(1, t)
        u, s = opt.update(g, s, params)
        ua, sa = adam.update(g, sa, params)
    np.testing.assert_allclose(u["a"], ua["a"], rtol=1e-10)
    assert np.shape(s.nu["b"][0]) == ()
    # stacked: three models, batch_dims=1, each equal to its own run
    singles = []
    for seed in range(3):
        s1 = scale_by_block_adam().init(params)
        for t in range(3):
            u1, s1 = scale_by_block_adam().update(_grads(seed, t), s1, params)
        singles.append(u1)
    opt3 = scale_by_block_adam(batch_dims=1)
    sp = stack([params] * 3)
    s3 = opt3.init(sp)
    for t in range(3):
        u3, s3 = opt3.update(stack([_grads(seed, t) for seed in range(3)]), s3, sp)
    for i in range(3):
        for x, r in zip(jax.tree_util.tree_leaves(u3), jax.tree_util.tree_leaves(singles[i])):
            np.testing.assert_allclose(x[i], r, rtol=1e-10)


def test_block_adam_errors():
    with pytest.raises(ValueError, match="b1"):
        scale_by_block_adam(b1=1.5)
    with pytest.raises(TypeError, match="coordinatewise"):
        scale_by_block_adam(coordinatewise=3)
    opt = scale_by_block_adam(batch_dims=2)
    with pytest.raises(ValueError, match="batch_dims"):
        opt.init({"a": jnp.zeros(3)})
