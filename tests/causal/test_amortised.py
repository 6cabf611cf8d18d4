"""Tests of xfmr.causal.amortised: symmetries of the model, the batch sampler, metrics, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.causal import amortised as am
from xfmr.causal import dags, scm

CFG = am.Config(d_max=6, width=16, n_layers=2, n_heads=2)


@pytest.fixture(scope="module")
def params():
    return am.init(jax.random.PRNGKey(0), CFG)


@pytest.fixture(scope="module")
def data():
    W = dags.random_weights(jax.random.PRNGKey(2), dags.erdos_renyi(jax.random.PRNGKey(1), 6, 1.0))
    return np.asarray(scm.sample(jax.random.PRNGKey(3), W, 20, "scm"), dtype=np.float32)


@pytest.mark.parametrize("pool", ["max", "mean"])
def test_equivariant_over_variables(data, pool):
    cfg = CFG._replace(pool=pool)
    p = am.init(jax.random.PRNGKey(0), cfg)
    perm = np.array([3, 0, 5, 1, 4, 2])
    L = np.asarray(am.apply(p, data, cfg))
    Lp = np.asarray(am.apply(p, data[:, perm], cfg))
    np.testing.assert_allclose(Lp, L[np.ix_(perm, perm)], rtol=1e-5, atol=1e-5)
    assert np.abs(L - L.T).max() > 1e-3          # not trivially symmetric: directions differ


@pytest.mark.parametrize("pool", ["max", "mean"])
def test_invariant_over_samples(data, pool):
    cfg = CFG._replace(pool=pool)
    p = am.init(jax.random.PRNGKey(0), cfg)
    perm = np.random.default_rng(0).permutation(data.shape[0])
    np.testing.assert_allclose(am.apply(p, data[perm], cfg), am.apply(p, data, cfg), rtol=1e-5, atol=1e-5)


def test_batch_matches_single_and_smaller_d(params, data):
    Xs = np.stack([data, 2.0 * data])
    Lb = am.apply_batch(params, Xs, CFG)
    np.testing.assert_allclose(Lb[1], am.apply(params, Xs[1], CFG), rtol=1e-5, atol=1e-5)
    assert am.apply(params, data[:, :4], CFG).shape == (4, 4)    # fewer variables than d_max is fine


def test_errors(params, data):
    with pytest.raises(ValueError, match="more than the model was trained for"):
        am.apply(params, np.zeros((10, 7), np.float32), CFG)
    with pytest.raises(ValueError, match="X must be 2-D"):
        am.apply(params, data[None], CFG)
    with pytest.raises(ValueError, match="X must be 3-D"):
        am.apply_batch(params, data, CFG)
    with pytest.raises(ValueError, match="n >= 2"):
        am.apply(params, data[:1], CFG)
    with pytest.raises(ValueError, match="d >= 2"):
        am.apply(params, data[:, :1], CFG)
    with pytest.raises(TypeError, match="floating-point"):
        am.apply(params, np.zeros((5, 3), int), CFG)
    with pytest.raises(ValueError, match="finite"):
        am.apply(params, np.full((5, 3), np.nan, np.float32), CFG)
    with pytest.raises(TypeError, match="config"):
        am.apply(params, data, {"d_max": 6})
    with pytest.raises(ValueError, match="divisible"):
        am.init(jax.random.PRNGKey(0), am.Config(d_max=4, width=10, n_heads=3))
    with pytest.raises(ValueError, match="config.pool"):
        am.init(jax.random.PRNGKey(0), am.Config(d_max=4, pool="sum"))
    with pytest.raises(ValueError, match="kind"):
        am.sample_batch(jax.random.PRNGKey(0), 2, 4, 10, "gaussian")
    with pytest.raises(ValueError, match="low <= high"):
        am.sample_batch(jax.random.PRNGKey(0), 2, 4, 10, low=2.0, high=1.0)
    with pytest.raises(ValueError, match="n must be"):
        am.sample_batch(jax.random.PRNGKey(0), 2, 4, 1)
    with pytest.raises(ValueError, match="both classes"):
        am.auroc([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match="kinds must not repeat"):
        am.train_models(jax.random.PRNGKey(0), CFG, ("scm", "scm"), n_steps=1, batch_size=1, n=5)
    with pytest.raises(ValueError, match="kinds must be"):
        am.train_models(jax.random.PRNGKey(0), CFG, "scm", n_steps=1, batch_size=1, n=5)
    with pytest.raises(ValueError, match="shape of W_true"):
        am.edge_metrics(np.eye(3), np.zeros((4, 4)))


def test_random_dag_matches_dags_distribution():
    d, k, B = 8, 1.0, 2000
    Ws, orders = jax.vmap(lambda key: am.random_dag(key, d, k))(jax.random.split(jax.random.PRNGKey(0), B))
    Ws, orders = np.asarray(Ws), np.asarray(orders)
    for W, o in zip(Ws[:50], orders[:50]):        # the order is topological
        pos = np.argsort(o)
        i, j = np.nonzero(W)
        assert np.all(pos[i] < pos[j])
    p = 2 * k / (d - 1)
    edges = (Ws != 0).sum((1, 2))
    assert abs(edges.mean() - p * d * (d - 1) / 2) < 4 * np.sqrt(p * (1 - p) * d * (d - 1) / 2 / B)
    mags = np.abs(Ws[Ws != 0])
    assert 0.5 <= mags.min() and mags.max() <= 2.0 and abs(np.mean(Ws[Ws != 0] > 0) - 0.5) < 0.02
    # every ordered pair equally likely to carry an edge (labels carry no order information)
    share = (Ws != 0).mean(0)[~np.eye(d, dtype=bool)]
    assert np.abs(share - p / 2).max() < 4 * np.sqrt(p / 2 / B)


@pytest.mark.parametrize("kind", scm.KINDS)
def test_sample_batch_uses_scm_sampler(kind):
    key = jax.random.PRNGKey(5)
    Xs, As = am.sample_batch(key, 3, 5, 40, kind)
    assert Xs.shape == (3, 40, 5) and As.shape == (3, 5, 5) and Xs.dtype == jnp.float32
    k_g, k_x = jax.random.split(jax.random.split(key, 3)[1])
    W, order = am.random_dag(k_g, 5, 1.0)
    np.testing.assert_array_equal(As[1], np.asarray(W != 0, np.float32))
    np.testing.assert_allclose(Xs[1], scm.sample_in_order(k_x, W, order, 40, kind), rtol=1e-6, atol=1e-6)
    # sample_in_order is sample with the order given: same data as scm.sample on the same graph
    np.testing.assert_allclose(scm.sample_in_order(k_x, W.astype(float), order, 40, kind),
                               scm.sample(k_x, W, 40, kind), rtol=1e-9, atol=1e-9)


def test_auroc_against_brute_force():
    rng = np.random.default_rng(0)
    y = rng.random(30) < 0.4
    s = np.round(rng.normal(size=30), 1)           # with ties
    pos, neg = s[y], s[~y]
    brute = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg])
    assert am.auroc(y, s) == pytest.approx(brute)


def test_edge_metrics_perfect_and_reversed():
    W = np.zeros((4, 4))
    W[0, 1] = W[1, 2] = W[0, 3] = 1.0
    L = np.where(W != 0, 10.0, -10.0)
    m = am.edge_metrics(W, L)
    assert m["auroc"] == 1.0 and m["f1"] == 1.0 and m["shd"] == 0 and m["orient"] == 1.0 and m["bce"] < 1e-4
    m = am.edge_metrics(W, L.T)                     # every edge reversed
    assert m["orient"] == 0.0 and m["f1"] == 0.0 and m["shd"] == 3
    off = ~np.eye(4, dtype=bool)
    assert m["bce"] == pytest.approx(np.mean((np.logaddexp(0, L.T) - (W != 0) * L.T)[off]))


def test_training_reduces_loss():
    cfg = am.Config(d_max=4, width=8, n_layers=1, n_heads=2)
    params, res = am.train_models(jax.random.PRNGKey(0), cfg, ("scm",), n_steps=60, batch_size=8, n=20,
                                  learning_rate=1e-2, chunk=60)
    assert res.losses.shape == (60,) and set(params) == {"scm"}
    assert res.losses[-20:].mean() < res.losses[:10].mean() - 0.03
