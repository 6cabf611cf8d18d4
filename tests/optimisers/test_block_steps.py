"""Tests of xfmr.optimisers.block_steps: Adam's effective step against optax's own updates, the SLQ
Frobenius estimate against exact ||A v|| and ||A||_F, the spread, and error paths."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.optimisers.block_steps import (adam_block_rate, adam_effective_step, find_adam_state, slq_frobenius,
                                         spread_decades, update_gradient_ratio)
from xfmr.core.ensemble import stack
from xfmr.optimisers.lanczos import SLQResult, slq


def _grads(seed, t):
    k = jax.random.fold_in(jax.random.key(seed), t)
    ka, kb = jax.random.split(k)
    return {"a": jax.random.normal(ka, (3, 4), jnp.float64) * 10.0 ** (t % 3),
            "b": [jax.random.normal(kb, (5,), jnp.float64) * 1e-3]}


@pytest.mark.parametrize("n_steps", [1, 4])
def test_effective_step_is_last_update_over_lr(n_steps):
    lr = 0.03
    opt = optax.chain(optax.adam(lr), optax.scale(1.0))
    params = {"a": jnp.zeros((3, 4), jnp.float64), "b": [jnp.zeros(5, jnp.float64)]}
    state = opt.init(params)
    for t in range(n_steps):
        u, state = opt.update(_grads(0, t), state, params)
    eff = adam_effective_step(state)
    ref = jax.tree_util.tree_map(lambda x: jnp.sqrt(jnp.mean(jnp.square(x / lr))), u)
    for e, r in zip(jax.tree_util.tree_leaves(eff), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(e, r, rtol=1e-12)
        assert np.shape(e) == ()


def _three_runs(opt, measure):
    """Three runs (seeds 0-2) of three steps of ``opt`` on a two-leaf model: their states and
    ``measure(state)`` of each."""
    params = {"a": jnp.zeros((3, 4), jnp.float64), "b": [jnp.zeros(5, jnp.float64)]}
    states = []
    for seed in range(3):
        s = opt.init(params)
        for t in range(3):
            _, s = opt.update(_grads(seed, t), s, params)
        states.append(s)
    return states, [measure(s) for s in states]


def test_effective_step_per_stacked_model():
    """batch_dims=1 on stacked models = one value per model, each from its own run."""
    lr = 0.01
    opt = optax.adam(lr, b1=0.8, b2=0.99, eps=1e-6)
    states, singles = _three_runs(opt, lambda s: adam_effective_step(s, b1=0.8, b2=0.99, eps=1e-6))
    stacked = optax.ScaleByAdamState(count=states[0][0].count,
                                     mu=stack([s[0].mu for s in states]),
                                     nu=stack([s[0].nu for s in states]))
    eff = adam_effective_step((stacked,), b1=0.8, b2=0.99, eps=1e-6, batch_dims=1)
    for i in range(3):
        for e, r in zip(jax.tree_util.tree_leaves(eff), jax.tree_util.tree_leaves(singles[i])):
            np.testing.assert_allclose(e[i], r, rtol=1e-12)
    # a wrong eps gives a different number (the test can fail)
    wrong = adam_effective_step((stacked,), b1=0.8, b2=0.99, eps=1e-1, batch_dims=1)
    assert not np.allclose(jax.tree_util.tree_leaves(wrong)[1], jax.tree_util.tree_leaves(eff)[1])


def test_effective_step_errors():
    params = {"a": jnp.zeros(3)}
    with pytest.raises(ValueError, match="count >= 1"):
        adam_effective_step(optax.adam(0.1).init(params))
    with pytest.raises(ValueError, match="opt_state"):
        find_adam_state(optax.sgd(0.1, momentum=0.9).init(params))
    opt = optax.adam(0.1)
    _, s = opt.update({"a": jnp.ones(3)}, opt.init(params), params)
    with pytest.raises(ValueError, match="batch_dims"):
        adam_effective_step(s, batch_dims=2)
    with pytest.raises(TypeError, match="batch_dims"):
        adam_effective_step(s, batch_dims=1.0)


@pytest.mark.parametrize("n_steps", [1, 4])
def test_block_rate_is_update_over_lr_and_momentum(n_steps):
    """Each coordinate's rate is optax's own update / (-lr mu_hat); the block value is its median."""
    lr, b1 = 0.03, 0.9
    opt = optax.adam(lr)
    params = {"a": jnp.zeros((3, 4), jnp.float64), "b": [jnp.zeros(5, jnp.float64)]}
    state = opt.init(params)
    for t in range(n_steps):
        u, state = opt.update(_grads(0, t), state, params)
    mu_hat = jax.tree_util.tree_map(lambda m: m / (1 - b1 ** n_steps), state[0].mu)
    ref = jax.tree_util.tree_map(lambda x, m: jnp.median(-x / (lr * m)), u, mu_hat)
    rate = adam_block_rate(state)
    for e, r in zip(jax.tree_util.tree_leaves(rate), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(e, r, rtol=1e-9)
        assert np.shape(e) == ()
    # the small-gradient block gets the larger rate
    assert float(rate["b"][0]) > 100 * float(rate["a"])
    # the RMS over the block of the same per-coordinate rates
    ref_rms = jax.tree_util.tree_map(lambda x, m: jnp.sqrt(jnp.mean((x / (lr * m)) ** 2)), u, mu_hat)
    rms = adam_block_rate(state, stat="rms")
    for e, r in zip(jax.tree_util.tree_leaves(rms), jax.tree_util.tree_leaves(ref_rms)):
        np.testing.assert_allclose(e, r, rtol=1e-9)
    with pytest.raises(ValueError, match="stat"):
        adam_block_rate(state, stat="mean")


def test_update_gradient_ratio():
    """SGD without momentum: the ratio is the learning rate on every block; Adam's is not."""
    params = {"a": jnp.zeros((3, 4), jnp.float64), "b": [jnp.zeros(5, jnp.float64)]}
    g = _grads(0, 1)
    u, _ = optax.sgd(0.07).update(g, optax.sgd(0.07).init(params), params)
    for r in jax.tree_util.tree_leaves(update_gradient_ratio(u, g)):
        np.testing.assert_allclose(r, 0.07, rtol=1e-12)
    ua, _ = optax.adam(0.07).update(g, optax.adam(0.07).init(params), params)
    ra = update_gradient_ratio(ua, g)
    assert float(ra["b"][0]) > 100 * float(ra["a"])      # a small gradient, a large ratio
    stacked = update_gradient_ratio(stack([u, ua]), stack([g, g]), batch_dims=1)
    np.testing.assert_allclose(stacked["a"], [0.07, float(ra["a"])], rtol=1e-12)
    with pytest.raises(ValueError, match="structure"):
        update_gradient_ratio(u, {"a": g["a"]})
    with pytest.raises(ValueError, match="shapes"):
        update_gradient_ratio({"a": jnp.ones(3)}, {"a": jnp.ones(4)})


