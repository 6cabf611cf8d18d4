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
generator seeded from that key. Every generator takes the ``dtype`` of its random draws
(``float32`` by default; ``float64`` needs ``jax_enable_x64``): float32 and float64 draws from one
key differ, so the dtype, not the process's x64 flag, decides which graph a key gives.
:func:`erdos_renyi_ordered` and :func:`random_weights` are pure JAX (jit- and vmap-compatible
for a static ``d``); the other generators run once per graph in Python.

:func:`rooting` orients an undirected tree away from a chosen node (the Markov-equivalent
orientations of a tree).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import check_array, check_choice, check_float_dtype, check_int, check_real, check_shape

__all__ = [
    "topological_order",
    "is_acyclic",
    "erdos_renyi_ordered",
    "erdos_renyi",
    "scale_free",
    "random_tree",
    "random_weights",
    "GRAPH_FAMILIES",
    "sample_graph",
    "weighted_graphs",
    "rooting",
]


def _numpy_rng(key: jax.Array, dtype: np.dtype) -> np.random.Generator:
    """A NumPy generator seeded from ``key`` (by integers of ``dtype``'s width: 32 or 64 bits)."""
    int_dtype = jnp.int64 if dtype.itemsize == 8 else jnp.int32
    return np.random.default_rng(np.asarray(jax.random.randint(key, (4,), 0, 2**31 - 1, dtype=int_dtype)))


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
    check_shape(A, "W", (None, None))
    check_shape(A, "W", (A.shape[0], A.shape[0]))
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


def erdos_renyi_ordered(key: jax.Array, d: int, k: float, dtype=jnp.float32) -> tuple[jnp.ndarray, jnp.ndarray]:
    """ER-k DAG and a topological order of it, in pure JAX (jit-compatible for static ``d``, ``k``).

    Every pair is joined with probability ``p = min(2k/(d-1), 0.99)`` (``k`` expected edges per
    node) and oriented along a uniformly random order of the nodes.

    Args:
        key: PRNG key.
        d: number of nodes, ``>= 2``.
        k: expected edges per node, ``> 0``.
        dtype: float dtype of the uniform draws that decide the edges.

    Returns:
        ``(A, order)``: ``(d, d)`` boolean adjacency (``A[i, j]`` for ``i -> j``) and ``(d,)``
        node indices with every edge ``order[a] -> order[b]`` having ``a < b``.
    """
    d = check_int(d, "d", minimum=2)
    k = check_real(k, "k", minimum=0.0, strict_minimum=True)
    dtype = check_float_dtype(dtype)
    k_edges, k_perm = jax.random.split(key)
    p = jnp.asarray(min(2.0 * k / (d - 1), 0.99), dtype)
    upper = jnp.triu(jax.random.bernoulli(k_edges, p, (d, d)), 1)   # edge a -> b only for a < b
    perm = jax.random.permutation(k_perm, d)                          # node i takes position perm[i]
    return upper[perm][:, perm], jnp.argsort(perm)


def erdos_renyi(key: jax.Array, d: int, k: float, dtype=jnp.float32) -> jnp.ndarray:
    """ER-k DAG: ``(d, d)`` boolean adjacency, edge probability ``min(2k/(d-1), 0.99)``
    (:func:`erdos_renyi_ordered` without the order)."""
    return erdos_renyi_ordered(key, d, k, dtype)[0]


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


def scale_free(key: jax.Array, d: int, m: int, kind: str = "undirected", dtype=jnp.float32) -> jnp.ndarray:
    """Scale-free DAG from Barabasi-Albert preferential attachment (``m`` edges per new node).

    Args:
        key: PRNG key.
        d: number of nodes (``d > m``).
        m: edges added with every new node.
        kind: ``"undirected"`` (oriented along a random order), ``"directed"`` (new -> old:
            power-law in-degree, hubs are effects) or ``"transposed"`` (old -> new).
        dtype: float dtype whose width (32 or 64 bits) seeds the preferential-attachment draws.

    Returns:
        ``(d, d)`` boolean adjacency with shuffled labels.
    """
    d = check_int(d, "d", minimum=2)
    m = check_int(m, "m", minimum=1)
    kind = check_choice(kind, "kind", ("undirected", "directed", "transposed"))
    dtype = check_float_dtype(dtype)
    if m >= d:
        raise ValueError(f"m must be smaller than d, got m = {m}, d = {d}")
    k_ba, k_orient, k_perm = jax.random.split(key, 3)
    A = np.zeros((d, d), dtype=bool)
    rank = np.asarray(jax.random.permutation(k_orient, d))
    for new, old in _barabasi_albert(_numpy_rng(k_ba, dtype), d, m):
        if kind == "directed":
            A[new, old] = True
        elif kind == "transposed":
            A[old, new] = True
        elif rank[new] < rank[old]:
            A[new, old] = True
        else:
            A[old, new] = True
    return _shuffle(k_perm, A)


