"""Per-block curvature and per-block step sizes for any model given as ``loss(params)``.

A *block* is one leaf of the parameter pytree, addressed by its path (e.g.
``("blocks", 0, "attn", "W_Q")``). Its diagonal Hessian block
``H_bb = d^2 loss / d theta_b d theta_b^T`` (``P_b x P_b``, row-major flattening of the leaf)
acts on a vector ``v`` by one forward-over-reverse product with the other blocks held fixed,

.. math::

    H_{bb} v = \\frac{d}{d\\epsilon}\\Big|_0 \\nabla_{\\theta_b}\\,
    \\ell(\\theta_b + \\epsilon v;\\ \\theta_{-b}),

which is what :mod:`xfmr.lanczos` needs for block spectra (:func:`block_spectra`) and
block top eigenvalues (:func:`block_top_eigenvalues`).

Per-block step sizes: :func:`scale_by_block` multiplies each leaf of an optax update by
its own constant, so ``optax.chain(optax.sgd(lr, momentum), scale_by_block(c))`` is SGD (with
momentum) whose step on block ``b`` is ``lr * c_b`` -- fixed, not adaptive.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xfmr.curvature import get_path, set_path
from xfmr.lanczos import SLQResult, lanczos, ritz
from xfmr.validate import check_int

__all__ = ["leaf_paths", "block_hvp", "block_spectra", "block_top_eigenvalues",
           "scale_by_block"]


def leaf_paths(params: Any) -> list[tuple]:
    """Paths of every array leaf of ``params`` (dict keys and list indices), in pytree order."""
    out = []
    for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]:
        keys = []
        for k in path:
            if isinstance(k, jax.tree_util.DictKey):
                keys.append(k.key)
            elif isinstance(k, jax.tree_util.SequenceKey):
                keys.append(k.idx)
            else:
                raise TypeError(f"params must be nested dicts/lists, got key {k!r}")
        out.append(tuple(keys))
    return out


def block_hvp(loss: Callable[[Any, Any], jax.Array], params: Any, path: Sequence,
              batch: Any = None) -> tuple[Callable[[jax.Array], jax.Array], int]:
    """``(matvec, P_b)``: ``matvec(v (P_b,)) = H_bb v`` for the block at ``path``.

    ``loss(params, batch)`` is a scalar function of the whole pytree and the data.
    """
    if not callable(loss):
        raise TypeError(f"loss must be callable loss(params, batch), got {type(loss).__name__}")
    theta_b = get_path(params, path)
    shape = theta_b.shape

    def f(t):
        return loss(set_path(params, path, t), batch)

    grad_f = jax.grad(f)

    def matvec(v):
        return jax.jvp(grad_f, (theta_b,), (v.reshape(shape),))[1].reshape(-1)

    return matvec, int(np.prod(shape))


@functools.lru_cache(maxsize=256)
def _runner(loss, path: tuple, n_steps: int):
    """One jitted Lanczos run on the block at ``path``, compiled once per (loss, path, m)
    and reused for every ``params``/``batch``/start vector of the same shapes."""
    def run(params, batch, q):
        mv, _ = block_hvp(loss, params, path, batch)
        alpha, beta = lanczos(mv, q, n_steps)
        theta, w = ritz(alpha, beta)
        m = alpha.shape[0]
        off = beta[: m - 1]
        S = jnp.linalg.eigh(jnp.diag(alpha) + jnp.diag(off, 1) + jnp.diag(off, -1))[1]
        return theta, w, jnp.abs(beta[-1] * S[-1, -1])

    return jax.jit(run)


def block_spectra(loss: Callable[[Any, Any], jax.Array], params: Any,
                  paths: Sequence[Sequence], key: jax.Array, n_probes: int, n_steps: int,
                  batch: Any = None) -> list[SLQResult]:
    """SLQ (:func:`xfmr.lanczos.slq`) of each diagonal block ``H_bb``: Rademacher probe
    ``s`` of block ``i`` from ``fold_in(fold_in(key, i), s)``.

    ``n_steps`` is capped at the block's size (a block smaller than ``n_steps`` is then
    resolved exactly). The Lanczos run of a block is compiled once per ``(loss, path,
    n_steps)`` and reused across calls (e.g. across seeds or checkpoints).
    """
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    out = []
    for i, p in enumerate(paths):
        leaf = get_path(params, p)
        dim = int(np.prod(leaf.shape))
        run = _runner(loss, tuple(p), min(n_steps, dim))
        nodes, weights = [], []
        for s in range(n_probes):
            k = jax.random.fold_in(jax.random.fold_in(key, i), s)
            th, w, _ = run(params, batch, jax.random.rademacher(k, (dim,), dtype=leaf.dtype))
            nodes.append(np.asarray(th))
            weights.append(np.asarray(w))
        out.append(SLQResult(np.stack(nodes), np.stack(weights), dim))
    return out


def block_top_eigenvalues(loss: Callable[[Any, Any], jax.Array], params: Any,
                          paths: Sequence[Sequence], key: jax.Array, n_steps: int,
                          batch: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Largest eigenvalue of each ``H_bb`` (one Lanczos run each, Rademacher start from
    ``fold_in(key, i)``): ``(lambda_max (n,), residual bound (n,))``, as in
    :func:`xfmr.lanczos.top_eigenvalue` (a lower bound; some eigenvalue lies within the
    residual bound of it)."""
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    lam, res = [], []
    for i, p in enumerate(paths):
        leaf = get_path(params, p)
        dim = int(np.prod(leaf.shape))
        run = _runner(loss, tuple(p), min(n_steps, dim))
        v = jax.random.rademacher(jax.random.fold_in(key, i), (dim,), dtype=leaf.dtype)
        th, _, r = run(params, batch, v)
        lam.append(float(th[-1]))
        res.append(float(r))
    return np.array(lam), np.array(res)


def scale_by_block(scales: Any) -> optax.GradientTransformation:
    """Multiply the update of every leaf by a constant: ``u_b <- c_b u_b``.

    ``scales`` is a pytree of scalars with the structure of the parameters.
    """
    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        new = jax.tree_util.tree_map(lambda u, c: u * jnp.asarray(c, u.dtype), updates, scales)
        return new, state

    return optax.GradientTransformation(init_fn, update_fn)
