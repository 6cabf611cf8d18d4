"""xfmr.causal.graph_metrics: SHD and F1 on drawn graphs (metric axioms, a per-pair count, known
cases), AUROC against the pairwise definition, edge metrics, and causal-learn's CPDAG encoding."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.causal.strategies import directed_graphs
from xfmr.causal import graph_metrics as gm

D = 5
graphs = directed_graphs(D)


def pair_shd(T, E):
    """SHD counted pair by pair: the Hamming distance of (a_ij, a_ji), a single edge reversed costing 1."""
    cost = 0
    for i in range(len(T)):
        for j in range(i + 1, len(T)):
            t, e = (T[i, j], T[j, i]), (E[i, j], E[j, i])
            one_way_reversed = sum(t) == 1 and e == t[::-1]
            cost += 1 if one_way_reversed else sum(a != b for a, b in zip(t, e))
    return cost


@settings(max_examples=60, deadline=None, derandomize=True)
@given(graphs, graphs, graphs)
def test_shd_is_a_metric_counting_pairs(T, E, F):
    s = gm.shd(T, E)
    assert s == pair_shd(T, E)
    assert s == gm.shd(E, T)                                   # symmetric
    assert (s == 0) == np.array_equal(T, E)                    # zero iff equal
    assert gm.shd(T, F) <= s + gm.shd(E, F)                    # triangle inequality
    assert (T != E).sum() / 2 <= s <= (T != E).sum()           # between a reversal per pair and none
    assert gm.shd(T * np.linspace(-2.0, -0.5, D * D).reshape(D, D), E) == s   # weights count only as nonzero


@settings(max_examples=60, deadline=None, derandomize=True)
@given(graphs, graphs)
def test_f1_bounds_symmetry_and_extremes(T, E):
    f = gm.edge_f1(T, E)
    assert 0.0 <= f <= 1.0 and f == gm.edge_f1(E, T)
    assert (f == 1.0) == (T.any() and np.array_equal(T, E))
    assert (f == 0.0) == (not (T & E).any())
    tp = (T & E).sum()
    if T.any() and E.any() and tp:                            # harmonic mean of precision and recall
        precision, recall = tp / E.sum(), tp / T.sum()
        assert f == pytest.approx(2 * precision * recall / (precision + recall))


def test_shd_and_f1_on_small_cases():
    T = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]])
    R = np.array([[0, 0, 1], [1, 0, 1], [0, 0, 0]])        # 0->1 reversed
    assert gm.shd(T, R) == 1 and gm.edge_f1(T, R) == pytest.approx(2 * 2 / 6)
    M = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])        # 0->2 missing
    assert gm.shd(T, M) == 1 and gm.edge_f1(T, M) == pytest.approx(2 * 2 / 5)
    assert gm.shd(T, T.T) == 3 and gm.edge_f1(T, T.T) == 0.0
    assert gm.shd(T, np.zeros((3, 3))) == 3 and gm.edge_f1(np.zeros((3, 3)), np.zeros((3, 3))) == 0.0
    U = np.array([[0, 1, 1], [1, 0, 1], [0, 0, 0]])        # 0-1 undirected: one extra directed edge
    assert gm.shd(T, U) == 1 and gm.edge_f1(T, U) == pytest.approx(2 * 3 / 7)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(2, 12).flatmap(lambda m: st.tuples(
    hnp.arrays(bool, (m,)).filter(lambda y: 0 < y.sum() < y.size),
    hnp.arrays(np.float64, (m,), elements=st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])))))
def test_auroc_is_the_pairwise_probability(case):
    y, s = case                                           # few distinct scores: ties are common
    pos, neg = s[y], s[~y]
    pairwise = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg])
    assert gm.auroc(y, s) == pytest.approx(pairwise)
    assert gm.auroc(y, -s) == pytest.approx(1.0 - pairwise)        # reversing the scores
    assert gm.auroc(y, np.exp(s)) == pytest.approx(pairwise)       # only the ranks count


def test_edge_metrics_perfect_reversed_and_uninformed():
    W = np.zeros((4, 4))
    W[0, 1] = W[1, 2] = W[0, 3] = 1.0
    L = np.where(W != 0, 10.0, -10.0)
    m = gm.edge_metrics(W, L)
    assert m["auroc"] == 1.0 and m["f1"] == 1.0 and m["shd"] == 0 and m["orient"] == 1.0
    assert m["bce"] == pytest.approx(np.log1p(np.exp(-10.0)))     # every edge right with logit 10
    m = gm.edge_metrics(W, L.T)                                    # every edge reversed
    assert m["orient"] == 0.0 and m["f1"] == 0.0 and m["shd"] == 3 and m["auroc"] == pytest.approx(0.5 * 6 / 9)
    m = gm.edge_metrics(W, np.zeros((4, 4)))                       # logit 0 everywhere
    assert m["bce"] == pytest.approx(np.log(2.0)) and m["orient"] == 0.5 and m["auroc"] == 0.5
    assert m["f1"] == 0.0 and m["shd"] == 3                        # probability 1/2 is not > 1/2
    assert np.isnan(gm.edge_metrics(np.zeros((3, 3)), np.zeros((3, 3)))["orient"])


def test_cpdag_encoding_of_causal_learn():
    # i -> j is G[j, i] = 1, G[i, j] = -1; i - j is -1 both ways
    G = np.zeros((4, 4))
    G[1, 0], G[0, 1] = 1, -1                     # 0 -> 1
    G[2, 3] = G[3, 2] = -1                       # 2 - 3
    A = np.zeros((4, 4))
    A[0, 1] = A[2, 3] = A[3, 2] = 1
    np.testing.assert_array_equal(gm.cpdag_to_adjacency(G), A)


def test_cpdag_of_pc_on_a_collider_and_a_chain():
    from causallearn.search.ConstraintBased.PC import pc

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3000))
    c = a + b + rng.normal(size=3000)                      # collider a -> c <- b: PC orients it
    X = np.stack([a, b, c], axis=1)
    A = gm.cpdag_to_adjacency(pc(X, 0.01, "fisherz", show_progress=False).G.graph)
    np.testing.assert_array_equal(A, [[0, 0, 1], [0, 0, 1], [0, 0, 0]])
    y = a + rng.normal(size=3000)
    z = y + rng.normal(size=3000)                          # chain a -> y -> z: only the skeleton
    A = gm.cpdag_to_adjacency(pc(np.stack([a, y, z], 1), 0.01, "fisherz", show_progress=False).G.graph)
    np.testing.assert_array_equal(A, [[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    assert gm.shd(np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]]), A) == 2   # one extra direction per edge


def test_errors():
    with pytest.raises(ValueError, match="^W_est must have shape \\(3, 3\\)"):
        gm.shd(np.eye(3), np.eye(4))
    with pytest.raises(ValueError, match="^W_true must have shape \\(2, 2\\)"):
        gm.edge_f1(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="^logits must have shape \\(3, 3\\)"):
        gm.edge_metrics(np.eye(3), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="both classes"):
        gm.auroc([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match="^threshold must be"):
        gm.edge_metrics(np.eye(3), np.zeros((3, 3)), threshold=1.5)
