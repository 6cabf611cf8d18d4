"""Random directed acyclic graphs and edge weights for linear structural causal models.

Convention everywhere in Part VI: a graph on ``d`` nodes is a ``(d, d)`` matrix ``W`` with
``W[i, j] != 0`` iff there is an edge ``i -> j`` (a weighted adjacency matrix; a boolean one
for the bare graph). Node labels are shuffled by every generator, so that the index of a node
says nothing about its position in the causal order.

Graph families (those of Ormaniec et al., ICLR 2025):

- :func:`erdos_renyi`: ER-k, every pair joined with probability ``min(2k / (d - 1), 0.99)``,
  oriented along a random order (``k`` expected edges per node, ``k d`` edges in all);
- :func:`scale_free`: Barabasi-Albert preferential attachment with ``m`` edges per new node,
  ``kind="undirected"`` (the undirected graph oriented along a random order),
  ``"directed"`` (edges from the new node to the old ones: power-law *in*-degree, hubs are
  effects) or ``"transposed"`` (the reverse: power-law *out*-degree, hubs are causes);
- :func:`random_tree`: a uniform random recursive tree, every node but the root has one parent.

Randomness comes from a JAX key; the sequential Barabasi-Albert process runs in NumPy on a
generator seeded from that key.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import check_array, check_choice, check_int, check_real

__all__ = [
    "topological_order",
    "is_acyclic",
    "erdos_renyi",
    "scale_free",
    "random_tree",
    "random_weights",
    "GRAPH_FAMILIES",
    "sample_graph",
    "weighted_graphs",
    "shd",
    "edge_f1",
]


def _numpy_rng(key: jax.Array) -> np.random.Generator:
    return np.random.default_rng(np.asarray(jax.random.randint(key, (4,), 0, 2**31 - 1)))


def _shuffle(key: jax.Array, A: np.ndarray) -> jnp.ndarray:
    perm = np.asarray(jax.random.permutation(key, A.shape[0]))
    return jnp.asarray(A[np.ix_(perm, perm)])


def topological_order(W) -> np.ndarray:
    """A topological order of the graph ``W`` (Kahn's algorithm, smallest index first).

    Args:
        W: ``(d, d)`` adjacency matrix, ``W[i, j] != 0`` for an edge ``i -> j``.

    Returns:
        ``(d,)`` integer array ``order`` with every edge ``order[a] -> order[b]`` having ``a < b``.

    Raises:
        ValueError: if ``W`` is not square or has a directed cycle (the message names the nodes
            left on cycles).
    """
    A = np.asarray(W)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"W must be a square (d, d) matrix, got shape {A.shape}")
    E = A != 0
    indeg = E.sum(axis=0).astype(int)
    order, ready = [], sorted(np.flatnonzero(indeg == 0).tolist())
    while ready:
        i = ready.pop(0)
        order.append(i)
        for j in np.flatnonzero(E[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(int(j))
        ready.sort()
    if len(order) < A.shape[0]:
        left = sorted(set(range(A.shape[0])) - set(order))
        raise ValueError(f"W must be acyclic: nodes {left} lie on or behind a directed cycle")
    return np.asarray(order, dtype=int)


def is_acyclic(W) -> bool:
    """``True`` iff the graph ``W`` has no directed cycle."""
    try:
        topological_order(W)
    except ValueError:
        return False
    return True


def erdos_renyi(key: jax.Array, d: int, k: float) -> jnp.ndarray:
    """ER-k DAG: ``(d, d)`` boolean adjacency, edge probability ``min(2k/(d-1), 0.99)``.

    Pairs are oriented along a uniformly random order of the nodes.
    """
    d = check_int(d, "d", minimum=2)
    k = check_real(k, "k", minimum=0.0, strict_minimum=True)
    k_edges, k_perm = jax.random.split(key)
    p = min(2.0 * k / (d - 1), 0.99)
    upper = np.triu(np.asarray(jax.random.bernoulli(k_edges, p, (d, d))), 1)
    return _shuffle(k_perm, upper)


def _barabasi_albert(rng: np.random.Generator, d: int, m: int) -> list[tuple[int, int]]:
    """Edges ``(new, old)`` of a Barabasi-Albert graph: node t >= m attaches to m old nodes."""
    edges: list[tuple[int, int]] = []
    targets = list(range(m))
    repeated: list[int] = []  # every node once per unit of degree
    for t in range(m, d):
        chosen = set(targets)
        edges.extend((t, s) for s in chosen)
        repeated.extend(chosen)
        repeated.extend([t] * len(chosen))
        targets = []
        while len(targets) < min(m, t + 1):
            c = int(repeated[rng.integers(len(repeated))])
            if c not in targets:
                targets.append(c)
    return edges


def scale_free(key: jax.Array, d: int, m: int, kind: str = "undirected") -> jnp.ndarray:
    """Scale-free DAG from Barabasi-Albert preferential attachment (``m`` edges per new node).

    Args:
        key: PRNG key.
        d: number of nodes (``d > m``).
        m: edges added with every new node.
        kind: ``"undirected"`` (oriented along a random order), ``"directed"`` (new -> old:
            power-law in-degree, hubs are effects) or ``"transposed"`` (old -> new).

    Returns:
        ``(d, d)`` boolean adjacency with shuffled labels.
    """
    d = check_int(d, "d", minimum=2)
    m = check_int(m, "m", minimum=1)
    kind = check_choice(kind, "kind", ("undirected", "directed", "transposed"))
    if m >= d:
        raise ValueError(f"m must be smaller than d, got m = {m}, d = {d}")
    k_ba, k_orient, k_perm = jax.random.split(key, 3)
    A = np.zeros((d, d), dtype=bool)
    rank = np.asarray(jax.random.permutation(k_orient, d))
    for new, old in _barabasi_albert(_numpy_rng(k_ba), d, m):
        if kind == "directed":
            A[new, old] = True
        elif kind == "transposed":
            A[old, new] = True
        elif rank[new] < rank[old]:
            A[new, old] = True
        else:
            A[old, new] = True
    return _shuffle(k_perm, A)


def random_tree(key: jax.Array, d: int) -> jnp.ndarray:
    """Uniform random recursive tree: node t > 0 gets one parent drawn uniformly from 0..t-1."""
    d = check_int(d, "d", minimum=2)
    k_par, k_perm = jax.random.split(key)
    u = np.asarray(jax.random.uniform(k_par, (d,)))
    A = np.zeros((d, d), dtype=bool)
    for t in range(1, d):
        A[int(u[t] * t), t] = True
    return _shuffle(k_perm, A)


def random_weights(key: jax.Array, A, low: float = 0.5, high: float = 2.0) -> jnp.ndarray:
    """Weights ``w_ij ~ U([-high, -low] U [low, high])`` on the edges of ``A``, 0 elsewhere.

    Raises:
        ValueError: unless ``0 < low <= high``.
    """
    low = check_real(low, "low", minimum=0.0, strict_minimum=True)
    high = check_real(high, "high")
    if low > high:
        raise ValueError(f"the weight range needs low <= high, got low = {low} > high = {high}")
    A = check_array(A, "A", ndim=2)
    k_mag, k_sign = jax.random.split(key)
    mag = jax.random.uniform(k_mag, A.shape, minval=low, maxval=high, dtype=jnp.float64
                             if jax.config.jax_enable_x64 else jnp.float32)
    sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, A.shape), 1.0, -1.0)
    return jnp.where(A != 0, sign * mag, 0.0)


GRAPH_FAMILIES = ("ER-2", "ER-4", "SF-undirected", "SF-directed", "SF-transposed", "tree")


def sample_graph(key: jax.Array, family: str, d: int) -> jnp.ndarray:
    """A boolean DAG of one of :data:`GRAPH_FAMILIES` (scale-free graphs use ``m = 2``)."""
    family = check_choice(family, "family", GRAPH_FAMILIES)
    if family.startswith("ER-"):
        return erdos_renyi(key, d, float(family[3:]))
    if family.startswith("SF-"):
        return scale_free(key, d, 2, family[3:])
    return random_tree(key, d)


def weighted_graphs(key: jax.Array, family: str, d: int, count: int, low: float = 0.5,
                    high: float = 2.0) -> jnp.ndarray:
    """``count`` weighted DAGs ``(count, d, d)`` of one family, graph ``b`` drawn from ``split(key, count)[b]``."""
    count = check_int(count, "count", minimum=1)
    out = []
    for k in jax.random.split(key, count):
        k_graph, k_weights = jax.random.split(k)
        out.append(random_weights(k_weights, sample_graph(k_graph, family, d), low, high))
    return jnp.stack(out)


def shd(W_true, W_est) -> int:
    """Structural Hamming distance: edges to add, delete or reverse (a reversal counts once)."""
    T, E = np.asarray(W_true) != 0, np.asarray(W_est) != 0
    if T.shape != E.shape:
        raise ValueError(f"W_est must have the shape of W_true {T.shape}, got {E.shape}")
    diff = T != E
    # a reversed edge shows up twice in diff (i->j missing, j->i extra): count the pair once
    reversed_pairs = np.sum(diff & diff.T & (T | T.T) & ~(T & T.T)) // 2
    return int(diff.sum() - reversed_pairs)


def edge_f1(W_true, W_est) -> float:
    """F1 score of the directed edges of ``W_est`` against ``W_true`` (0 if neither has an edge)."""
    T, E = np.asarray(W_true) != 0, np.asarray(W_est) != 0
    tp = np.sum(T & E)
    denom = T.sum() + E.sum()
    return float(2 * tp / denom) if denom else 0.0
