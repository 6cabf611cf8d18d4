"""Per-block curvature and per-block step sizes for any model given as ``loss(params)``.

A *block* is one leaf of the parameter pytree, addressed by its path (e.g.
``("blocks", 0, "attn", "W_Q")``). Its diagonal Hessian block
``H_bb = d^2 loss / d theta_b d theta_b^T`` (``P_b x P_b``, row-major flattening of the leaf)
acts on a vector ``v`` by one forward-over-reverse product with the other blocks held fixed,

.. math::

    H_{bb} v = \\frac{d}{d\\epsilon}\\Big|_0 \\nabla_{\\theta_b}\\,
    \\ell(\\theta_b + \\epsilon v;\\ \\theta_{-b}),

which is what :mod:`xfmr.optimisers.lanczos` needs for block spectra (:func:`block_spectra`) and
block top eigenvalues (:func:`block_top_eigenvalues`). Two routes compute them, with the same
starts and the same mathematics (the unit tests check that they agree):

- ``"block"``: in the block's own coordinates (:func:`block_program`, one compiled program
  per block). Each product differentiates with respect to that leaf only and the Lanczos
  vectors have ``P_b`` entries. At the paper's GPT (``P = 203,148``, nine blocks, 10 probes
  of 100 steps, 2 cores) it took 64 s and 69 s in two runs where the masked route took
  366 s (``make bench``).
- ``"masked"``: on the flat vector of all ``P`` parameters (:func:`masked_program`). One
  compiled program for any number of blocks, each product a full Hessian-vector product:
  for small models, where compilation costs more than the products, the faster route (the
  optimiser pages' default profile, ``P`` about 14,000: 62 s against 74 s for two pages).
  Also the route of :mod:`xfmr.optimisers.block_rates` (inside the training step) and of
  :func:`xfmr.optimisers.warmup.sharpness` (the whole Hessian).

``route="auto"`` (the default) takes the block route from :data:`BLOCK_ROUTE_MIN_PARAMS`
parameters on.

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

from xfmr.optimisers.lanczos import SLQResult, lanczos_probes
from xfmr.core.validate import check_callable, check_int

__all__ = ["BLOCK_ROUTE_MIN_PARAMS", "leaf_paths", "block_program", "masked_program", "block_hvp", "block_spectra", "block_top_eigenvalues",
           "all_block_top_eigenvalues", "scale_by_block"]


BLOCK_ROUTE_MIN_PARAMS = 50_000  # route="auto": the block route from this many parameters on


def _route_runs(route: str, params: Any):
    """The runner of ``route`` ("auto", "block" or "masked"; module docstring)."""
    if route not in ("auto", "block", "masked"):
        raise ValueError(f'route must be "auto", "block" or "masked", got {route!r}')
    if route == "auto":
        P = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params))
        route = "block" if P >= BLOCK_ROUTE_MIN_PARAMS else "masked"
    return _block_runs if route == "block" else _masked_runs


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


def _ritz_summary(alpha: jax.Array, beta: jax.Array):
    """``(theta (m,), w (m,), bound ())`` of one Lanczos run: the nodes and Gauss weights of
    ``T(alpha, beta[:m-1])``, nodes of zero weight (after an early breakdown) moved onto the
    top node, and the residual ``|beta_m S_{m, top}|`` of the top Ritz pair."""
    m = alpha.shape[0]
    off = beta[: m - 1]
    theta, S = jnp.linalg.eigh(jnp.diag(alpha) + jnp.diag(off, 1) + jnp.diag(off, -1))
    w = jnp.square(S[0])
    live = w > 1e-14
    top = jnp.argmax(jnp.where(live, theta, -jnp.inf))
    theta = jnp.where(live, theta, theta[top])
    return theta, jnp.where(live, w, 0), jnp.abs(beta[-1] * S[-1, top])


def _probe_draws(key: jax.Array, i: int, n_probes: int, P: int, dtype) -> jax.Array:
    """Probes of the ``i``-th block: ``rademacher(fold_in(fold_in(key, i), s))`` over the
    whole flat parameter vector (``P``), ``s = 0..n_probes-1``; ``(n_probes, P)``."""
    return jnp.stack([jax.random.rademacher(jax.random.fold_in(jax.random.fold_in(key, i), s),
                                            (P,), dtype=dtype) for s in range(n_probes)])


def _masked_runs(loss, params, paths, key, n_probes: int, n_steps: int, batch):
    """:func:`_block_runs` in ONE compiled program however many blocks
    (:func:`masked_program`, each product a full Hessian-vector product); the same starts."""
    flat, _ = ravel_pytree(params)
    all_paths = leaf_paths(params)
    sizes = [int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params)]
    seg = np.repeat(np.arange(len(sizes)), sizes)
    idx = [all_paths.index(tuple(p)) for p in paths]
    masks = jnp.asarray(seg[None, :] == np.asarray(idx)[:, None], flat.dtype)
    starts = jnp.stack([_probe_draws(key, i, n_probes, flat.size, flat.dtype)
                        for i in range(len(idx))]) * masks[:, None, :]
    leaves, treedef = jax.tree_util.tree_flatten(params)
    spec = tuple((tuple(x.shape), jnp.dtype(x.dtype).name) for x in leaves)
    m = min(n_steps, max(sizes[i] for i in idx))
    return masked_program(loss, treedef, spec, m)(flat, batch, masks, starts)


def _block_runs(loss, params, paths, key, n_probes: int, n_steps: int, batch):
    """Lanczos on every block of ``paths`` and every probe.

    Block ``b`` runs in its own coordinates (``P_b``), its operator ``H_bb`` one
    forward-over-reverse product of :func:`block_hvp` (the gradient with respect to that
    leaf only), so neither the products nor the reorthogonalisation touch the other
    ``P - P_b`` coordinates. One compiled program per block (:func:`block_program`), the
    blocks one after the other, the probes of a block together (:func:`lanczos_probes`). Probe ``s`` of
    block ``i`` starts from :func:`_probe_draws` restricted to the block's coordinates. A block smaller than
    ``m = min(n_steps, max P_b)`` is resolved exactly in ``P_b`` steps and padded with nodes
    of weight zero. Returns ``theta, w, bound`` of shape ``(n_blocks, n_probes, m)``,
    ``(..., m)``, ``(n_blocks, n_probes)``.
    """
    all_paths = leaf_paths(params)
    blocks = tuple(all_paths.index(tuple(p)) for p in paths)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    sizes = [int(np.prod(x.shape)) for x in leaves]
    m = min(n_steps, max(sizes[b] for b in blocks))
    spec = tuple((tuple(x.shape), jnp.dtype(x.dtype).name) for x in leaves)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    dtype = jnp.result_type(*leaves)
    starts = [_probe_draws(key, i, n_probes, int(offsets[-1]), dtype)[:, offsets[b]:offsets[b + 1]]
              for i, b in enumerate(blocks)]
    runs = [block_program(loss, treedef, spec, b, m)(leaves, batch, q0)
            for b, q0 in zip(blocks, starts)]
    return tuple(jnp.stack(x) for x in zip(*runs))


@functools.lru_cache(maxsize=256)
def block_program(loss, treedef, spec: tuple, block: int, m: int):
    """The jitted Lanczos of leaf ``block`` for :func:`_block_runs`:
    ``run(leaves, batch, starts (n_probes, P_b)) -> theta, w (n_probes, m), bound (n_probes,)``,
    compiled once per (loss, parameter structure, block, m) and reused across seeds and
    checkpoints. (The blocks are separate programs: with eight or more blocks' loops in one
    program, XLA's CPU runtime hung without using the CPU.)"""
    steps = min(m, int(np.prod(spec[block][0])))

    @jax.jit
    def run(leaves, batch, starts):
        params = jax.tree_util.tree_unflatten(treedef, leaves)
        matvec, _ = block_hvp(loss, params, leaf_paths(params)[block], batch)
        theta, w, bound = jax.vmap(_ritz_summary)(*lanczos_probes(matvec, starts, steps))
        pad = m - steps
        theta = jnp.concatenate([theta, jnp.repeat(theta.max(-1, keepdims=True), pad, -1)], -1)
        return theta, jnp.pad(w, ((0, 0), (0, pad))), bound

    return run


@functools.lru_cache(maxsize=64)
def masked_program(loss, treedef, spec: tuple, m: int):
    """Masked Lanczos on the flat parameter vector, one program for any set of blocks: block
    ``b`` is the operator ``v -> m_b * H (m_b * v)`` (``m_b`` the indicator of the block's
    coordinates), so a start supported on ``b`` keeps the Krylov space there, where the
    operator is ``H_bb``. ``run(flat, batch, masks (n, P), starts (n, n_probes, P))`` returns
    ``theta, w, bound`` as :func:`_block_runs`. One full Hessian-vector product per step
    whatever the block, but one compilation for all blocks: the program of
    :mod:`block_rates` (every leaf, inside the training step) and :mod:`warmup` (one block,
    the whole Hessian)."""
    template = jax.tree_util.tree_unflatten(treedef, [jnp.zeros(sh, dt) for sh, dt in spec])
    unravel = ravel_pytree(template)[1]

    @jax.jit
    def run(flat, batch, masks, starts):
        g = jax.grad(lambda w: loss(unravel(w), batch))

        def one(mask, q0):
            alpha, beta = lanczos_probes(lambda v: mask * jax.jvp(g, (flat,), (mask * v,))[1],
                                         q0, m)
            return jax.vmap(_ritz_summary)(alpha, beta)

        return jax.lax.map(lambda ms: one(*ms), (masks, starts))

    return run


def block_spectra(loss: Callable[[Any, Any], jax.Array], params: Any,
                  paths: Sequence[Sequence], key: jax.Array, n_probes: int, n_steps: int,
                  batch: Any = None, *, route: str = "auto") -> list[SLQResult]:
    """SLQ (see :mod:`xfmr.optimisers.lanczos`) of each diagonal block ``H_bb``, ``n_probes``
    Rademacher probes of ``n_steps`` Lanczos steps per block (probe ``s`` of block ``i``
    from ``fold_in(fold_in(key, i), s)``), by the ``route`` of the module docstring. A block
    smaller than ``n_steps`` is resolved exactly (the extra nodes get weight zero).
    """
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    theta, w, _ = _route_runs(route, params)(loss, params, paths, key, n_probes, n_steps, batch)
    theta, w = np.asarray(theta), np.asarray(w)
    return [SLQResult(theta[i], w[i], int(np.prod(get_path(params, p).shape)))
            for i, p in enumerate(paths)]


def block_top_eigenvalues(loss: Callable[[Any, Any], jax.Array], params: Any,
                          paths: Sequence[Sequence], key: jax.Array, n_steps: int,
                          batch: Any = None, *, route: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Largest eigenvalue of each ``H_bb`` (one Lanczos run each, as in
    :func:`xfmr.optimisers.lanczos.top_eigenvalue`: a lower bound, and some eigenvalue of ``H_bb`` lies
    within the residual bound of it): ``(lambda_max (n,), residual bound (n,))``; ``route``
    as in the module docstring."""
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    theta, _, bound = _route_runs(route, params)(loss, params, paths, key, 1, n_steps, batch)
    return np.asarray(theta)[:, 0].max(-1), np.asarray(bound)[:, 0]


def all_block_top_eigenvalues(loss: Callable[[Any, Any], jax.Array], params: Any,
                              key: jax.Array, n_steps: int, batch: Any = None, *,
                              route: str = "auto") -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """:func:`block_top_eigenvalues` of EVERY leaf: ``(paths, lambda_max, bound)``."""
    paths = leaf_paths(params)
    lam, bound = block_top_eigenvalues(loss, params, paths, key, n_steps, batch, route=route)
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
