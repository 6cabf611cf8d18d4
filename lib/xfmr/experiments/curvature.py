"""Hessian blocks of a loss ``l(theta) = L(f(theta))``: exact dense blocks and Hutchinson
estimates of block Frobenius norms, for the Hessian ``H``, the outer-product Hessian
``H_o = J^T (d^2 L) J`` (the generalised Gauss-Newton matrix) and the functional Hessian
``H_f = H - H_o = sum_k dL/df_k * d^2 f_k``.

A :class:`Problem` is a named triple ``(out_fn, loss_fn, theta)``: ``theta`` is a tuple of
arrays (the parameter blocks, e.g. ``(W_Q, W_K, W_V)``), ``out_fn(theta)`` the model output
(any shape), ``loss_fn(out)`` a scalar. Block ``(a, b)`` of a matrix ``M`` is the sub-matrix
with rows in block ``a`` and columns in block ``b``, in the row-major (C-order) flattening of
each block. The GPT problems of Part I are built by :mod:`xfmr.experiments.sweeps`.

Hutchinson: for a Rademacher probe ``v`` supported on block ``b``
(``E[v v^T] = I``), ``E ||(M v)_a||^2 = ||M_{ab}||_F^2``, so with ``S`` probes
``||M_{ab}||_F ~ sqrt(mean_s ||(M v_s)_a||^2)``. All three matrices are estimated from the
SAME probes, and ``H_f v`` is computed directly as the directional derivative of
``J(theta)^T g`` with ``g = dL/df`` held fixed (not as a difference of two estimates):

.. math::

    H_o v = J^\\top \\big(\\nabla^2 L\\, (J v)\\big),\\qquad
    H_f v = \\frac{d}{d\\epsilon}\\Big|_0 J(\\theta + \\epsilon v)^\\top g,\\qquad
    H v = H_o v + H_f v .

One probe costs one forward-tangent + reverse pass with its tangent, and one more reverse
pass; under ``vmap`` over probes the primal computations are shared.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from xfmr.core.nn import softmax_cross_entropy
from xfmr.core.validate import check_callable, check_instance, check_int

__all__ = [
    "Problem", "CurvatureMatrices", "CURVATURES", "get_path", "set_path", "cross_entropy_loss",
    "mean_squared_error_loss", "dense_matrices", "exact_block_norms", "products",
    "hutchinson_samples", "hutchinson_block_norms",
]

CURVATURES = ("H", "H_o", "H_f")
"""The three matrices, in the order of every result: Hessian, outer-product, functional."""


class Problem(NamedTuple):
    """A loss ``l(theta) = loss_fn(out_fn(theta))`` with its parameter blocks ``theta``.

    Attributes:
        out_fn: ``theta -> f(theta)``, the model output (any shape).
        loss_fn: ``f -> L(f)``, a scalar.
        theta: a non-empty tuple of arrays, the parameter blocks (the point of evaluation).
    """

    out_fn: Callable[[tuple], jax.Array]
    loss_fn: Callable[[jax.Array], jax.Array]
    theta: tuple


class CurvatureMatrices(NamedTuple):
    """Dense ``(P, P)`` matrices of a :class:`Problem` and the slice of each block."""

    H: jax.Array
    H_o: jax.Array
    H_f: jax.Array
    slices: list


# ----------------------------------------------------------------------------- pytree paths
def get_path(tree, path: Sequence):
    """``tree[path[0]][path[1]]...``, e.g. ``("blocks", 0, "attn", "W_Q")``."""
    for p in path:
        tree = tree[p]
    return tree


def set_path(tree, path: Sequence, value):
    """A copy of ``tree`` (dicts and lists copied along ``path`` only) with the leaf replaced."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(tree, dict):
        new = dict(tree)
    elif isinstance(tree, (list, tuple)):
        new = list(tree)
    else:
        raise TypeError(f"path must index dicts/lists, got {type(tree).__name__} at {head!r}")
    new[head] = set_path(tree[head], rest, value)
    return type(tree)(new) if isinstance(tree, tuple) else new


# ----------------------------------------------------------------------------- losses
def cross_entropy_loss(targets: jax.Array) -> Callable[[jax.Array], jax.Array]:
    """The loss function ``L(z) = -mean_{b,t} log softmax(z_{b,t})[y_{b,t}]`` of logits ``z``
    ``(..., V)`` against integer ``targets`` ``y`` ``(...)``."""
    targets = jnp.asarray(targets)

    def loss(logits):
        return jnp.mean(softmax_cross_entropy(logits, targets))

    return loss


def mean_squared_error_loss(targets: jax.Array) -> Callable[[jax.Array], jax.Array]:
    """The loss function ``L(F) = ||F - Y||_F^2 / numel(F)`` (so ``d^2 L = 2 I / numel``)."""
    targets = jnp.asarray(targets)

    def loss(out):
        return jnp.mean(jnp.square(out - targets))

    return loss


def _check_problem(problem: Any) -> Problem:
    check_instance(problem, "problem", Problem)
    check_callable(problem.out_fn, "problem.out_fn")
    check_callable(problem.loss_fn, "problem.loss_fn")
    check_instance(problem.theta, "problem.theta", tuple)
    if len(problem.theta) == 0:
        raise ValueError("problem.theta must be a non-empty tuple of arrays, got ()")
    return problem


