"""xfmr.causal.sortability against CausalDisco on drawn and on identical data, and against brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from CausalDisco import analytics
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.causal.strategies import scm_data
from xfmr.causal import dags, scm, sortability


def instance(seed, family="ER-2", d=10, n=300, kind="scm"):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    W = np.asarray(dags.random_weights(k2, dags.sample_graph(k1, family, d, jnp.float64), dtype=jnp.float64))
    return np.asarray(scm.sample(k3, W, n, kind)), W


def brute_alignment(W, s, tol):
    """Enumerate every directed path; count each (pair, length) once."""
    d = len(s)
    lengths = {}
    def walk(start, node, k):
        for c in np.flatnonzero(W[node]):
            lengths.setdefault((start, c), set()).add(k + 1)
            walk(start, c, k + 1)
    for i in range(d):
        walk(i, i, 0)
    num = den = 0.0
    for (i, j), ks in lengths.items():
        diff = s[j] - s[i]
        num += len(ks) * (1.0 if diff > tol else 0.5 if abs(diff) <= tol else 0.0)
        den += len(ks)
    return num / den


@settings(max_examples=25, deadline=None, derandomize=True)
@given(scm_data(), st.sampled_from([0.0, 1e-9, 0.05]))
def test_var_and_r2_sortability_match_causaldisco_on_drawn_data(case, tol):
    X, W = case
    assert sortability.var_sortability(X, W, tol) == pytest.approx(analytics.var_sortability(X, W, tol), abs=1e-12)
    assert sortability.r2_sortability(X, W, tol) == pytest.approx(analytics.r2_sortability(X, W, tol), abs=1e-9)
    # and the score CausalDisco orders by: R^2 from the inverse correlation matrix
    np.testing.assert_allclose(sortability.r2_scores(X), analytics.r2coeff(X.T), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_order_alignment_matches_path_enumeration(seed):
    X, W = instance(seed, "ER-4")
    s = np.round(np.random.default_rng(seed).normal(size=10), 1)   # ties at 0.1 resolution
    for tol in (0.0, 0.05, 0.25):
        assert sortability.order_alignment(W, s, tol) == pytest.approx(brute_alignment(W, s, tol), abs=1e-12)


@pytest.mark.parametrize("seed,family,kind", [(0, "ER-2", "scm"), (1, "SF-directed", "standardized"),
                                               (2, "tree", "iscm"), (3, "ER-4", "scm")])
def test_metrics_match_causaldisco_on_identical_data(seed, family, kind):
    X, W = instance(seed, family, kind=kind)
    for tol in (0.0, 1e-9):
        if kind == "scm" or tol > 0:   # unit variances: with tol = 0 rounding decides the ties
            assert sortability.var_sortability(X, W, tol) == pytest.approx(
                analytics.var_sortability(X, W, tol), abs=1e-12)
        assert sortability.r2_sortability(X, W, tol) == pytest.approx(analytics.r2_sortability(X, W, tol), abs=1e-9)
        assert sortability.cev_sortability(X, W, tol) == pytest.approx(analytics.snr_sortability(X, W, tol), abs=1e-9)
    np.testing.assert_allclose(sortability.r2_scores(X), analytics.r2coeff(X.T), rtol=1e-9)


def test_batch_equals_single_graph_calls():
    # more graphs than one CEV chunk, and not a multiple of it: every chunk path runs
    pairs = [instance(s, "ER-2") for s in range(sortability.CEV_CHUNK + 3)]
    Xs, Ws = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    for score, fn in (("var", sortability.var_sortability), ("r2", sortability.r2_sortability),
                      ("cev", sortability.cev_sortability)):
        got = np.asarray(sortability.sortability_batch(Xs, Ws, score, 1e-9))
        np.testing.assert_allclose(got, [fn(X, W, 1e-9) for X, W in pairs], atol=1e-9)


def test_iscm_var_sortability_is_one_half_with_a_tolerance():
    X, W = instance(4, "ER-2", kind="iscm")
    assert sortability.var_sortability(X, W, 1e-9) == 0.5


def test_sort_and_regress_is_least_squares_on_predecessors():
    X, W = instance(5, "ER-2")
    s = np.random.default_rng(0).normal(size=10)
    got = np.asarray(sortability.sort_and_regress(X, s, threshold=0.0))
    order = np.argsort(s)
    Xc = X - X.mean(0)
    for k in range(1, 10):
        pred, tgt = order[:k], order[k]
        beta = np.linalg.lstsq(Xc[:, pred], Xc[:, tgt], rcond=None)[0]
        np.testing.assert_allclose(got[pred, tgt], beta, rtol=1e-8, atol=1e-10)
    rank = np.argsort(order)
    i, j = np.nonzero(got)
    assert np.all(rank[i] < rank[j])                 # edges only point forward in the sorted order
    # with the true order and many samples the support and the weights are recovered
    X, W = instance(6, "ER-2", n=50_000)
    order_true = np.argsort(dags.topological_order(W))
    est = np.asarray(sortability.sort_and_regress(X, order_true.astype(float), threshold=0.1))
    np.testing.assert_array_equal(est != 0, W != 0)
    np.testing.assert_allclose(est[W != 0], W[W != 0], atol=0.05)


def test_errors():
    X, W = instance(0)
    with pytest.raises(ValueError, match="singular: variables \\[0, 1\\]"):
        Y = X.copy()
        Y[:, 1] = 2 * Y[:, 0]
        sortability.r2_sortability(Y, W)
    with pytest.raises(ValueError, match="constant columns \\(variables \\[3\\]\\)"):
        Y = X.copy()
        Y[:, 3] = 1.0
        sortability.r2_scores(Y)
    with pytest.raises(ValueError, match="^n \\(samples, X.shape\\[0\\]\\) must be an integer >= 2"):
        sortability.var_sortability(X[:1], W)
    with pytest.raises(ValueError, match="^W must have shape"):
        sortability.var_sortability(X, W[:3, :3])
    with pytest.raises(ValueError, match="no edge"):
        sortability.var_sortability(X, np.zeros_like(W))
    with pytest.raises(ValueError, match="^tol must be"):
        sortability.var_sortability(X, W, -1.0)