def test_block_rate_per_stacked_model_and_errors():
    opt = optax.adam(0.01, b2=0.99, eps=1e-6)
    states, singles = _three_runs(opt, lambda s: adam_block_rate(s, b2=0.99, eps=1e-6))
    stacked = optax.ScaleByAdamState(count=states[0][0].count, mu=stack([s[0].mu for s in states]),
                                     nu=stack([s[0].nu for s in states]))
    rate = adam_block_rate((stacked,), b2=0.99, eps=1e-6, batch_dims=1)
    for i in range(3):
        for e, r in zip(jax.tree_util.tree_leaves(rate), jax.tree_util.tree_leaves(singles[i])):
            np.testing.assert_allclose(e[i], r, rtol=1e-12)
    with pytest.raises(ValueError, match="count >= 1"):
        adam_block_rate(opt.init({"a": jnp.zeros(3)}))
    with pytest.raises(ValueError, match="batch_dims"):
        adam_block_rate(states[0], batch_dims=2)


def test_slq_frobenius_matches_hutchinson_per_probe_and_exact_norm():
    P = 30
    A = np.random.default_rng(0).normal(size=(P, P))
    A = jnp.asarray((A + A.T) / 2)
    key = jax.random.key(3)
    res = slq(lambda v: A @ v, P, key, 1, 4)
    v = jax.random.rademacher(jax.random.fold_in(key, 0), (P,), dtype=jnp.float64)
    norm, _ = slq_frobenius(res)
    np.testing.assert_allclose(norm, float(jnp.linalg.norm(A @ v)), rtol=1e-10)
    res = slq(lambda v: A @ v, P, key, 200, 3)
    norm, se = slq_frobenius(res)
    exact = float(jnp.linalg.norm(A))
    assert abs(norm - exact) < 4 * se, (norm, exact, se)
    assert 0 < se < 0.1 * exact


def test_spread_and_errors():
    np.testing.assert_allclose(spread_decades([[1.0, 10.0, 1e3], [2.0, 2.0, 2.0]]), [3.0, 0.0])
    np.testing.assert_allclose(spread_decades([[1.0], [100.0]], axis=0), [2.0])
    with pytest.raises(ValueError, match="positive"):
        spread_decades([1.0, 0.0])
    with pytest.raises(ValueError, match="non-empty"):
        spread_decades(np.zeros((2, 0)))
    with pytest.raises(TypeError, match="SLQResult"):
        slq_frobenius((np.ones((1, 2)), np.ones((1, 2)), 2))
    ok = SLQResult(np.array([[2.0, 2.0]]), np.array([[0.5, 0.5]]), 9)
    assert slq_frobenius(ok)[0] == pytest.approx(6.0)
