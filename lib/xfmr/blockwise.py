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

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xfmr.curvature import get_path, set_path
from xfmr.lanczos import SLQResult, slq, top_eigenvalue
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


def block_hvp(loss: Callable[[Any], jax.Array], params: Any, path: Sequence
              ) -> tuple[Callable[[jax.Array], jax.Array], int]:
    """``(matvec, P_b)``: ``matvec(v (P_b,)) = H_bb v`` for the block at ``path``.

    ``loss(params)`` is a scalar function of the whole pytree (data closed over).
    """
    if not callable(loss):
        raise TypeError(f"loss must be callable loss(params), got {type(loss).__name__}")
    theta_b = get_path(params, path)
    shape = theta_b.shape

    def f(t):
        return loss(set_path(params, path, t))

    grad_f = jax.grad(f)

    def matvec(v):
        return jax.jvp(grad_f, (theta_b,), (v.reshape(shape),))[1].reshape(-1)

    return matvec, int(np.prod(shape))


def block_spectra(loss: Callable[[Any], jax.Array], params: Any, paths: Sequence[Sequence],
                  key: jax.Array, n_probes: int, n_steps: int) -> list[SLQResult]:
    """SLQ of each diagonal block ``H_bb`` (probes of block ``i`` from ``fold_in(key, i)``).

    ``n_steps`` is capped at the block's size (a block smaller than ``n_steps`` is then
    resolved exactly).
    """
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    out = []
    for i, p in enumerate(paths):
        mv, dim = block_hvp(loss, params, p)
        dtype = get_path(params, p).dtype
        out.append(slq(mv, dim, jax.random.fold_in(key, i), n_probes, min(n_steps, dim), dtype))
    return out


def block_top_eigenvalues(loss: Callable[[Any], jax.Array], params: Any,
                          paths: Sequence[Sequence], key: jax.Array, n_steps: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Largest eigenvalue of each ``H_bb`` (one Lanczos run each, start from
    ``fold_in(key, i)``): ``(lambda_max (n,), residual bound (n,))``."""
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    lam, res = [], []
    for i, p in enumerate(paths):
        mv, dim = block_hvp(loss, params, p)
        dtype = get_path(params, p).dtype
        t, r = top_eigenvalue(mv, dim, jax.random.fold_in(key, i), min(n_steps, dim), dtype)
        lam.append(t)
        res.append(r)
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