def random_tree(key: jax.Array, d: int, dtype=jnp.float32) -> jnp.ndarray:
    """Uniform random recursive tree: node t > 0 gets one parent drawn uniformly from 0..t-1
    (by a uniform draw of ``dtype``)."""
    d = check_int(d, "d", minimum=2)
    dtype = check_float_dtype(dtype)
    k_par, k_perm = jax.random.split(key)
    u = np.asarray(jax.random.uniform(k_par, (d,), dtype))
    A = np.zeros((d, d), dtype=bool)
    for t in range(1, d):
        A[int(u[t] * t), t] = True
    return _shuffle(k_perm, A)


def random_weights(key: jax.Array, A, low: float = 0.5, high: float = 2.0, dtype=jnp.float32) -> jnp.ndarray:
    """Weights ``w_ij ~ U([-high, -low] U [low, high])`` on the edges of ``A``, 0 elsewhere.

    Pure JAX (jit-compatible). Returns ``(d, d)`` weights of ``dtype``.

    Raises:
        ValueError: unless ``0 < low <= high``.
    """
    low = check_real(low, "low", minimum=0.0, strict_minimum=True)
    high = check_real(high, "high", minimum=low)
    dtype = check_float_dtype(dtype)
    A = check_array(A, "A", ndim=2)
    k_mag, k_sign = jax.random.split(key)
    mag = jax.random.uniform(k_mag, A.shape, dtype, minval=low, maxval=high)
    sign = jnp.where(jax.random.bernoulli(k_sign, jnp.asarray(0.5, dtype), A.shape), 1.0, -1.0).astype(dtype)
    return jnp.where(A != 0, sign * mag, jnp.zeros((), dtype))


GRAPH_FAMILIES = ("ER-2", "ER-4", "SF-undirected", "SF-directed", "SF-transposed", "tree")


def sample_graph(key: jax.Array, family: str, d: int, dtype=jnp.float32) -> jnp.ndarray:
    """A boolean DAG of one of :data:`GRAPH_FAMILIES` (scale-free graphs use ``m = 2``)."""
    family = check_choice(family, "family", GRAPH_FAMILIES)
    if family.startswith("ER-"):
        return erdos_renyi(key, d, float(family[3:]), dtype)
    if family.startswith("SF-"):
        return scale_free(key, d, 2, family[3:], dtype)
    return random_tree(key, d, dtype)


def weighted_graphs(key: jax.Array, family: str, d: int, count: int, low: float = 0.5,
                    high: float = 2.0, dtype=jnp.float32) -> jnp.ndarray:
    """``count`` weighted DAGs ``(count, d, d)`` of one family, graph ``b`` drawn from ``split(key, count)[b]``
    (:func:`sample_graph`, then :func:`random_weights`, all draws of ``dtype``)."""
    count = check_int(count, "count", minimum=1)
    out = []
    for k in jax.random.split(key, count):
        k_graph, k_weights = jax.random.split(k)
        out.append(random_weights(k_weights, sample_graph(k_graph, family, d, dtype), low, high, dtype))
    return jnp.stack(out)


def rooting(A, root: int) -> np.ndarray:
    """The tree ``A`` (its skeleton ``A + A^T``) oriented away from
    ``root``, breadth first.

    A rooting has no collider, so the rootings of one tree are Markov
    equivalent; every node but ``root`` gets exactly one parent, its
    neighbour on the path to ``root``.

    Args:
        A: ``(d, d)`` adjacency whose skeleton is a tree (any edge
        directions).
        root: the node the edges point away from, in ``[0, d)``.

    Returns:
        ``(d, d)`` boolean adjacency, ``[i, j]`` for ``i -> j``.

    Raises:
        ValueError: ``A`` not square, ``root`` out of range, or the
            skeleton not a tree (a cycle, or a node not reached from
            ``root``).
    """
    U = np.asarray(A)
    check_shape(U, "A", (None, None))
    U = check_shape(U, "A", (U.shape[0], U.shape[0])) != 0
    root = check_int(root, "root", minimum=0, maximum=U.shape[0] - 1)
    U = U | U.T
    if U.sum() // 2 != U.shape[0] - 1:
        raise ValueError(
            f"A must be a tree on its {U.shape[0]} nodes "
            f"({U.shape[0] - 1} edges), got {U.sum() // 2} edges"
        )
    B, seen, frontier = np.zeros_like(U), {root}, [root]
    while frontier:
        nxt = []
        for i in frontier:
            for j in np.flatnonzero(U[i]):
                if j not in seen:
                    B[i, j] = True
                    seen.add(int(j))
                    nxt.append(int(j))
        frontier = nxt
    if len(seen) < U.shape[0]:
        raise ValueError(
            "A must be a tree: nodes "
            f"{sorted(set(range(U.shape[0])) - seen)} "
            f"are not connected to {root}"
        )
    return B
