"""Per-block curvature and per-block step sizes for any model given as ``loss(params)``.

A *block* is one leaf of the parameter pytree, addressed by its path (e.g.
``("blocks", 0, "attn", "W_Q")``). Its diagonal Hessian block
``H_bb = d^2 loss / d theta_b d theta_b^T`` (``P_b x P_b``, row-major flattening of the leaf)
acts on a vector ``v`` by one forward-over-reverse product with the other blocks held fixed,

.. math::

    H_{bb} v = \\frac{d}{d\\epsilon}\\Big|_0 \\nabla_{\\theta_b}\\,
    \\ell(\\theta_b + \\epsilon v;\\ \\theta_{-b}),

which is what :mod:`xfmr.optimisers.lanczos` needs for block spectra (:func:`block_spectra`) and
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

from xfmr.experiments.curvature import get_path, set_path
from jax.flatten_util import ravel_pytree

from xfmr.optimisers.lanczos import SLQResult, lanczos
from xfmr.core.validate import check_callable, check_int

__all__ = ["leaf_paths", "masked_program", "block_hvp", "block_spectra", "block_top_eigenvalues",
           "all_block_top_eigenvalues", "scale_by_block"]


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
    check_callable(loss, "loss")
    theta_b = get_path(params, path)
    shape = theta_b.shape

    def f(t):
        return loss(set_path(params, path, t), batch)

    grad_f = jax.grad(f)

    def matvec(v):
        return jax.jvp(grad_f, (theta_b,), (v.reshape(shape),))[1].reshape(-1)

    return matvec, int(np.prod(shape))


def _masked_runs(loss, params, paths, key, n_probes: int, n_steps: int, batch):
    """Lanczos on every block of ``paths`` and every probe, in one jitted program.

    Block ``b`` is the masked operator ``v -> m_b * H (m_b * v)`` on the flat parameter
    vector (``m_b`` the indicator of the block's coordinates): a start supported on ``b``
    keeps the Krylov space there, where the operator is ``H_bb``. Blocks run one after the
    other (``lax.map``), probes of a block together (``vmap``). Probe ``s`` of block ``i``
    starts from ``rademacher(fold_in(fold_in(key, i), s))`` restricted to the block.
    Returns ``theta, w, bound`` of shape ``(n_blocks, n_probes, m)``, ``(..., m)``,
    ``(n_blocks, n_probes)`` (``bound`` is the residual of the top Ritz pair).
    """
    flat, unravel = ravel_pytree(params)
    all_paths = leaf_paths(params)
    sizes = [int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params)]
    seg = np.repeat(np.arange(len(sizes)), sizes)
    idx = [all_paths.index(tuple(p)) for p in paths]
    masks = jnp.asarray(seg[None, :] == np.asarray(idx)[:, None], flat.dtype)
    starts = jnp.stack([
        jnp.stack([jax.random.rademacher(jax.random.fold_in(jax.random.fold_in(key, i), s),
                                         flat.shape, dtype=flat.dtype) for s in range(n_probes)])
        for i in range(len(paths))]) * masks[:, None, :]
    m = min(n_steps, max(sizes[i] for i in idx))
    leaves, treedef = jax.tree_util.tree_flatten(params)
    spec = tuple((tuple(x.shape), jnp.dtype(x.dtype).name) for x in leaves)
    return masked_program(loss, treedef, spec, m)(flat, batch, masks, starts)


@functools.lru_cache(maxsize=64)
def masked_program(loss, treedef, spec: tuple, m: int):
    """The jitted program of :func:`_masked_runs` (masked Lanczos on every block), compiled
    once per (loss, parameter structure, m) and reused across seeds and checkpoints; also the
    program of :mod:`block_rates` and :mod:`warmup`."""
    template = jax.tree_util.tree_unflatten(treedef, [jnp.zeros(sh, dt) for sh, dt in spec])
    unravel = ravel_pytree(template)[1]

    @jax.jit
    def run(flat, batch, masks, starts):
        g = jax.grad(lambda w: loss(unravel(w), batch))

        def one(mask, q0):
            alpha, beta = lanczos(lambda v: mask * jax.jvp(g, (flat,), (mask * v,))[1], q0, m)
            off = beta[: m - 1]
            theta, S = jnp.linalg.eigh(jnp.diag(alpha) + jnp.diag(off, 1) + jnp.diag(off, -1))
            w = jnp.square(S[0])
            live = w > 1e-14
            top = jnp.argmax(jnp.where(live, theta, -jnp.inf))
            # nodes of zero weight (after an early breakdown) are moved onto the top node
            theta = jnp.where(live, theta, theta[top])
            return theta, jnp.where(live, w, 0), jnp.abs(beta[-1] * S[-1, top])

        return jax.lax.map(lambda ms: jax.vmap(lambda q: one(ms[0], q))(ms[1]), (masks, starts))

    return run


def block_spectra(loss: Callable[[Any, Any], jax.Array], params: Any,
                  paths: Sequence[Sequence], key: jax.Array, n_probes: int, n_steps: int,
                  batch: Any = None) -> list[SLQResult]:
    """SLQ (see :mod:`xfmr.optimisers.lanczos`) of each diagonal block ``H_bb``, ``n_probes``
    Rademacher probes of ``n_steps`` Lanczos steps per block, all blocks in one compiled
    program (see :func:`_masked_runs`; probe ``s`` of block ``i`` from
    ``fold_in(fold_in(key, i), s)``). A block smaller than ``n_steps`` is resolved exactly
    (the extra nodes get weight zero).
    """
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    theta, w, _ = _masked_runs(loss, params, paths, key, n_probes, n_steps, batch)
    theta, w = np.asarray(theta), np.asarray(w)
    return [SLQResult(theta[i], w[i], int(np.prod(get_path(params, p).shape)))
            for i, p in enumerate(paths)]


def block_top_eigenvalues(loss: Callable[[Any, Any], jax.Array], params: Any,
                          paths: Sequence[Sequence], key: jax.Array, n_steps: int,
                          batch: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Largest eigenvalue of each ``H_bb`` (one Lanczos run each, as in
    :func:`xfmr.optimisers.lanczos.top_eigenvalue`: a lower bound, and some eigenvalue of ``H_bb`` lies
    within the residual bound of it): ``(lambda_max (n,), residual bound (n,))``."""
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    theta, _, bound = _masked_runs(loss, params, paths, key, 1, n_steps, batch)
    return np.asarray(theta)[:, 0].max(-1), np.asarray(bound)[:, 0]


def all_block_top_eigenvalues(loss: Callable[[Any, Any], jax.Array], params: Any,
                              key: jax.Array, n_steps: int, batch: Any = None
                              ) -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """:func:`block_top_eigenvalues` of EVERY leaf: ``(paths, lambda_max, bound)``."""
    paths = leaf_paths(params)
    lam, bound = block_top_eigenvalues(loss, params, paths, key, n_steps, batch)
    return paths, lam, bound


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
