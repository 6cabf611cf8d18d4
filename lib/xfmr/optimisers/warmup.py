"""Linear learning-rate warmup, one length per stacked model.

Step ``t = 0, 1, ...`` of a model with warmup length ``w > 0`` scales its update by
``min(1, (t + 1) / w)``: the rate rises linearly from ``eta / w`` to ``eta`` over the
first ``w`` steps and stays there. ``w = 0`` is no warmup (factor 1). With stacked models
(leading axis ``K``, :mod:`xfmr.core.ensemble`) ``warmup_steps`` is a ``(K,)`` array, so
runs with and without warmup train in one ensemble.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["warmup_factor", "ScaleByWarmupState", "scale_by_warmup", "sharpness"]


def warmup_factor(step: Any, warmup_steps: Any) -> jax.Array:
    """``min(1, (step + 1) / w)`` where ``w > 0``, else ``1`` (elementwise in ``w``)."""
    w = jnp.asarray(warmup_steps, jnp.float32)
    t = jnp.asarray(step, jnp.float32)
    return jnp.where(w > 0, jnp.minimum(1.0, (t + 1) / jnp.maximum(w, 1.0)), 1.0)


class ScaleByWarmupState(NamedTuple):
    """``count``: the number of steps taken."""

    count: jax.Array


def scale_by_warmup(warmup_steps: Any) -> optax.GradientTransformation:
    """Multiply the update of model ``k`` by ``warmup_factor(t, warmup_steps[k])``.

    Args:
        warmup_steps: a non-negative integer (one model) or a ``(K,)`` array of them, one per
            stacked model (the leading axis of every leaf).
    """
    w = np.asarray(warmup_steps)
    if w.ndim > 1 or np.any(w < 0) or not np.all(np.equal(np.round(w), w)):
        raise ValueError("warmup_steps must be a non-negative integer or a 1-D array of "
                         f"them, got {warmup_steps!r}")

    def init_fn(params):
        del params
        return ScaleByWarmupState(jnp.zeros((), jnp.int32))

    def update_fn(updates, state, params=None):
        del params
        f = warmup_factor(state.count, w)

        def scale(u):
            if f.ndim and (u.ndim < 1 or u.shape[0] != f.shape[0]):
                raise ValueError(f"warmup_steps has {f.shape[0]} entries, but a leaf has "
                                 f"shape {u.shape}")
            return u * f.reshape(f.shape + (1,) * (u.ndim - f.ndim)).astype(u.dtype)

        return (jax.tree_util.tree_map(scale, updates),
                ScaleByWarmupState(state.count + 1))

    return optax.GradientTransformation(init_fn, update_fn)


def sharpness(loss: Any, params: Any, batch: Any, key: jax.Array, n_steps: int, *,
              batch_dims: int = 0) -> jax.Array:
    """``lambda_max`` of the whole Hessian of ``loss(params, batch)`` (float64), the top
    Ritz value of ``n_steps`` Lanczos steps from a Rademacher start drawn from ``key`` (a
    lower bound). ``batch_dims=1``: one value per stacked model, ``(K,)``."""
    from jax.flatten_util import ravel_pytree

    from xfmr.core.validate import check_int
    from xfmr.optimisers.blockwise import masked_program

    n_steps = check_int(n_steps, "n_steps", minimum=1)
    batch_dims = check_int(batch_dims, "batch_dims", minimum=0, maximum=1)
    one = params if batch_dims == 0 else jax.tree_util.tree_map(lambda x: x[0], params)
    one = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), one)
    leaves, treedef = jax.tree_util.tree_flatten(one)
    P = sum(int(np.prod(x.shape)) for x in leaves)
    mask = jnp.ones((1, P), jnp.float64)
    start = jax.random.rademacher(key, (1, 1, P), dtype=jnp.float64)
    spec = tuple((tuple(x.shape), "float64") for x in leaves)
    program = masked_program(loss, treedef, spec, min(n_steps, P))

    def top(p):
        flat = ravel_pytree(jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, jnp.float64), p))[0]
        return program(flat, batch, mask, start)[0][0, 0].max()

    return top(params) if batch_dims == 0 else jax.vmap(top)(params)
