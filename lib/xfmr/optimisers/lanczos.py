"""Lanczos iteration and stochastic Lanczos quadrature (SLQ) for symmetric operators given
only by matrix-vector products (e.g. Hessian-vector products).

Lanczos with ``m`` steps from a unit vector ``q_1`` builds an orthonormal basis
``Q = [q_1 ... q_m]`` of the Krylov space ``K_m(A, q_1)`` and the tridiagonal
``T = Q^T A Q`` (diagonal ``alpha``, off-diagonal ``beta``):

.. math::

    A q_j = \\beta_{j-1} q_{j-1} + \\alpha_j q_j + \\beta_j q_{j+1}.

Here every new vector is re-orthogonalised against all previous ones ("full
reorthogonalisation": once, and a second time where the first projection removed much of it),
so that in floating point the Ritz values do not repeat.

Quadrature. With ``T = S diag(theta) S^T``, nodes ``theta_k`` and weights
``w_k = S_{1k}^2`` (summing to one) form the Gauss quadrature of the spectral measure of
``A`` seen from ``q_1``, ``mu_q = sum_i (u_i^T q_1)^2 delta_{lambda_i}``: it is exact for
polynomials of degree ``<= 2m - 1``,

.. math::

    \\sum_k w_k \\theta_k^p = q_1^\\top A^p q_1, \\qquad p \\le 2m - 1 .

SLQ (Ghorbani, Krishnan and Xiao 2019; Ubaru, Chen and Saad 2017) averages these measures
over random probes ``v`` with ``E[v v^T] = I`` (Rademacher here), normalised ``q_1 = v/|v|``:
since ``|v|^2 = P`` for a Rademacher ``v`` in dimension ``P``,
``E[q_1^T A^p q_1] = tr(A^p) / P``, the ``p``-th moment of the empirical eigenvalue
distribution ``phi = (1/P) sum_i delta_{lambda_i}``. The density shown is that average
smoothed by a Gaussian of width ``s``, whose ``p``-th moments are those of ``phi``
convolved with ``N(0, s^2)`` (the mean unchanged, the second moment plus ``s^2``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import check_array, check_int, check_real

__all__ = ["lanczos", "lanczos_probes", "ritz", "SLQResult", "slq", "slq_moments", "slq_density",
           "top_eigenvalue"]


def lanczos(
    matvec: Callable[[jax.Array], jax.Array],
    q0: jax.Array,
    n_steps: int,
):
    """``n_steps`` Lanczos steps with full reorthogonalisation from
    ``q0`` (any nonzero vector): :func:`lanczos_probes` with one start.

    Args:
        matvec: ``v (P,) -> A v (P,)`` for a symmetric ``A``; traced
        under ``jit``.
        q0: start vector ``(P,)`` (normalised here).
        n_steps: ``m``, with ``1 <= m <= P``.

    Returns:
        ``(alpha (m,), beta (m,))``: the diagonal and the off-diagonal
        of ``T`` (``beta[:m-1]``; ``beta[m-1]`` is the norm of the
        residual after the last step, used in error bounds). After an
        exact breakdown (``beta_j = 0``: ``q_0`` lies in an invariant
        subspace) the remaining ``alpha, beta`` are zero, which adds
        nodes of weight zero.
    """
    q0 = check_array(q0, "q0", ndim=1)
    alpha, beta = lanczos_probes(matvec, q0[None], n_steps)
    return alpha[0], beta[0]


# DGKS: a second projection when the first one shrank w below this fraction of its norm.
REORTH_RATIO = 1 / np.sqrt(2)


def lanczos_probes(
    matvec: Callable[[jax.Array], jax.Array],
    starts: jax.Array,
    n_steps: int,
):
    """:func:`lanczos` from ``B`` starts at once, on the same operator.

    Each new vector ``w`` (``B`` of them) is projected off the basis
    built so far, ``w <- w - Q^T (Q w)``; a second projection follows
    only when the first shrank some ``|w|`` below ``|w| / sqrt(2)``
    (the criterion of Daniel, Gragg, Kaufman and Stewart 1976: where it
    does not, one projection has already made ``w`` orthogonal to the
    basis to working precision). The projections read the whole basis,
    ``B x m x P`` numbers, and are what a step costs beside ``matvec``
    when ``P`` is large; the test is one for all ``B`` starts, so that
    it stays a branch (and the skipped projection is not computed)
    rather than becoming a select under ``vmap``.

    Args:
        matvec: ``v (P,) -> A v (P,)`` (one vector; mapped over the
        starts with ``vmap``).
        starts: ``(B, P)``, each row nonzero (normalised here).
        n_steps: ``m``, with ``1 <= m <= P``.

    Returns:
        ``(alpha (B, m), beta (B, m))``, row ``s`` that of
        :func:`lanczos` from ``starts[s]`` to rounding (a start may get
        the second projection because another start needed it).
    """
    starts = check_array(starts, "starts", ndim=2)
    B, P = starts.shape
    m = check_int(n_steps, "n_steps", minimum=1, maximum=P)
    dtype = starts.dtype
    q = starts / jnp.linalg.norm(starts, axis=1, keepdims=True)
    Q = jnp.zeros((B, m, P), dtype)
    # relative breakdown threshold
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype) * 10
    apply = jax.vmap(matvec)

    def project(Q, w):
        return w - jnp.einsum("bmp,bm->bp", Q, jnp.einsum("bmp,bp->bm", Q, w))

    def body(j, state):
        Q, q, q_prev, beta_prev, alpha, beta, scale = state
        Q = Q.at[:, j].set(q)
        w = apply(q)
        a = jnp.sum(q * w, axis=1)
        w = w - a[:, None] * q - beta_prev[:, None] * q_prev
        before = jnp.linalg.norm(w, axis=1)
        w = project(Q, w)
        shrank = jnp.any(jnp.linalg.norm(w, axis=1) < REORTH_RATIO * before)
        w = jax.lax.cond(shrank, project, lambda Q, w: w, Q, w)
        b = jnp.linalg.norm(w, axis=1)
        scale = jnp.maximum(scale, jnp.abs(a) + b)
        ok = b > eps * scale
        q_next = jnp.where(
            ok[:, None], w / jnp.where(ok, b, 1)[:, None], 0
        )
        b = jnp.where(ok, b, 0)
        return (
            Q,
            q_next,
            q,
            b,
            alpha.at[:, j].set(a),
            beta.at[:, j].set(b),
            scale,
        )

    init = (
        Q,
        q,
        jnp.zeros_like(q),
        jnp.zeros((B,), dtype),
        jnp.zeros((B, m), dtype),
        jnp.zeros((B, m), dtype),
        jnp.zeros((B,), dtype),
    )
    out = jax.lax.fori_loop(0, m, body, init)
    return out[4], out[5]


def ritz(alpha: jax.Array, beta: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Nodes and Gauss weights of the tridiagonal ``T(alpha, beta[:m-1])``.

    Returns ``(theta (m,), w (m,))``: eigenvalues of ``T`` in ascending order and the squared
    first components of its eigenvectors (``sum w = 1``).
    """
    alpha, beta = jnp.asarray(alpha), jnp.asarray(beta)
    m = alpha.shape[0]
    off = beta[: m - 1]
    T = jnp.diag(alpha) + jnp.diag(off, 1) + jnp.diag(off, -1)
    theta, S = jnp.linalg.eigh(T)
    return theta, jnp.square(S[0])


