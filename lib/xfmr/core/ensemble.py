"""Train many independent models in one run by stacking them along a leading axis.

``K`` models with parameters ``theta_1..theta_K`` (same structure) become one pytree whose
leaves carry a leading axis of size ``K``. The ensemble loss

.. math::  \\mathcal L(\\theta_{1:K}) = \\sum_{i=1}^K \\ell(\\theta_i;\\ b_i)

has gradient ``d L / d theta_i = grad ell(theta_i; b_i)``: each model sees only its own
loss and batch. Any element-wise optimiser (SGD, momentum, Adam) applied to the stacked
pytree is therefore exactly ``K`` independent runs; per-model (and per-block) step sizes
are leaves of shape ``(K, 1, ..., 1)`` passed to :func:`xfmr.optimisers.blockwise.scale_by_block`.
This lets one jitted :func:`xfmr.core.train.train` call run a whole learning-rate grid over
several seeds.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["stack", "unstack", "ensemble_loss", "per_model"]


def stack(trees: Sequence[Any]) -> Any:
    """Stack ``K`` pytrees of the same structure into one with a leading axis ``K``."""
    if len(trees) == 0:
        raise ValueError("trees must hold at least one pytree, got none")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def unstack(tree: Any) -> list:
    """Inverse of :func:`stack`."""
    K = jax.tree_util.tree_leaves(tree)[0].shape[0]
    return [jax.tree_util.tree_map(lambda x: x[i], tree) for i in range(K)]


def ensemble_loss(loss: Callable[[Any, Any], jax.Array]) -> Callable[[Any, Any], jax.Array]:
    """``(stacked params, stacked batches) -> sum_i loss(params_i, batch_i)``."""
    if not callable(loss):
        raise TypeError(f"loss must be callable loss(params, batch), got {type(loss).__name__}")
    vl = jax.vmap(loss)

    def total(params, batches):
        return jnp.sum(vl(params, batches))

    return total


def per_model(values: Any, stacked: Any) -> Any:
    """Per-model, per-block constants shaped to broadcast against the stacked leaves.

    ``values`` is either an array ``(K,)`` (one constant per model, the same for every
    block) or a pytree like the parameters whose leaves are arrays ``(K,)``. Returns a pytree
    with leaves ``(K, 1, ..., 1)`` of the rank of the matching stacked leaf.
    """
    if isinstance(values, (np.ndarray, jax.Array, list, tuple)) and np.ndim(values) == 1:
        values = jax.tree_util.tree_map(lambda _: jnp.asarray(values), stacked)
    return jax.tree_util.tree_map(
        lambda v, x: jnp.asarray(v, x.dtype).reshape((-1,) + (1,) * (x.ndim - 1)),
        values, stacked)
