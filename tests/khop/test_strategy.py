"""xfmr.khop.strategy: pointer maps against the reference hop, the similarity, the counts."""

import numpy as np
import pytest

from xfmr.khop import task
from xfmr.khop.strategy import (best_maps, counts_table, strategy_of, layer_counts, normalised_inner_product, pointer_matrices,
                                pointer_similarity, pointer_targets)


def test_counts():
    assert [layer_counts(k) for k in (1, 2, 3, 4, 8)] == [(2, 2), (3, 3), (3, 4), (4, 5), (5, 9)]


def test_counts_table_marks_which_count_each_depth_reaches():
    lines = counts_table({2: [0.0, 0.01, 0.5, 0.6], "4": np.array([0.0, 0.0, 0.02, 0.2])}).splitlines()
    assert len(lines) == 5 and "L = 2" in lines[0] and "L = 4" in lines[0]
    # k = 3: doubling needs 3 layers, composition 4; depth 2 reaches neither, depth 4 both
    assert lines[3].split()[:3] == ["3", "3", "4"]
    assert "0.600 (--)" in lines[3] and "0.200 (DC)" in lines[3]
    assert "0.500 (--)" in lines[2] and "0.020 (DC)" in lines[2]
    with pytest.raises(ValueError, match="errors"):
        counts_table({})
    with pytest.raises(ValueError, match="errors"):
        counts_table({2: [0.0, 0.1], 3: [0.0, 0.1, 0.2]})
    with pytest.raises(ValueError, match="k"):
        layer_counts(0)
    with pytest.raises(TypeError, match="k"):
        layer_counts(1.5)


def test_find_powers_give_the_hops():
    import jax
    x = np.asarray(task.sample_khop_sequences(jax.random.PRNGKey(0), 20, 24, 4))
    t = pointer_targets(x, powers=(1, 2, 3, 4))
    for j in (1, 2, 3, 4):
        ref = np.asarray(task.hop(x, j))
        got = np.where(t[f"find^{j}"] >= 0, np.take_along_axis(x, np.maximum(t[f"find^{j}"], 0), -1),
                       task.BOTTOM)
        assert (got == ref).all()
    # previous occurrence: same token, strictly earlier, no equal token in between
    prev = t["find-1"]
    for b in range(3):
        for i in range(x.shape[1]):
            earlier = [j for j in range(i) if x[b, j] == x[b, i]]
            assert prev[b, i] == (earlier[-1] if earlier else -1)
    assert (t["i-1"][:, 0] == -1).all() and (t["i-1"][:, 5] == 4).all()


def test_similarity():
    P = pointer_matrices(np.array([-1, 0, 1, 1]))
    assert P.sum() == 3 and P[0].sum() == 0 and P[3, 1] == 1
    assert normalised_inner_product(P, P) == pytest.approx(1.0)
    Q = pointer_matrices(np.array([-1, 0, 0, 2]))
    assert normalised_inner_product(P, Q) == pytest.approx(1 / 3)
    assert normalised_inner_product(P, np.zeros((4, 4))) == 0.0
    x = np.array([[0, 1, 0, 1, 2, 0]])
    t = pointer_targets(x, powers=(1,))
    A = pointer_matrices(t["find^1"])[:, None, None]          # a head that is exactly find
    names, sim = pointer_similarity(A, x, powers=(1, 2))
    assert sim.shape == (1, 1, len(names)) and sim[0, 0, names.index("find^1")] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="targets"):
        pointer_matrices(np.array([0, 5]))
    with pytest.raises(ValueError, match="attn"):
        pointer_similarity(A[0], x)


def test_best_maps_and_strategy():
    names = ["i-1", "find-1", "find^1", "find^2"]
    sim = np.zeros((3, 2, 4))
    sim[0, 1, 0] = 0.9                      # layer 1: a previous-token head
    sim[1, 0, 2], sim[1, 1, 3] = 0.8, 0.6   # layer 2: find beats find^2
    sim[2, 0, 2], sim[2, 1, 3] = 0.5, 0.7   # layer 3: find^2 best
    assert best_maps(sim, names) == ["i-1", "find^1", "find^2"]
    assert strategy_of(sim, names, 0.5) == "multi-hop"
    # find^2 heads below the threshold do not count; above it they do, even beside a better find head
    sim[1, 1, 3], sim[2, 1, 3] = 0.3, 0.4
    assert best_maps(sim, names) == ["i-1", "find^1", "find^1"]
    assert strategy_of(sim, names, 0.5) == "composition"
    sim[1, 1, 3] = 0.55                       # layer 2: find best (0.8), a find^2 head at 0.55
    assert best_maps(sim, names)[1] == "find^1" and strategy_of(sim, names, 0.5) == "multi-hop"
    sim[1, 1, 3], sim[2, 0, 0] = 0.0, 0.9    # layer 3 now fits the previous token best
    assert strategy_of(sim, names, 0.5) == "other"
    assert strategy_of(sim[:1], names, 0.5) == "other"   # one layer
    # the first layer does not count: a find^2 head there is not a multi-hop strategy
    first = np.zeros((2, 1, 4))
    first[0, 0, 3], first[1, 0, 2] = 0.9, 0.9
    assert strategy_of(first, names, 0.5) == "composition"
    with pytest.raises(ValueError, match="sim"):
        best_maps(sim[0], names)
    with pytest.raises(ValueError, match="sim"):
        best_maps(sim, names[:3])
