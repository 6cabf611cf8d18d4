"""xfmr.causal.dags and xfmr.causal.scm against brute force and the authors' package ``iscm`` (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from iscm import data_sampler
from iscm.closed_form_data_generator import get_exact_covariance_for_alternate_standardization
from iscm.graph_utils import Graph

from xfmr.causal import dags, scm

jax.config.update("jax_enable_x64", True)

KEY = jax.random.PRNGKey(0)


def graph(seed, family="ER-2", d=10, low=0.5, high=2.0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return np.asarray(dags.random_weights(k2, dags.sample_graph(k1, family, d), low, high))


def iscm_graph(W):
    # iscm.Graph only knows nodes that touch an edge: add a self-free edge list covering all nodes
    g = Graph(weight_matrix=W)
    assert g.get_num_nodes() == W.shape[0]
    return g


@pytest.mark.parametrize("family", dags.GRAPH_FAMILIES)
def test_generators_give_dags_of_the_expected_size(family):
    d = 30
    A = np.asarray(dags.sample_graph(jax.random.PRNGKey(3), family, d))
    assert A.shape == (d, d) and dags.is_acyclic(A) and not A.diagonal().any()
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


def test_weights_lie_in_the_range_with_both_signs():
    A = np.ones((30, 30), bool)
    w = np.asarray(dags.random_weights(KEY, np.triu(A, 1), 0.3, 0.8))
    nz = w[w != 0]
    assert nz.size == 30 * 29 // 2 and np.all((np.abs(nz) >= 0.3) & (np.abs(nz) <= 0.8))
    assert 0.4 < np.mean(nz > 0) < 0.6


def test_errors_name_the_problem():
    cyc = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], float)
    with pytest.raises(ValueError, match="acyclic.*nodes \\[0, 1, 2\\]"):
        scm.population_covariance(cyc, 1.0, "scm")
    with pytest.raises(ValueError, match="acyclic"):
        scm.sample(KEY, cyc, 10)
    with pytest.raises(ValueError, match="low <= high"):
        dags.random_weights(KEY, np.eye(2), 2.0, 0.5)
    with pytest.raises(ValueError, match="^low must be"):
        dags.random_weights(KEY, np.eye(2), 0.0, 0.5)
    with pytest.raises(ValueError, match="^n must be"):
        scm.sample(KEY, np.zeros((2, 2)), 1)
    with pytest.raises(ValueError, match="^kind must be one of"):
        scm.population_covariance(np.zeros((2, 2)), 1.0, "naive")
    with pytest.raises(ValueError, match="noise_variance"):
        scm.population_covariance(np.zeros((2, 2)), np.ones(3), "scm")
    with pytest.raises(TypeError, match="^d must be an integer"):
        dags.erdos_renyi(KEY, 3.0, 2)


def test_scm_covariance_matches_brute_force_and_iscm_closed_form():
    W = graph(1)
    s2 = np.linspace(0.5, 2.0, 10)
    A = np.linalg.inv(np.eye(10) - W.T)
    np.testing.assert_allclose(scm.population_covariance(W, s2, "scm"), A @ np.diag(s2) @ A.T, rtol=1e-12)
    S = A @ np.diag(s2) @ A.T
    sd = np.sqrt(np.diag(S))
    np.testing.assert_allclose(scm.population_covariance(W, s2, "standardized"), S / np.outer(sd, sd), rtol=1e-12)
    cov_ref, w_ref, n_ref = get_exact_covariance_for_alternate_standardization(iscm_graph(W), dict(enumerate(s2)))
    np.testing.assert_allclose(scm.population_covariance(W, s2, "iscm"), cov_ref, rtol=1e-12, atol=1e-14)
    Wt, nt, s = scm.iscm_implied_scm(W, s2)
    np.testing.assert_allclose(Wt, w_ref, rtol=1e-12)
    np.testing.assert_allclose(nt, [n_ref[i] for i in range(10)], rtol=1e-12)
    # the implied SCM has unit variances and the iSCM's correlation matrix
    np.testing.assert_allclose(scm.population_covariance(Wt, nt, "scm"), cov_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind,standardization", [("scm", None), ("standardized", "naive"), ("iscm", "internal")])
def test_population_covariance_matches_iscm_sampler_on_large_samples(kind, standardization):
    W = graph(2)
    n = 50_000
    ref = data_sampler.sample_linear(iscm_graph(W), 1.0, standardization, n, rng=np.random.default_rng(0))
    ours = np.asarray(scm.sample(KEY, W, n, kind))
    pop = np.asarray(scm.population_covariance(W, 1.0, kind))
    scale = np.sqrt(np.outer(np.diag(pop), np.diag(pop))) + np.abs(pop)
    # sampling error of a covariance entry ~ sqrt((S_ii S_jj + S_ij^2) / n); 6 standard errors
    tol = 6 * scale / np.sqrt(n)
    for X in (ref, ours):
        emp = np.cov(X.T)
        assert np.all(np.abs(emp - pop) < tol), np.max(np.abs(emp - pop) / tol)


def test_iscm_sample_is_internally_standardized_and_paired():
    W = graph(3)
    X = np.asarray(scm.sample(KEY, W, 300, "iscm"))
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(0, ddof=1), 1, rtol=1e-12)
    raw = np.asarray(scm.sample(KEY, W, 300, "scm"))
    std = np.asarray(scm.sample(KEY, W, 300, "standardized"))
    np.testing.assert_allclose(std, (raw - raw.mean(0)) / raw.std(0, ddof=1), rtol=1e-10, atol=1e-12)
    # the iSCM sample equals the sequential recursion written out in NumPy on the same noise
    N = np.asarray(jax.random.normal(KEY, (300, 10)))
    Y = np.zeros_like(N)
    for j in dags.topological_order(W):
        y = Y @ W[:, j] + N[:, j]
        Y[:, j] = (y - y.mean()) / y.std(ddof=1)
    np.testing.assert_allclose(X, Y, rtol=1e-10, atol=1e-12)
    batch = np.asarray(scm.sample_batch(jnp.stack([jax.random.PRNGKey(1), KEY]), np.stack([graph(4), W]), 300, "iscm"))
    np.testing.assert_allclose(batch[1], X, rtol=1e-12)


def test_noise_fraction_matches_its_definition():
    W = graph(5)
    S = np.asarray(scm.population_covariance(W, 1.0, "scm"))
    np.testing.assert_allclose(scm.noise_fraction(W, 1.0, "scm"), 1 / np.diag(S), rtol=1e-12)
    np.testing.assert_allclose(scm.noise_fraction(W, 1.0, "standardized"), 1 / np.diag(S), rtol=1e-12)
    # iSCM: noise variance of the implied SCM, whose variables have unit variance
    _, nt, _ = scm.iscm_implied_scm(W, 1.0)
    np.testing.assert_allclose(scm.noise_fraction(W, 1.0, "iscm"), nt, rtol=1e-12)


def test_forest_edges_have_the_same_correlation_either_way():
    chain = np.array([[0, 1, 0], [0, 0, 2], [0, 0, 0]], float)
    fork = np.array([[0, 0, 0], [1, 0, 2], [0, 0, 0]], float)
    rev = np.array([[0, 0, 0], [1, 0, 0], [0, 2, 0]], float)
    Cs = [np.asarray(scm.population_covariance(W, 1.0, "iscm")) for W in (chain, fork, rev)]
    np.testing.assert_allclose(Cs[1], Cs[0], rtol=1e-12)
    np.testing.assert_allclose(Cs[2], Cs[0], rtol=1e-12)
    np.testing.assert_allclose([Cs[0][0, 1], Cs[0][1, 2]], [1 / np.sqrt(2), 2 / np.sqrt(5)], rtol=1e-12)


def test_shd_and_f1_on_small_cases():
    T = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]])
    assert dags.shd(T, T) == 0 and dags.edge_f1(T, T) == 1.0
    R = np.array([[0, 0, 1], [1, 0, 1], [0, 0, 0]])        # 0->1 reversed
    assert dags.shd(T, R) == 1 and dags.edge_f1(T, R) == pytest.approx(2 * 2 / 6)
    M = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])        # 0->2 missing
    assert dags.shd(T, M) == 1
    X = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]]).T      # all reversed
    assert dags.shd(T, X) == 3 and dags.edge_f1(T, X) == 0.0
    assert dags.shd(T, np.zeros((3, 3))) == 3
    Ws = np.asarray(dags.weighted_graphs(KEY, "tree", 5, 3))
    assert Ws.shape == (3, 5, 5) and all((W != 0).sum() == 4 for W in Ws)


@pytest.mark.parametrize("kind", ["iscm", "standardized"])
def test_implied_weights_invert_the_population_correlation(kind):
    W = graph(7)
    R = scm.population_covariance(W, 1.0, kind)
    np.testing.assert_allclose(scm.implied_weights(R, W != 0, kind), W, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="^R must have the shape"):
        scm.implied_weights(np.eye(3), W != 0, kind)


@pytest.mark.parametrize("family", ["ER-2", "SF-directed", "tree"])
def test_scm_sample_solves_the_structural_equations(family):
    # X = N (I - W)^{-1} from repeated squaring equals the linear solve and the equations hold
    W = graph(7, family, d=13)
    X = np.asarray(scm.sample(KEY, W, 50, "scm"))
    N = np.asarray(jax.random.normal(KEY, (50, 13)))
    np.testing.assert_allclose(X, np.linalg.solve((np.eye(13) - W).T, N.T).T, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(X - X @ W, N, atol=1e-10)


@pytest.mark.parametrize("kind", scm.KINDS)
def test_sample_batch_equals_sample_and_checks_every_graph(kind):
    Ws = np.stack([graph(s, d=9) for s in range(4)])
    keys = jax.random.split(KEY, 4)
    batch = np.asarray(scm.sample_batch(keys, Ws, 40, kind))
    for b in range(4):
        np.testing.assert_allclose(batch[b], scm.sample(keys[b], Ws[b], 40, kind), rtol=1e-10, atol=1e-12)
    cyc = Ws.copy()
    cyc[2][np.ix_([0, 1, 2], [0, 1, 2])] = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match="acyclic"):
        scm.sample_batch(keys, cyc, 40, kind)
    bad = Ws.copy()
    bad[1, 0, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        scm.sample_batch(keys, bad, 40, kind)
