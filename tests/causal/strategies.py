"""Hypothesis strategies of Part VI: weighted DAGs, directed graphs and SCM data drawn as arrays.

Values, not seeds, come from hypothesis (so a failure shrinks to a small graph): the edge
pattern, the weight magnitudes and signs, the node labels (a drawn permutation, so that the
index of a node says nothing about its position in the causal order) and the noise.
"""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


@st.composite
def weighted_dags(draw, sizes=(2, 3, 4, 5), low=0.5, high=2.0, min_edges=0):
    """``(W, order)``: a weighted DAG ``(d, d)`` (float64, ``W[i, j]`` for ``i -> j``) with
    ``|w| in [low, high]``, random signs, shuffled labels, at least ``min_edges`` edges, and a
    topological order of it."""
    d = draw(st.sampled_from(sizes))
    upper = np.triu(draw(hnp.arrays(bool, (d, d))), 1)
    if upper.sum() < min_edges:
        upper[np.triu_indices(d, 1)[0][:min_edges], np.triu_indices(d, 1)[1][:min_edges]] = True
    mags = draw(hnp.arrays(np.float64, (d, d), elements=st.floats(low, high)))
    signs = np.where(draw(hnp.arrays(bool, (d, d))), 1.0, -1.0)
    perm = np.array(draw(st.permutations(range(d))))       # node perm[a] takes position a
    W = np.zeros((d, d))
    W[np.ix_(perm, perm)] = upper * mags * signs
    return W, perm


def noise_variances(d):
    """Noise variances ``(d,)`` in [0.25, 4]."""
    return hnp.arrays(np.float64, (d,), elements=st.floats(0.25, 4.0))


def directed_graphs(d):
    """Boolean ``(d, d)`` directed graphs without self-loops, both directions of a pair allowed."""
    return hnp.arrays(bool, (d, d)).map(lambda A: A & ~np.eye(d, dtype=bool))


@st.composite
def scm_data(draw, n=40, sizes=(3, 4, 5), min_edges=1):
    """``(X, W)``: ``n`` samples ``(n, d)`` of a linear SCM on a drawn DAG ``W`` (:func:`weighted_dags`),
    with drawn noise variances and every column then multiplied by a drawn scale in [0.2, 5].

    The graph, the weights and the scales come from hypothesis; the Gaussian noise from a
    NumPy generator seeded by a drawn integer (drawn floats tie too often for a correlation
    matrix to stay regular).
    """
    W, _ = draw(weighted_dags(sizes, min_edges=min_edges))
    d = W.shape[0]
    sd = np.sqrt(draw(noise_variances(d)))
    scale = draw(hnp.arrays(np.float64, (d,), elements=st.floats(0.2, 5.0)))
    N = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).normal(size=(n, d)) * sd
    X = np.linalg.solve((np.eye(d) - W).T, N.T).T          # x^T = x^T W + eps^T
    return X * scale, W