# ----------------------------------------------------------------------------- dense
def dense_matrices(problem: Problem) -> CurvatureMatrices:
    """Exact dense ``H``, ``H_o`` and ``H_f = H - H_o`` (``P x P``, ``P`` = total size of
    ``theta``) and the slices of each block in the flat order. Only for small ``P``.
    """
    out_fn, loss_fn, theta = _check_problem(problem)
    w, unravel = ravel_pytree(theta)
    f = lambda w_: out_fn(unravel(w_))  # noqa: E731

    @jax.jit
    def mats(w_):
        H = jax.hessian(lambda u: loss_fn(f(u)))(w_)
        out = f(w_)
        J = jax.jacfwd(f)(w_).reshape(out.size, w_.size)
        Lam = jax.hessian(loss_fn)(out).reshape(out.size, out.size)
        return H, J.T @ Lam @ J

    H, H_o = mats(w)
    sizes = np.cumsum([0] + [int(np.prod(t.shape)) for t in theta])
    slices = [slice(int(a), int(b)) for a, b in zip(sizes[:-1], sizes[1:])]
    return CurvatureMatrices(H, H_o, H - H_o, slices)


def exact_block_norms(problem: Problem) -> dict[str, np.ndarray]:
    """Exact Frobenius norms of every block: ``{"H"|"H_o"|"H_f": array (n_blocks, n_blocks)}``."""
    mats = dense_matrices(problem)
    sl = mats.slices
    return {k: np.array([[float(jnp.linalg.norm(getattr(mats, k)[a, b])) for b in sl] for a in sl])
            for k in CURVATURES}


# ----------------------------------------------------------------------------- products
def products(problem: Problem, b: int, v_b: jax.Array):
    """``(H_o v, H_f v)`` for a direction ``v`` supported on block ``b``
    (``v_b`` its entries).

    Returns two tuples shaped like ``theta`` (all rows of column block
    ``b``).
    """
    out_fn, loss_fn, theta = problem
    out, vjp_fn = jax.vjp(out_fn, theta)
    g = jax.grad(loss_fn)(out)

    def phi(t_b):
        th = theta[:b] + (t_b,) + theta[b + 1 :]
        o, vj = jax.vjp(out_fn, th)
        return o, vj(g)[0]

    _, (Jv, H_f_v) = jax.jvp(phi, (theta[b],), (v_b,))
    Lam_Jv = jax.jvp(jax.grad(loss_fn), (out,), (Jv,))[1]
    H_o_v = vjp_fn(Lam_Jv)[0]
    return H_o_v, H_f_v


def hutchinson_samples(problem: Problem, key: jax.Array, n_probes: int,
                       probe_blocks: Sequence[int] | None = None, *,
                       key_ids: Sequence[int] | None = None) -> dict[str, jax.Array]:
    """Per-probe squared norms ``||(M v_s)_a||^2`` for ``M`` in ``H, H_o, H_f``.

    Returns ``{kind: array (n_blocks, len(probe_blocks), n_probes)}`` where entry
    ``[a, j, s]`` uses probe ``s`` on block ``probe_blocks[j]``. Traceable (jit it).
    The probes of block ``b`` are drawn from ``fold_in(key, key_ids[b])`` (by default
    ``key_ids[b] = b``), so that a problem made of some of the blocks of a larger one can
    reuse the larger problem's probes.
    """
    _check_problem(problem)
    theta = problem.theta
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    nb = len(theta)
    probe_blocks = tuple(range(nb)) if probe_blocks is None else tuple(probe_blocks)
    if any(not 0 <= b < nb for b in probe_blocks):
        raise ValueError(f"probe_blocks must be indices in [0, {nb}), got {probe_blocks}")
    key_ids = tuple(range(nb)) if key_ids is None else tuple(key_ids)
    if len(key_ids) != nb:
        raise ValueError(f"key_ids must have one entry per block ({nb}), got {len(key_ids)}")
    res = {k: [] for k in CURVATURES}

    def sq(tup):
        return jnp.stack([jnp.sum(jnp.square(t.reshape(n_probes, -1)), 1) for t in tup])

    for b in probe_blocks:
        kb = jax.random.fold_in(key, key_ids[b])
        V = jax.random.rademacher(kb, (n_probes,) + theta[b].shape, dtype=theta[b].dtype)
        H_o_v, H_f_v = jax.vmap(lambda v: products(problem, b, v))(V)
        Hv = tuple(g + h for g, h in zip(H_o_v, H_f_v))
        res["H"].append(sq(Hv))
        res["H_o"].append(sq(H_o_v))
        res["H_f"].append(sq(H_f_v))
    return {k: jnp.stack(v, axis=1) for k, v in res.items()}


def hutchinson_block_norms(samples: dict[str, jax.Array]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Frobenius-norm estimates from :func:`hutchinson_samples`: ``{kind: (norm, stderr)}``.

    ``norm = sqrt(mean_s q_s)``; ``stderr`` by the delta method,
    ``std_s(q) / sqrt(S) / (2 norm)``. Arrays ``(n_blocks, n_probe_blocks)``.
    """
    out = {}
    for k, q in samples.items():
        q = np.asarray(q)
        if q.ndim != 3:
            raise ValueError(f"samples[{k!r}] must be 3-D (blocks, probe_blocks, probes), "
                             f"got shape {q.shape}")
        S = q.shape[-1]
        m = q.mean(-1)
        norm = np.sqrt(m)
        se = q.std(-1, ddof=1) / np.sqrt(S) / (2 * np.maximum(norm, np.finfo(float).tiny)) \
            if S > 1 else np.full_like(m, np.nan)
        out[k] = (norm, se)
    return out
