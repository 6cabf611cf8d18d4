"""Block-wise SGD's rates from the blocks' curvature, fixed or re-probed during training.

Block ``b`` (a leaf of the parameter pytree) gets the rate

.. math::

    \\eta_b = \\frac{c}{\\max\\big(\\lambda_{\\max}(H_{bb}),\\ \\epsilon\\,
    \\max_{b'} \\lambda_{\\max}(H_{b'b'}),\\ \\tau \\max_{b'} \\lambda_{\\max}(H_{b'b'})\\big)},

with ``lambda_max`` the top Ritz value of ``n_steps`` Lanczos steps on the block (float64,
:func:`xfmr.optimisers.blockwise.masked_program`), ``epsilon`` = ``floor_ratio``
and ``tau = 1e-12`` a numerical guard (so that ``floor_ratio = 0`` leaves every rate to its
block's curvature but a block of zero curvature does not get an infinite step).

:func:`block_curvature_rates` computes the rates of one model; :func:`scale_by_block_curvature`
is an optax transformation that multiplies each block's update by its rate, computing the
rates from the parameters at initialisation and, if ``every > 0``, again after every
``every`` steps from the parameters of that step (the probe batch is fixed). Both take
stacked models (leading axis ``K``, :mod:`xfmr.core.ensemble`) with a factor ``c`` and a
floor per model.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from xfmr.core.validate import check_callable, check_int
from xfmr.optimisers.blockwise import masked_program

__all__ = ["GUARD", "block_curvature_rates", "ScaleByBlockCurvatureState",
           "scale_by_block_curvature"]

GUARD = 1e-12


def _rates_fn(loss: Callable, params: Any, key: jax.Array, n_steps: int):
    """``(params_m, batch, c, floor) -> rates`` of ONE model (a pytree of scalars)."""
    p64 = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), params)
    leaves, treedef = jax.tree_util.tree_flatten(p64)
    sizes = [int(np.prod(x.shape)) for x in leaves]
    seg = np.repeat(np.arange(len(sizes)), sizes)
    masks = jnp.asarray(seg[None, :] == np.arange(len(sizes))[:, None], jnp.float64)
    starts = jnp.stack([jax.random.rademacher(jax.random.fold_in(key, i), (sum(sizes),),
                                              dtype=jnp.float64)
                        for i in range(len(sizes))])[:, None, :] * masks[:, None, :]
    m = min(n_steps, max(sizes))
    spec = tuple((tuple(x.shape), "float64") for x in leaves)
    program = masked_program(loss, treedef, spec, m)

    def rates(params_m, batch, c, floor):
        flat = ravel_pytree(jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, jnp.float64), params_m))[0]
        theta = program(flat, batch, masks, starts)[0]
        lam = theta[:, 0].max(-1)
        top = lam.max()
        r = c / jnp.maximum(lam, jnp.maximum(floor, GUARD) * top)
        return jax.tree_util.tree_unflatten(treedef, [r[i] for i in range(len(sizes))])

    return rates


def block_curvature_rates(loss: Callable[[Any, Any], jax.Array], params: Any, batch: Any,
                          key: jax.Array, n_steps: int, factor: Any = 1.0,
                          floor_ratio: Any = 0.0, *, batch_dims: int = 0) -> Any:
    """The rates ``eta_b`` of the module docstring, a pytree of scalars like ``params``
    (leaves of the leading ``batch_dims`` shape for stacked models).

    Args:
        loss: ``loss(params_m, batch) -> scalar`` of ONE model.
        params: one model, or ``K`` models stacked (``batch_dims=1``).
        batch: the probe batch (the same for every model).
        key: PRNG key of the Lanczos starts (block ``i`` from ``fold_in(key, i)``).
        n_steps: Lanczos steps per block, ``>= 1``.
        factor, floor_ratio: ``c`` and ``epsilon``, scalars or ``(K,)`` arrays;
            ``floor_ratio`` in ``[0, 1]``.
        batch_dims: ``0`` (one model) or ``1`` (stacked models).
    """
    check_callable(loss, "loss")
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    batch_dims = check_int(batch_dims, "batch_dims", minimum=0, maximum=1)
    floor = np.asarray(floor_ratio, float)
    if np.any(floor < 0) or np.any(floor > 1):
        raise ValueError(f"floor_ratio must lie in [0, 1], got {floor_ratio}")
    one = (params if batch_dims == 0
           else jax.tree_util.tree_map(lambda x: x[0], params))
    fn = _rates_fn(loss, one, key, n_steps)
    if batch_dims == 0:
        return fn(params, batch, factor, floor)
    K = jax.tree_util.tree_leaves(params)[0].shape[0]
    c = jnp.broadcast_to(jnp.asarray(factor, jnp.float64), (K,))
    f = jnp.broadcast_to(jnp.asarray(floor, jnp.float64), (K,))
    return jax.vmap(fn, in_axes=(0, None, 0, 0))(params, batch, c, f)


class ScaleByBlockCurvatureState(NamedTuple):
    """``count`` (steps taken) and the current ``rates`` (a pytree like the parameters)."""

    count: jax.Array
    rates: Any


def scale_by_block_curvature(loss: Callable[[Any, Any], jax.Array], batch: Any,
                             key: jax.Array, n_steps: int, factor: Any = 1.0,
                             floor_ratio: Any = 0.0, *, every: int = 0,
                             batch_dims: int = 0) -> optax.GradientTransformation:
    """Multiply each block's update by its rate ``eta_b`` (module docstring), the rates
    computed by :func:`block_curvature_rates` at ``init`` and, when ``every > 0``, again
    before the update of every step ``t`` with ``t % every == 0, t > 0`` from that step's
    parameters (``update`` must then be given ``params``). ``every = 0``: fixed rates.
    Arguments as for :func:`block_curvature_rates`.
    """
    check_callable(loss, "loss")
    every = check_int(every, "every", minimum=0)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    batch_dims = check_int(batch_dims, "batch_dims", minimum=0, maximum=1)

    def probe(params):
        r = block_curvature_rates(loss, params, batch, key, n_steps, factor, floor_ratio,
                                  batch_dims=batch_dims)
        return jax.tree_util.tree_map(lambda x, p: jnp.asarray(x, p.dtype), r, params)

    def init_fn(params):
        return ScaleByBlockCurvatureState(jnp.zeros((), jnp.int32), probe(params))

    def update_fn(updates, state, params=None):
        rates = state.rates
        if every > 0:
            if params is None:
                raise ValueError("scale_by_block_curvature with every > 0 needs params")
            again = (state.count > 0) & (state.count % every == 0)
            rates = jax.lax.cond(again, lambda: probe(params), lambda: state.rates)

        def scale(u, r):
            return u * r.reshape(r.shape + (1,) * (u.ndim - r.ndim))

        new = jax.tree_util.tree_map(scale, updates, rates)
        return new, ScaleByBlockCurvatureState(state.count + 1, rates)

    return optax.GradientTransformation(init_fn, update_fn)
