"""xfmr.causal.scm against the recursion over drawn DAGs, brute force and the authors' package
``iscm`` (float64: the test session runs with x64 on)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from iscm import data_sampler
from iscm.closed_form_data_generator import get_exact_covariance_for_alternate_standardization
from iscm.graph_utils import Graph

from tests.causal.strategies import noise_variances, weighted_dags
from xfmr.causal import dags, scm

KEY = jax.random.PRNGKey(0)


def graph(seed, family="ER-2", d=10, low=0.5, high=2.0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return np.asarray(dags.random_weights(k2, dags.sample_graph(k1, family, d, jnp.float64), low, high, jnp.float64))


def recursion_covariance(W, s2, order, kind):
    """Covariance node by node in a topological order: Cov(x, x_j) = Cov(x, x_pa) w_j, Var(x_j) =
    w_j^T Cov(x_pa) w_j + s2_j; the iSCM divides x_j by its standard deviation at once, the
    standardized SCM only at the end."""
    d = len(s2)
    S = np.zeros((d, d))
    for j in order:
        c = S @ W[:, j]                       # covariance of every node placed so far with w_j^T x
        S[:, j] = S[j, :] = c
        S[j, j] = W[:, j] @ c + s2[j]
        if kind == "iscm":
            sd = np.sqrt(S[j, j])
            S[:, j] /= sd
            S[j, :] /= sd
    if kind == "standardized":
        sd = np.sqrt(np.diag(S))
        S = S / np.outer(sd, sd)
    return S


@settings(max_examples=30, deadline=None, derandomize=True)
@given(weighted_dags(sizes=(2, 3, 5, 7)).flatmap(lambda wo: st.tuples(st.just(wo), noise_variances(len(wo[1])))),
       st.sampled_from(scm.KINDS))
def test_population_covariance_is_the_recursion_over_drawn_dags(graph_and_noise, kind):
    (W, order), s2 = graph_and_noise
    ref = recursion_covariance(W, s2, order, kind)
    np.testing.assert_allclose(scm.population_covariance(W, s2, kind), ref, rtol=1e-9, atol=1e-12)
    if kind == "scm":                         # and the closed form (I - W^T)^{-1} diag(s2) (I - W)^{-1}
        A = np.linalg.inv(np.eye(len(s2)) - W.T)
        np.testing.assert_allclose(ref, A @ np.diag(s2) @ A.T, rtol=1e-9, atol=1e-12)
    else:
        np.testing.assert_allclose(np.diag(ref), 1.0, rtol=1e-12)


def iscm_graph(W):
    # iscm.Graph only knows nodes that touch an edge: add a self-free edge list covering all nodes
    g = Graph(weight_matrix=W)
    assert g.get_num_nodes() == W.shape[0]
    return g


def test_errors_name_the_problem():
    cyc = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], float)
    with pytest.raises(ValueError, match="acyclic.*nodes \\[0, 1, 2\\]"):
        scm.population_covariance(cyc, 1.0, "scm")
    with pytest.raises(ValueError, match="acyclic"):
        scm.sample(KEY, cyc, 10)
    with pytest.raises(ValueError, match="^n must be"):
        scm.sample(KEY, np.zeros((2, 2)), 1)
    with pytest.raises(ValueError, match="^kind must be one of"):
        scm.population_covariance(np.zeros((2, 2)), 1.0, "naive")
    with pytest.raises(ValueError, match="noise_variance"):
        scm.population_covariance(np.zeros((2, 2)), np.ones(3), "scm")
    with pytest.raises(ValueError, match="^W must have shape \\(2, 2\\)"):
        scm.population_covariance(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="^n \\(rows"):
        scm.standardize(np.ones((1, 3)))


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
    batch = np.asarray(scm.sample_many(jnp.stack([jax.random.PRNGKey(1), KEY]), np.stack([graph(4), W]), 300, "iscm"))
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


@pytest.mark.parametrize("kind", ["iscm", "standardized"])
def test_implied_weights_invert_the_population_correlation(kind):
    W = graph(7)
    R = scm.population_covariance(W, 1.0, kind)
    np.testing.assert_allclose(scm.implied_weights(R, W != 0, kind), W, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="^R must have shape \\(10, 10\\)"):
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
def test_sample_many_equals_sample_and_checks_every_graph(kind):
    Ws = np.stack([graph(s, d=9) for s in range(4)])
    keys = jax.random.split(KEY, 4)
    batch = np.asarray(scm.sample_many(keys, Ws, 40, kind))
    for b in range(4):
        np.testing.assert_allclose(batch[b], scm.sample(keys[b], Ws[b], 40, kind), rtol=1e-10, atol=1e-12)
    cyc = Ws.copy()
    cyc[2][np.ix_([0, 1, 2], [0, 1, 2])] = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match="acyclic"):
        scm.sample_many(keys, cyc, 40, kind)
    bad = Ws.copy()
    bad[1, 0, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        scm.sample_many(keys, bad, 40, kind)


def test_computations_run_in_the_dtype_of_W():
    W = graph(1, d=4)
    W32 = jnp.asarray(W, jnp.float32)
    assert scm.sample(KEY, W32, 5).dtype == jnp.float32
    assert scm.population_covariance(W32, 1.0, "iscm").dtype == jnp.float32
    assert scm.sample_many(KEY[None], W32[None], 5).dtype == jnp.float32
    np.testing.assert_allclose(scm.population_covariance(W32, 1.0, "iscm"), scm.population_covariance(W, 1.0, "iscm"),
                               rtol=1e-5, atol=1e-6)
    # a bare graph has unit weights
    np.testing.assert_allclose(scm.population_covariance(W != 0), scm.population_covariance((W != 0).astype(float)),
                               rtol=1e-12)
