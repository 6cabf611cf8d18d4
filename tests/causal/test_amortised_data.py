"""xfmr.causal.amortised_data: the training batches' graphs and data, tested on their distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.causal import scm
from xfmr.causal.amortised_data import sample_graphs_and_data

B, D, N = 24, 5, 4000


def descendants(A):
    """Boolean (d, d): [i, j] iff a directed path i -> ... -> j exists."""
    R = A.copy()
    for _ in range(len(A)):
        R = R | ((R.astype(int) @ A.astype(int)) > 0)
    return R


@pytest.fixture(scope="module", params=scm.KINDS)
def batch(request):
    Xs, As = sample_graphs_and_data(jax.random.PRNGKey(3), B, D, N, request.param, k=1.5, dtype=jnp.float64)
    return request.param, np.asarray(Xs), np.asarray(As) != 0


def test_graphs_are_erdos_renyi_dags(batch):
    _, _, As = batch
    p = min(2 * 1.5 / (D - 1), 0.99)
    assert not As[:, np.arange(D), np.arange(D)].any()
    assert not (As & np.swapaxes(As, 1, 2)).any()                          # no pair both ways
    assert all(not descendants(A).diagonal().any() for A in As)             # acyclic
    pairs = B * D * (D - 1) / 2
    assert abs(As.sum() - p * pairs) < 4 * np.sqrt(p * (1 - p) * pairs)


def test_data_obey_the_graph(batch):
    """Each node, regressed on its parents, leaves a residual uncorrelated with its non-descendants
    (the local Markov property of the graph the batch returns), and the implied weights have the
    drawn magnitudes [0.5, 2] (raw SCM and iSCM; the standardized SCM rescales them)."""
    kind, Xs, As = batch
    tol = 5 / np.sqrt(N)
    for X, A in zip(Xs, As):
        X = X - X.mean(0)
        below = descendants(A)
        for j in range(D):
            parents = np.flatnonzero(A[:, j])
            coef = np.linalg.lstsq(X[:, parents], X[:, j], rcond=None)[0] if parents.size else np.zeros(0)
            r = X[:, j] - X[:, parents] @ coef
            others = np.flatnonzero(~below[j] & ~A[:, j] & (np.arange(D) != j))
            if others.size:
                corr = (X[:, others].T @ r) / np.sqrt((X[:, others] ** 2).sum(0) * (r @ r))
                assert np.abs(corr).max() < tol, (kind, j, corr)
            if parents.size and kind != "standardized":
                w = np.abs(coef) / np.sqrt(r.var())              # weight on unit-variance noise
                assert np.all((w > 0.5 - 0.1) & (w < 2.0 + 0.1)), (kind, j, w)
    if kind != "scm":
        np.testing.assert_allclose(Xs.std(1, ddof=1), 1.0, rtol=1e-10)     # standardized every column
    else:
        assert Xs.std(1).max() > 1.5                                        # variances grow down the graph


def test_dtype_and_errors():
    Xs, As = sample_graphs_and_data(jax.random.PRNGKey(0), 2, 4, 10)
    assert Xs.dtype == As.dtype == jnp.float32
    with pytest.raises(ValueError, match="^kind must be"):
        sample_graphs_and_data(jax.random.PRNGKey(0), 2, 4, 10, "gaussian")
    with pytest.raises(ValueError, match="^high must be"):
        sample_graphs_and_data(jax.random.PRNGKey(0), 2, 4, 10, low=2.0, high=1.0)
    with pytest.raises(ValueError, match="^n must be"):
        sample_graphs_and_data(jax.random.PRNGKey(0), 2, 4, 1)
