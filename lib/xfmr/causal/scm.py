r"""Linear Gaussian structural causal models: SCM, post-hoc standardized SCM, iSCM.

``W`` is a ``(d, d)`` weighted adjacency matrix, ``W[i, j]`` the weight of the edge ``i -> j``
(acyclic), ``noise_variance`` a scalar or a ``(d,)`` vector :math:`\sigma^2`.

- ``"scm"``: :math:`x_j = \sum_i W_{ij} x_i + \varepsilon_j`, so
  :math:`x = (I - W^\top)^{-1}\varepsilon` and :math:`\Sigma = A\,\mathrm{diag}(\sigma^2)A^\top`
  with :math:`A = (I - W^\top)^{-1}`.
- ``"standardized"``: the SCM, then every variable z-scored; population: the correlation
  matrix of :math:`\Sigma`.
- ``"iscm"`` (internally standardized, Ormaniec et al. 2025): in topological order,
  :math:`\tilde x_j = \sum_i W_{ij} x_i + \varepsilon_j` with the parents already
  standardized, then :math:`x_j = \tilde x_j / s_j`. In the population
  :math:`s_j^2 = w_{\cdot j}^\top C\, w_{\cdot j} + \sigma_j^2` with :math:`C` the correlation
  matrix of the nodes before ``j``; the iSCM is the linear SCM with weights
  :math:`W_{ij}/s_j` and noise variances :math:`\sigma_j^2/s_j^2` (:func:`iscm_implied_scm`).

Every function computes in the float dtype of ``W`` (a boolean or integer ``W``, a bare graph
with unit weights, is converted like a NumPy float64 array). Empirical samplers standardize
with the sample mean and the sample standard deviation (``ddof=1``), as the authors' package does. :func:`sample` draws the noise from the key alone,
so one key gives the three kinds of data from the *same* noise (paired comparisons).
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from xfmr.causal.dags import topological_order
from xfmr.core.validate import check_array, check_choice, check_finite, check_int, check_shape, is_concrete

__all__ = [
    "KINDS",
    "iscm_implied_scm",
    "population_covariance",
    "noise_fraction",
    "sample",
    "standardize",
    "sample_many",
    "sample_in_order",
    "implied_weights",
]

KINDS = ("scm", "standardized", "iscm")


def _as_float(x, name: str, ndim: int) -> jax.Array:
    """``x`` as a float JAX array: float arrays keep their dtype, a boolean or integer one is
    converted like a NumPy float64 array."""
    if getattr(x, "dtype", None) == bool:
        x = np.asarray(x, dtype=float)   # a bare graph: unit weights
    x = check_array(x, name, ndim=ndim, kind="number")
    return x if jnp.issubdtype(x.dtype, jnp.floating) else jnp.asarray(np.asarray(x, dtype=float))


def _check_graph(W) -> tuple[jnp.ndarray, np.ndarray]:
    W = _as_float(W, "W", 2)
    check_shape(W, "W", (W.shape[0], W.shape[0]))
    if not is_concrete(W):
        raise TypeError("W must be a concrete array (its topological order is computed in NumPy)")
    return check_finite(W, "W"), topological_order(W)


def _check_noise(noise_variance, d: int, dtype) -> jnp.ndarray:
    s2 = check_array(noise_variance, "noise_variance", ndim=(0, 1), kind="number").astype(dtype)
    if s2.ndim == 1:
        check_shape(s2, "noise_variance", (d,))
    if is_concrete(s2) and not bool(jnp.all(s2 > 0) & jnp.all(jnp.isfinite(s2))):
        raise ValueError("noise_variance must be finite and > 0")
    return jnp.broadcast_to(s2, (d,))


@jax.jit
def _iscm_recursion(
    parents: jnp.ndarray,
    pw: jnp.ndarray,
    s2: jnp.ndarray,
    order: jnp.ndarray,
):
    """Scales s (d,) and correlation matrix C (d, d) of the iSCM, by the
    recursion over the order.

    ``parents (d, K)`` lists each node's parents padded with index 0 and
    weight ``pw`` 0, so a step costs O(d K) instead of a full (d, d)
    matrix-vector product.
    """
    d = s2.shape[0]

    def step(t, carry):
        C, s = carry
        j = order[t]
        p, w = parents[j], pw[j]
        # cov(x_k, w^T x_pa) for every processed k; 0 for later ones
        v = C[:, p] @ w
        sj2 = w @ v[p] + s2[j]
        c = (v / jnp.sqrt(sj2)).at[j].set(1.0)
        C = C.at[:, j].set(c).at[j, :].set(c)
        return C, s.at[j].set(jnp.sqrt(sj2))

    C0 = jnp.eye(d, dtype=s2.dtype)
    return jax.lax.fori_loop(0, d, step, (C0, jnp.ones(d, s2.dtype)))


def _iscm_scales(W: jnp.ndarray, s2: jnp.ndarray, order: np.ndarray):
    """Pad the parent lists of the concrete ``W`` and run :func:`_iscm_recursion`."""
    E = np.asarray(W) != 0
    K = max(int(E.sum(axis=0).max()), 1)
    parents = np.zeros((E.shape[0], K), dtype=np.int32)
    pw = np.zeros((E.shape[0], K))
    Wn = np.asarray(W)
    for j in range(E.shape[0]):
        p = np.flatnonzero(E[:, j])
        parents[j, : p.size] = p
        pw[j, : p.size] = Wn[p, j]
    return _iscm_recursion(jnp.asarray(parents), jnp.asarray(pw, dtype=s2.dtype), s2, jnp.asarray(order))


def iscm_implied_scm(W, noise_variance=1.0) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    r"""The linear SCM that the population iSCM on ``W`` is.

    Returns:
        ``(W_tilde, noise_tilde, s)``: weights :math:`W_{ij}/s_j` ``(d, d)``, noise variances
        :math:`\sigma_j^2/s_j^2` ``(d,)`` and the scales :math:`s_j` ``(d,)`` (the standard
        deviation of :math:`\tilde x_j` before standardization).
    """
    W, order = _check_graph(W)
    s2 = _check_noise(noise_variance, W.shape[0], W.dtype)
    _, s = _iscm_scales(W, s2, order)
    return W / s[None, :], s2 / s**2, s


def _scm_covariance(W: jnp.ndarray, s2: jnp.ndarray) -> jnp.ndarray:
    d = W.shape[0]
    A = jnp.linalg.solve(jnp.eye(d, dtype=W.dtype) - W.T, jnp.eye(d, dtype=W.dtype))
    return (A * s2[None, :]) @ A.T


def _correlation(S: jnp.ndarray) -> jnp.ndarray:
    sd = jnp.sqrt(jnp.diag(S))
    return S / sd[:, None] / sd[None, :]


def population_covariance(W, noise_variance=1.0, kind: str = "scm") -> jnp.ndarray:
    """Population covariance ``(d, d)`` of the SCM, the standardized SCM or the iSCM on ``W``.

    Args:
        W: ``(d, d)`` weights, ``W[i, j]`` for the edge ``i -> j``; must be acyclic.
        noise_variance: scalar or ``(d,)``, all > 0.
        kind: ``"scm"``, ``"standardized"`` or ``"iscm"`` (the last two: correlation matrices).

    Raises:
        ValueError: for a cycle (naming the nodes), a wrong shape, a bad ``kind``.
    """
    kind = check_choice(kind, "kind", KINDS)
    W, order = _check_graph(W)
    s2 = _check_noise(noise_variance, W.shape[0], W.dtype)
    if kind == "iscm":
        C, _ = _iscm_scales(W, s2, order)
        return C
    S = _scm_covariance(W, s2)
    return S if kind == "scm" else _correlation(S)


def noise_fraction(W, noise_variance=1.0, kind: str = "scm") -> jnp.ndarray:
    r"""Population share of each variable's variance that is its own noise, ``(d,)``.

    :math:`1 - \mathrm{CEV}_j = \sigma_j^2 / \mathrm{Var}(\tilde x_j)` (1 for a root). The SCM and the
    standardized SCM share it (standardizing rescales a whole variable); for the iSCM the
    variance is :math:`s_j^2`.
    """
    kind = check_choice(kind, "kind", KINDS)
    W, _ = _check_graph(W)
    s2 = _check_noise(noise_variance, W.shape[0], W.dtype)
    if kind == "iscm":
        _, _, s = iscm_implied_scm(W, s2)
        return s2 / s**2
    return s2 / jnp.diag(_scm_covariance(W, s2))


def standardize(X, ddof: int = 1) -> jnp.ndarray:
    """Z-score every column of ``X`` ``(n, d)``: subtract the mean, divide by the std (``ddof``)."""
    X = check_array(X, "X", ndim=2, kind="float")
    check_int(X.shape[0], "n (rows, X.shape[0])", minimum=2)
    return (X - X.mean(0)) / X.std(0, ddof=ddof)


def _nilpotent_inverse(W: jnp.ndarray, longest: int | None = None) -> jnp.ndarray:
    r"""(I - W)^{-1} for a DAG's W (nilpotent: W^k = 0 beyond the longest path) by repeated squaring:
    :math:`\sum_{k<2^m} W^k = (I + W)(I + W^2)(I + W^4)\cdots(I + W^{2^{m-1}})` with
    :math:`2^m` above the longest path length (``longest``, at most d - 1).

    2m matrix products instead of an LU solve: exact for a DAG, and cheap to compile and run
    batched."""
    d = W.shape[0]
    longest = d - 1 if longest is None else longest
    M, P = jnp.eye(d, dtype=W.dtype) + W, W
    for _ in range(max(int(np.ceil(np.log2(longest + 1))), 1) - 1):
        P = P @ P
        M = M + M @ P
    return M


def _sample_impl(key, W, s2, order, n: int, kind: str, longest: int | None = None):
    d = W.shape[0]
    N = jax.random.normal(key, (n, d), dtype=W.dtype) * jnp.sqrt(s2)[None, :]
    if kind != "iscm":
        # x^T = x^T W + eps^T  =>  X = N (I - W)^{-1}
        X = N @ _nilpotent_inverse(W, longest)
        if kind == "standardized":
            X = (X - X.mean(0)) / X.std(0, ddof=1)
        return X

    def step(t, X):
        j = order[t]
        xj = X @ W[:, j] + N[:, j]
        return X.at[:, j].set((xj - xj.mean()) / xj.std(ddof=1))

    return jax.lax.fori_loop(0, d, step, jnp.zeros_like(N))


_sample = jax.jit(_sample_impl, static_argnames=("n", "kind"))
_sample_many = jax.jit(jax.vmap(_sample_impl, in_axes=(0, 0, None, 0, None, None, None)),
                       static_argnames=("n", "kind", "longest"))


def _orders(E: np.ndarray) -> tuple[np.ndarray, int]:
    """Topological orders ``(B, d)`` of a batch of boolean graphs ``E (B, d, d)``, vectorised,
    and the length of the longest path in the batch.

    The depth of a node (the length of the longest path ending at it) satisfies
    depth_j = max over parents i of depth_i + 1; iterating this from 0 converges after at most
    d rounds on a DAG, and sorting by depth gives a topological order. A graph whose depths
    still change after d rounds has a cycle: :func:`topological_order` then names the nodes.
    """
    B, d, _ = E.shape
    depth = np.zeros((B, d), dtype=np.int64)
    for _ in range(d + 1):
        new = np.max(np.where(E, depth[:, :, None] + 1, 0), axis=1)
        changed = np.any(new != depth, axis=1)
        if not changed.any():
            return np.argsort(depth, axis=1, kind="stable"), int(depth.max())
        depth = new
    bad = np.flatnonzero(changed)
    topological_order(E[bad[0]])            # raises, naming the nodes on the cycle
    raise AssertionError("unreachable")  # pragma: no cover


def sample(key: jax.Array, W, n: int, kind: str = "scm", noise_variance=1.0) -> jnp.ndarray:
    """``n`` samples ``(n, d)`` of the SCM, the standardized SCM or the iSCM on ``W``.

    Gaussian noise of variance ``noise_variance``; the noise depends only on ``key``, ``n`` and
    ``d``, so the three kinds drawn with one key share it.

    Raises:
        ValueError: ``n < 2``, a cycle in ``W``, a bad ``kind``.
    """
    kind = check_choice(kind, "kind", KINDS)
    n = check_int(n, "n", minimum=2)
    W, order = _check_graph(W)
    s2 = _check_noise(noise_variance, W.shape[0], W.dtype)
    return _sample(key, W, s2, jnp.asarray(order), n, kind)


def sample_many(keys: jax.Array, Ws, n: int, kind: str = "scm", noise_variance=1.0) -> jnp.ndarray:
    """:func:`sample` for many graphs at once (vmapped): ``keys (B, 2)``, ``Ws (B, d, d)``
    -> ``(B, n, d)``; sample ``b`` equals ``sample(keys[b], Ws[b], n, kind)``.

    The checks run on all the graphs at once in NumPy (no Python loop over graphs but the one
    that names the nodes of a cycle) and the sampler is one jitted, vmapped call.
    """
    kind = check_choice(kind, "kind", KINDS)
    n = check_int(n, "n", minimum=2)
    Ws = _as_float(Ws, "Ws", 3)
    check_shape(Ws, "Ws", (None, Ws.shape[1], Ws.shape[1]))
    if not is_concrete(Ws):
        raise TypeError("Ws must be a concrete array (the topological orders are computed in NumPy)")
    Wn = np.asarray(check_finite(Ws, "Ws"))
    orders, longest = _orders(Wn != 0)
    s2 = _check_noise(noise_variance, Ws.shape[1], Ws.dtype)
    return _sample_many(keys, Ws, s2, jnp.asarray(orders), n, kind, longest)


def sample_in_order(key: jax.Array, W, order, n: int, kind: str = "scm", noise_variance=1.0) -> jnp.ndarray:
    """:func:`sample` for traced arguments (inside ``jit``/``vmap``): the topological ``order``
    ``(d,)`` of ``W`` is given, not computed, and neither is checked.

    ``sample_in_order(key, W, topological_order(W), n, kind)`` equals ``sample(key, W, n, kind)``.
    Use it where ``W`` is drawn inside a jitted function together with its order (e.g. the
    training batches of :mod:`xfmr.causal.amortised`); use :func:`sample` everywhere else.
    """
    kind = check_choice(kind, "kind", KINDS)
    n = check_int(n, "n", minimum=2)
    W = check_array(W, "W", ndim=2, kind="float")
    s2 = jnp.broadcast_to(jnp.asarray(noise_variance, W.dtype), (W.shape[0],))
    return _sample(key, W, s2, order, n, kind)


def implied_weights(R, A, kind: str = "iscm") -> jnp.ndarray:
    r"""The weights that a graph ``A`` needs to produce the correlation
    matrix ``R`` (unit noise).

    The inverse of :func:`population_covariance` for a given graph: for
    every node ``j`` in topological order with parents ``P``,

    - ``"iscm"``: the parents are standardized, so :math:`\tilde w =
      R_{PP}^{-1} R_{Pj}` and :math:`w = \tilde w / \sqrt{1 - \tilde
      w^\top R_{PP} \tilde w}`;
    - ``"standardized"``: the raw SCM has covariance :math:`D R D` with
      unknown scales; the root scales are 1, :math:`u = \Sigma_{PP}^{-1}
      D_P R_{Pj}`, :math:`d_j^2 = 1 / (1 - u^\top \Sigma_{PP} u)` and
      :math:`w = u\, d_j`.

    If ``R`` is the population correlation of that kind of model on
    ``A`` with unit noise, this returns its weights exactly; for another
    graph, the weights that graph would need.

    Args:
        R: ``(d, d)`` correlation matrix.
        A: ``(d, d)`` DAG (``A[i, j] != 0`` for ``i -> j``).
        kind: ``"iscm"`` or ``"standardized"``.

    Returns:
        ``(d, d)`` weights on the edges of ``A``.
    """
    kind = check_choice(kind, "kind", ("iscm", "standardized"))
    A, order = _check_graph(A)
    check_shape(check_array(R, "R", kind="float"), "R", A.shape)
    R = np.asarray(R, dtype=float)
    E = np.asarray(A) != 0
    d = R.shape[0]
    W = np.zeros((d, d))
    scale = np.ones(d)
    for j in order:
        P = np.flatnonzero(E[:, j])
        if P.size == 0:
            continue
        if kind == "iscm":
            wt = np.linalg.solve(R[np.ix_(P, P)], R[P, j])
            W[P, j] = wt / np.sqrt(1.0 - wt @ R[np.ix_(P, P)] @ wt)
        else:
            S = R[np.ix_(P, P)] * np.outer(scale[P], scale[P])
            u = np.linalg.solve(S, scale[P] * R[P, j])
            scale[j] = 1.0 / np.sqrt(1.0 - u @ S @ u)
            W[P, j] = u * scale[j]
    return jnp.asarray(W)
