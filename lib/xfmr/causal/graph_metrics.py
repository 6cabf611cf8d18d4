r"""Scoring an estimated graph against the true one: SHD, F1, AUROC and the edge metrics of a learner.

Graphs are ``(d, d)`` matrices, ``[i, j] != 0`` for an edge ``i -> j`` (weights count only as
nonzero). An estimate may hold both directions of a pair (an undirected edge of a CPDAG, as
:func:`cpdag_to_adjacency` encodes it): it then counts as two directed edges.

- :func:`shd`, the structural Hamming distance: per unordered pair :math:`\{i, j\}` the Hamming
  distance between the true and the estimated pair of entries :math:`(a_{ij}, a_{ji})`, except
  that a single edge estimated the wrong way round (a reversal) costs 1, not 2. It is a metric
  on graphs (symmetric, zero only for equal graphs, triangle inequality).
- :func:`edge_f1`: :math:`2\,TP / (|E_{true}| + |E_{est}|)` over directed edges.
- :func:`auroc`: the probability that a random positive scores above a random negative (ties 1/2).
- :func:`edge_metrics`: BCE, AUROC, F1, SHD and orientation accuracy of edge logits, per graph.
- :func:`cpdag_to_adjacency`: causal-learn's graph encoding (PC, GES) to an adjacency matrix,
  which decides how those methods' undirected edges are scored.
"""

from __future__ import annotations

import numpy as np

from xfmr.core.validate import check_real, check_shape

__all__ = ["shd", "edge_f1", "auroc", "edge_metrics", "cpdag_to_adjacency"]


def _square(W, name: str) -> np.ndarray:
    """``W`` as a NumPy array (no float32 round trip: a tiny weight stays an edge), checked square."""
    W = np.asarray(W)
    check_shape(W, name, (None, None))
    return check_shape(W, name, (W.shape[0], W.shape[0]))


def _edge_sets(W_true, W_est) -> tuple[np.ndarray, np.ndarray]:
    T = _square(W_true, "W_true") != 0
    return T, check_shape(np.asarray(W_est), "W_est", T.shape) != 0


def shd(W_true, W_est) -> int:
    """Structural Hamming distance: edges to add, delete or reverse (a reversal counts once).

    Raises:
        ValueError: the graphs are not square matrices of one shape.
    """
    T, E = _edge_sets(W_true, W_est)
    diff = T != E
    # a reversed edge shows up twice in diff (i->j missing, j->i extra): count the pair once
    reversed_pairs = np.sum(diff & diff.T & (T | T.T) & ~(T & T.T)) // 2
    return int(diff.sum() - reversed_pairs)


def edge_f1(W_true, W_est) -> float:
    """F1 score of the directed edges of ``W_est`` against ``W_true`` (0 if neither has an edge)."""
    T, E = _edge_sets(W_true, W_est)
    tp = np.sum(T & E)
    denom = T.sum() + E.sum()
    return float(2 * tp / denom) if denom else 0.0


def auroc(labels, scores) -> float:
    """Area under the ROC curve of ``scores`` for boolean ``labels`` (1-D), ties counted 1/2.

    The probability that a random positive scores above a random negative (Mann-Whitney).

    Raises:
        ValueError: shapes differ, or ``labels`` lacks a positive or a negative.
    """
    y = np.asarray(labels).astype(bool).ravel()
    s = np.asarray(scores, dtype=float).ravel()
    if y.shape != s.shape:
        raise ValueError(f"labels and scores must have the same size, got {y.size} and {s.size}")
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        raise ValueError(f"auroc needs both classes, got {pos.size} positives and {neg.size} negatives")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def edge_metrics(W_true, logits, threshold: float = 0.5) -> dict:
    """Per-graph metrics of edge logits ``(d, d)`` against the true graph ``W_true`` ``(d, d)``.

    Returns a dict with ``bce`` (mean off-diagonal binary cross-entropy, nats), ``auroc``
    (off-diagonal entries; nan if the graph has no edge or no non-edge), ``f1`` and ``shd``
    (:func:`edge_f1`, :func:`shd` of the edges with probability ``> threshold``) and
    ``orient``: the share of true edges ``i -> j`` with ``logits[i, j] > logits[j, i]`` (ties
    1/2; nan if no edge), which the skeleton does not decide.
    """
    A = np.asarray(W_true) != 0
    L = np.asarray(logits, dtype=float)
    check_shape(L, "logits", A.shape)
    threshold = check_real(threshold, "threshold", minimum=0.0, maximum=1.0)
    d = A.shape[0]
    off = ~np.eye(d, dtype=bool)
    # BCE(sigmoid(l), a) = softplus(l) - a l, stably
    bce = float(np.mean((np.logaddexp(0.0, L) - A * L)[off]))
    est = (1.0 / (1.0 + np.exp(-L)) > threshold) & off
    has_edge = A.any()
    auc = auroc(A[off], L[off]) if has_edge and (~A[off]).any() else float("nan")
    if has_edge:
        i, j = np.nonzero(A)
        orient = float(np.mean((L[i, j] > L[j, i]) + 0.5 * (L[i, j] == L[j, i])))
    else:
        orient = float("nan")
    return {"bce": bce, "auroc": auc, "f1": edge_f1(A, est), "shd": shd(A, est), "orient": orient}


def cpdag_to_adjacency(G) -> np.ndarray:
    """Adjacency ``(d, d)`` (float, ``[i, j] = 1`` for ``i -> j``) of a causal-learn graph matrix.

    causal-learn's ``GeneralGraph.graph`` encodes ``i -> j`` as ``G[j, i] = 1, G[i, j] = -1``
    and an undirected edge ``i - j`` as ``G[i, j] = G[j, i] = -1``. A directed edge keeps its
    direction; an undirected edge becomes both directions, so :func:`shd` and :func:`edge_f1`
    score it as one correct and one wrong directed edge against a true edge.
    """
    G = _square(G, "G")
    directed = (G.T == 1) & (G == -1)
    undirected = (G == -1) & (G.T == -1)
    return (directed | undirected).astype(float)
