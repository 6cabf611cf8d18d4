r"""Sortability: how well a per-variable score reads off the causal order, and sort-and-regress.

Order alignment (Reisach et al. 2021, as ``CausalDisco`` implements it): for every
:math:`k = 1, \dots, d-1` and every pair :math:`(i, j)` joined by a directed path of length
exactly :math:`k` (the boolean matrix power :math:`E^k`), count 1 if :math:`s_i < s_j`,
:math:`1/2` if :math:`|s_i - s_j| \le \mathrm{tol}`, 0 otherwise, and divide by the number of
such (pair, length) terms:

.. math::
    \mathrm{sortability}(s) = \frac{\sum_k \sum_{ij} [E^k]_{ij}\,
        \tfrac12\big(\mathbb 1[s_j - s_i \ge -\mathrm{tol}] + \mathbb 1[s_j - s_i > \mathrm{tol}]\big)}
        {\sum_k \sum_{ij} [E^k]_{ij}}.

0.5 means the score carries no information about the order, 1 that the order can be read
off it, 0 that it reads the order backwards. Scores:

- Var: :math:`s_j = \mathrm{Var}(x_j)` (``ddof=0``);
- :math:`R^2`: :math:`s_j = 1 - 1/[\mathrm{corr}(X)^{-1}]_{jj}`, the :math:`R^2` of :math:`x_j`
  regressed on all other variables;
- CEV (cause-explained variance): the :math:`R^2` of :math:`x_j` on its true parents (0 for a root).

The powers stop once :math:`E^k = 0` (every later term is 0), which keeps large sparse graphs cheap.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import check_array, check_choice, check_int, check_real, check_shape, is_concrete

__all__ = [
    "order_alignment",
    "var_scores",
    "r2_scores",
    "cev_scores",
    "var_sortability",
    "r2_sortability",
    "cev_sortability",
    "sortability_batch",
    "sort_and_regress",
]

SCORES = ("var", "r2", "cev")
CEV_CHUNK = 8   # graphs per vmapped chunk in sortability_batch(score="cev")


@jax.jit
def _path_counts(W: jnp.ndarray) -> jnp.ndarray:
    """N[i, j] = number of lengths k in 1..d-1 with a directed path i -> j of length exactly k."""
    E = (W != 0).astype(jnp.float32)
    d = E.shape[0]

    def cond(c):
        k, Ek, _ = c
        return (k < d) & jnp.any(Ek > 0)

    def body(c):
        k, Ek, N = c
        return k + 1, ((Ek @ E) > 0).astype(jnp.float32), N + Ek

    _, _, N = jax.lax.while_loop(cond, body, (1, E, jnp.zeros_like(E)))
    return N


@jax.jit
def _alignment(W, scores, tol):
    N = _path_counts(W)
    diff = scores[None, :] - scores[:, None]  # s_j - s_i
    hit = 0.5 * (diff >= -tol).astype(scores.dtype) + 0.5 * (
        diff > tol
    ).astype(scores.dtype)
    N = N.astype(hit.dtype)
    return jnp.sum(N * hit) / jnp.sum(N)


def _check_xw(X, W):
    X = check_array(X, "X", ndim=2, kind="float")
    W = check_shape(check_array(W, "W", ndim=2, kind="number"), "W", (X.shape[1], X.shape[1]))
    check_int(X.shape[0], "n (samples, X.shape[0])", minimum=2)
    if is_concrete(W) and not bool(jnp.any(W != 0)):
        raise ValueError("W has no edge: sortability is undefined (0 / 0)")
    return X, W


def order_alignment(W, scores, tol: float = 0.0) -> float:
    """Order alignment of ``scores`` ``(d,)`` with the graph ``W`` ``(d, d)`` (module docstring)."""
    W = check_array(W, "W", ndim=2, kind="number")
    scores = check_array(scores, "scores", ndim=1, kind="number")
    tol = check_real(tol, "tol", minimum=0.0)
    if is_concrete(W) and not bool(jnp.any(W != 0)):
        raise ValueError("W has no edge: order alignment is undefined (0 / 0)")
    return float(_alignment(W, scores, tol))


def var_scores(X) -> jnp.ndarray:
    """Variance of every column of ``X`` ``(n, d)`` (``ddof=0``)."""
    return jnp.var(check_array(X, "X", ndim=2, kind="float"), axis=0)


def _corr(X):
    Xc = X - X.mean(0)
    S = Xc.T @ Xc
    sd = jnp.sqrt(jnp.diag(S))
    return S / sd[:, None] / sd[None, :]


def _check_corr(C):
    """Raise ValueError naming the variables if the correlation matrix is singular."""
    C = np.asarray(C, dtype=float)
    bad = np.flatnonzero(~np.isfinite(np.diag(C)))
    if bad.size:
        raise ValueError(f"X has constant columns (variables {bad.tolist()}): the correlation matrix is undefined")
    evals, evecs = np.linalg.eigh(C)
    null = evals < 1e-10 * C.shape[0]
    if np.any(null):
        involved = np.flatnonzero(np.any(np.abs(evecs[:, null]) > 1e-6, axis=1))
        raise ValueError(f"the correlation matrix of X is singular: variables {involved.tolist()} are linearly "
                         f"dependent (smallest eigenvalue {evals[0]:.2e})")


def r2_scores(X) -> jnp.ndarray:
    """R^2 of every variable on all the others, ``1 - 1/diag(corr(X)^-1)``, ``(d,)``.

    Raises:
        ValueError: if the correlation matrix is singular (the message names the variables).
    """
    X = check_array(X, "X", ndim=2, kind="float")
    C = _corr(X)
    if is_concrete(C):
        _check_corr(C)
    return 1.0 - 1.0 / jnp.diag(jnp.linalg.inv(C))


def _cev_from_corr(C, W):
    """R^2 of each variable on its true parents, from the correlation matrix."""
    P = (W != 0).astype(C.dtype)

    def one(j):
        m = P[:, j]
        Cm = C * m[:, None] * m[None, :] + jnp.diag(1.0 - m)
        b = m * C[:, j]
        return b @ jnp.linalg.solve(Cm, b)

    return jax.vmap(one)(jnp.arange(C.shape[0]))


def cev_scores(X, W) -> jnp.ndarray:
    """Cause-explained variance: R^2 of each column of ``X`` on its parents in ``W`` (0 for roots)."""
    X, W = _check_xw(X, W)
    C = _corr(X)
    if is_concrete(C):
        _check_corr(C)
    return _cev_from_corr(C, W)


def var_sortability(X, W, tol: float = 0.0) -> float:
    """Var-sortability of data ``X`` ``(n, d)`` on the true graph ``W`` ``(d, d)``, in [0, 1]."""
    X, W = _check_xw(X, W)
    return order_alignment(W, var_scores(X), tol)


def r2_sortability(X, W, tol: float = 0.0) -> float:
    """R^2-sortability of data ``X`` ``(n, d)`` on the true graph ``W`` ``(d, d)``, in [0, 1]."""
    X, W = _check_xw(X, W)
    return order_alignment(W, r2_scores(X), tol)


def cev_sortability(X, W, tol: float = 0.0) -> float:
    """CEV-sortability (CausalDisco's ``snr_sortability``) of ``X`` on ``W``, in [0, 1]."""
    X, W = _check_xw(X, W)
    return order_alignment(W, cev_scores(X, W), tol)


@partial(jax.jit, static_argnames=("score",))
def _batch(Xs, Ws, tol, score):
    def one(X, W):
        if score == "var":
            s = jnp.var(X, axis=0)
        else:
            C = _corr(X)
            s = 1.0 - 1.0 / jnp.diag(jnp.linalg.inv(C)) if score == "r2" else _cev_from_corr(C, W)
        return _alignment(W, s, tol)

    if score != "cev":
        return jax.vmap(one)(Xs, Ws)
    # CEV solves one masked (d, d) system per node: (d, d, d) per graph. Vmapping over the
    # whole batch would hold (B, d, d, d) at once (8.5 GB at B = 100, d = 220), so the graphs
    # go through in chunks of CEV_CHUNK, each chunk vmapped.
    return jax.lax.map(lambda xw: one(*xw), (Xs, Ws), batch_size=CEV_CHUNK)


def sortability_batch(Xs, Ws, score: str = "r2", tol: float = 0.0) -> jnp.ndarray:
    """Sortability of a batch, vmapped: ``Xs (B, n, d)``, ``Ws (B, d, d)`` -> ``(B,)``.

    ``score`` is ``"var"``, ``"r2"`` or ``"cev"``. Unlike the single-graph functions this does not
    check the correlation matrices for singularity (a singular one gives nan or inf scores).
    """
    score = check_choice(score, "score", SCORES)
    Xs = check_array(Xs, "Xs", ndim=3, kind="float")
    Ws = check_array(Ws, "Ws", ndim=3, kind="number")
    tol = check_real(tol, "tol", minimum=0.0)
    check_shape(Ws, "Ws", (Xs.shape[0], Xs.shape[2], Xs.shape[2]))
    return _batch(Xs, Ws, tol, score)


def sort_and_regress(X, scores, threshold: float = 0.1) -> jnp.ndarray:
    r"""Sort the variables by ``scores`` (ascending), regress each on all its predecessors by least
    squares, keep the coefficients with ``|w| > threshold``.

    All the regressions come from one Cholesky factorisation :math:`S = L L^\top` of the
    covariance in the sorted order: row :math:`k` of :math:`L^{-1}`, divided by its diagonal
    entry, is :math:`(-\beta_k^\top, 1, 0, \dots)` with :math:`\beta_k` the least-squares
    coefficients of variable :math:`k` on its predecessors.
    (CausalDisco's ``sort_regress`` prunes with an adaptive Lasso and BIC instead of a threshold.)

    Args:
        X: ``(n, d)`` data.
        scores: ``(d,)`` sort key (e.g. :func:`var_scores`, :func:`r2_scores`).
        threshold: absolute weight below which an edge is dropped.

    Returns:
        ``(d, d)`` estimated weights, ``[i, j]`` for ``i -> j``.
    """
    X = check_array(X, "X", ndim=2, kind="float")
    scores = check_array(scores, "scores", ndim=1, kind="number")
    threshold = check_real(threshold, "threshold", minimum=0.0)
    d = X.shape[1]
    order = jnp.argsort(scores)
    Xo = X[:, order] - X[:, order].mean(0)
    S = Xo.T @ Xo / X.shape[0]
    # Unit lower-triangular T with T S T^T diagonal: row k of T is (-beta_k, 1, 0...), the
    # residual of variable k after its predecessors; T = D^{1/2} L^{-1} with S = L L^T.
    L = jnp.linalg.cholesky(S)
    Linv = jax.scipy.linalg.solve_triangular(L, jnp.eye(d, dtype=S.dtype), lower=True)
    T = Linv / jnp.diag(Linv)[:, None]
    B = -jnp.tril(T, -1)                     # B[k, i] = coefficient of predecessor i for k
    B = jnp.where(jnp.abs(B) > threshold, B, 0.0)
    Wo = B.T                                 # Wo[i, k]: edge i -> k in sorted labels
    inv = jnp.argsort(order)
    return Wo[inv][:, inv]