class SLQResult(NamedTuple):
    """Output of :func:`slq`: ``nodes``, ``weights`` ``(n_probes, m)``; ``dim`` = ``P``.

    Probe ``s`` contributes the measure ``sum_k weights[s, k] delta(nodes[s, k])``; the SLQ
    estimate of the eigenvalue distribution is their average.
    """

    nodes: np.ndarray
    weights: np.ndarray
    dim: int


def slq(matvec: Callable[[jax.Array], jax.Array], dim: int, key: jax.Array, n_probes: int,
        n_steps: int, dtype=jnp.float64) -> SLQResult:
    """Stochastic Lanczos quadrature: ``n_probes`` Rademacher probes, ``n_steps`` steps each.

    The probes are drawn from ``fold_in(key, s)``, ``s = 0..n_probes-1``; one jitted Lanczos
    run per probe (compiled once).
    """
    dim = check_int(dim, "dim", minimum=1)
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1, maximum=dim)
    run = jax.jit(lambda q: ritz(*lanczos(matvec, q, n_steps)))
    nodes, weights = [], []
    for s in range(n_probes):
        v = jax.random.rademacher(jax.random.fold_in(key, s), (dim,), dtype=dtype)
        th, w = run(v)
        nodes.append(np.asarray(th))
        weights.append(np.asarray(w))
    return SLQResult(np.stack(nodes), np.stack(weights), dim)


def slq_moments(result: SLQResult, p: int) -> tuple[float, float]:
    """Estimate of ``tr(A^p) / P`` and its standard error over probes.

    Each probe gives ``sum_k w_k theta_k^p = q^T A^p q`` exactly when ``p <= 2m - 1``.
    """
    p = check_int(p, "p", minimum=0)
    per_probe = np.sum(result.weights * result.nodes.astype(float) ** p, axis=1)
    n = per_probe.shape[0]
    se = float(per_probe.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return float(per_probe.mean()), se


def slq_density(result: SLQResult, grid: np.ndarray, width: float) -> np.ndarray:
    """The SLQ eigenvalue density on ``grid`` smoothed by a Gaussian of standard deviation
    ``width``: ``phi(t) = mean_s sum_k w_{s,k} N(t; theta_{s,k}, width^2)`` (integrates to one).
    """
    width = check_real(width, "width", minimum=0.0, strict_minimum=True)
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1:
        raise ValueError(f"grid must be 1-D, got shape {grid.shape}")
    z = (grid[None, None, :] - result.nodes[..., None]) / width
    g = np.exp(-0.5 * z ** 2) / (width * np.sqrt(2 * np.pi))
    return np.einsum("sk,skt->t", result.weights, g) / result.nodes.shape[0]


def top_eigenvalue(matvec: Callable[[jax.Array], jax.Array], dim: int, key: jax.Array,
                   n_steps: int, dtype=jnp.float64) -> tuple[float, float]:
    """Largest eigenvalue of ``A`` by one Lanczos run from a Rademacher start.

    Returns ``(theta_max, bound)``: the largest Ritz value, a lower bound of ``lambda_max``,
    and the residual norm ``|A y - theta y| = beta_m |S_{m, max}|`` of its Ritz vector ``y``;
    some eigenvalue of ``A`` lies within ``bound`` of ``theta_max``.
    """
    dim = check_int(dim, "dim", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1, maximum=dim)

    @jax.jit
    def run(v):
        alpha, beta = lanczos(matvec, v, n_steps)
        m = alpha.shape[0]
        off = beta[: m - 1]
        T = jnp.diag(alpha) + jnp.diag(off, 1) + jnp.diag(off, -1)
        theta, S = jnp.linalg.eigh(T)
        return theta[-1], jnp.abs(beta[-1] * S[-1, -1])

    v = jax.random.rademacher(key, (dim,), dtype=dtype)
    th, bound = run(v)
    return float(th), float(bound)
