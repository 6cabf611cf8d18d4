"""xfmr.causal.dags: the generators' distributions, their dtype (not the x64 flag) deciding the
graph, and tree rootings over drawn trees."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr.causal import dags

KEY = jax.random.PRNGKey(0)


@pytest.mark.parametrize("family", dags.GRAPH_FAMILIES)
def test_generators_give_dags_of_the_expected_size(family):
    d = 30
    A = np.asarray(dags.sample_graph(jax.random.PRNGKey(3), family, d))
    assert dags.is_acyclic(A) and not A.diagonal().any()
    n_edges = A.sum()
    expected = {"ER-2": 2 * d, "ER-4": 4 * d, "tree": d - 1}.get(family, 2 * (d - 2))
    if family.startswith("ER"):
        assert abs(n_edges - expected) < 0.35 * expected
    else:
        assert n_edges == expected
    if family == "tree":
        assert sorted(A.sum(0)) == [0] + [1] * (d - 1)


def test_scale_free_orientation_puts_hubs_where_stated():
    A = np.asarray(dags.scale_free(jax.random.PRNGKey(1), 200, 2, "directed"))
    assert A.sum(1).max() == 2 and A.sum(0).max() > 15          # in-degree has the hubs
    T = np.asarray(dags.scale_free(jax.random.PRNGKey(1), 200, 2, "transposed"))
    assert T.sum(0).max() == 2 and T.sum(1).max() > 15


def test_erdos_renyi_distribution_and_order():
    d, k, B = 8, 1.0, 2000
    As, orders = jax.vmap(lambda key: dags.erdos_renyi_ordered(key, d, k))(jax.random.split(KEY, B))
    As, orders = np.asarray(As), np.asarray(orders)
    for A, o in zip(As[:100], orders[:100]):        # the order is topological
        pos = np.argsort(o)
        i, j = np.nonzero(A)
        assert np.all(pos[i] < pos[j])
    p = 2 * k / (d - 1)
    edges = As.sum((1, 2))
    assert abs(edges.mean() - p * d * (d - 1) / 2) < 4 * np.sqrt(p * (1 - p) * d * (d - 1) / 2 / B)
    # every ordered pair equally likely to carry an edge (labels carry no order information)
    share = As.mean(0)[~np.eye(d, dtype=bool)]
    assert np.abs(share - p / 2).max() < 4 * np.sqrt(p / 2 / B)
    # erdos_renyi is the graph of erdos_renyi_ordered
    np.testing.assert_array_equal(dags.erdos_renyi(jax.random.split(KEY, B)[7], d, k), As[7])


def test_weights_lie_in_the_range_with_both_signs():
    A = np.ones((30, 30), bool)
    w = np.asarray(dags.random_weights(KEY, np.triu(A, 1), 0.3, 0.8))
    nz = w[w != 0]
    assert nz.size == 30 * 29 // 2 and np.all((np.abs(nz) >= 0.3) & (np.abs(nz) <= 0.8))
    assert 0.4 < np.mean(nz > 0) < 0.6
    # magnitudes uniform on [0.3, 0.8]: mean 0.55, variance 0.5^2 / 12
    assert abs(np.abs(nz).mean() - 0.55) < 4 * np.sqrt(0.25 / 12 / nz.size)


@pytest.mark.parametrize("family", dags.GRAPH_FAMILIES)
def test_the_dtype_not_the_x64_flag_decides_the_graph(family):
    def draw():
        return np.asarray(dags.weighted_graphs(jax.random.PRNGKey(5), family, 12, 3, dtype=jnp.float32))

    with jax.enable_x64(False):
        off = draw()
    on = draw()                    # the test session runs with x64 on
    assert on.dtype == off.dtype == np.float32
    np.testing.assert_array_equal(on, off)
    # float64 draws are other draws: the same key gives another graph or other weights
    W64 = np.asarray(dags.weighted_graphs(jax.random.PRNGKey(5), family, 12, 3, dtype=jnp.float64))
    assert W64.dtype == np.float64 and not np.array_equal(W64.astype(np.float32), on)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(2, 9).flatmap(lambda d: st.tuples(st.just(d), st.integers(0, 2**31 - 1), st.integers(0, d - 1))))
def test_rootings_of_drawn_trees(case):
    d, seed, root = case
    A = np.asarray(dags.random_tree(jax.random.PRNGKey(seed), d))
    B = dags.rooting(A, root)
    assert dags.is_acyclic(B)
    np.testing.assert_array_equal(B | B.T, A | A.T)                       # same skeleton
    indegree = B.sum(0)
    assert indegree[root] == 0 and np.all(np.delete(indegree, root) == 1)  # one parent each, no collider
    true_root = int(np.flatnonzero(A.sum(0) == 0)[0])
    np.testing.assert_array_equal(dags.rooting(A.T, true_root), A)          # the tree's own rooting


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="^high must be"):
        dags.random_weights(KEY, np.eye(2), 2.0, 0.5)
    with pytest.raises(ValueError, match="^low must be"):
        dags.random_weights(KEY, np.eye(2), 0.0, 0.5)
    with pytest.raises(TypeError, match="^d must be an integer"):
        dags.erdos_renyi(KEY, 3.0, 2)
    with pytest.raises(ValueError, match="^dtype must be a floating dtype"):
        dags.erdos_renyi(KEY, 3, 2, dtype=jnp.int32)
    with pytest.raises(ValueError, match="^W must have shape"):
        dags.topological_order(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="acyclic.*nodes \\[0, 1, 2\\]"):
        dags.topological_order(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]))
    path = np.diag(np.ones(3), 1)                                  # 0 - 1 - 2 - 3
    with pytest.raises(ValueError, match="^root must be"):
        dags.rooting(path, 4)
    cycle = path.copy()
    cycle[3, 0] = 1.0
    with pytest.raises(ValueError, match="must be a tree on its 4 nodes \\(3 edges\\), got 4"):
        dags.rooting(cycle, 0)
    triangle = np.zeros((4, 4))
    triangle[0, 1] = triangle[1, 2] = triangle[2, 0] = 1.0        # 3 edges, node 3 left out
    with pytest.raises(ValueError, match="nodes \\[3\\] are not connected to 0"):
        dags.rooting(triangle, 0)
