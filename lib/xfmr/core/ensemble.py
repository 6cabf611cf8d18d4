"""Train ``K`` independent models at once, their parameters stacked along a leading axis.

``K`` models with parameters ``theta_1..theta_K`` (same structure) become one pytree whose
leaves carry a leading axis of size ``K`` (:func:`stack` of given models, or
:func:`init_models` for ``K`` random initialisations). :func:`train_models` minimises the
ensemble loss

.. math::  \\mathcal L(\\theta_{1:K}) = \\sum_{i=1}^K \\ell(\\theta_i;\\ b_i)

with one :func:`xfmr.core.train.train` call (one compilation for all ``K``). Its gradient is
``d L / d theta_i = grad ell(theta_i; b_i)``: each model sees only its own loss and batch,
so any element-wise optimiser (SGD, momentum, Adam) applied to the stacked pytree is exactly
``K`` independent runs. Per-model (and per-block) step sizes are leaves of shape
``(K, 1, ..., 1)`` (:func:`per_model`) passed to :func:`xfmr.optimisers.blockwise.scale_by_block`,
so that one call runs a whole learning-rate grid over several seeds.

Example (``K`` seeds, model ``m`` initialised from and fed by its share of each key)::

    k_init, k_train = jax.random.split(key)
    params = init_models(init_params, k_init, K)
    result = train_models(loss_fn, params, split_batches(sample_batch, K), optax.adam(1e-3), 1000, k_train)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xfmr.core.train import TrainResult, train
from xfmr.core.validate import check_callable, check_int

__all__ = ["stack", "unstack", "per_model", "init_models", "split_batches", "train_models"]


def stack(trees: Sequence[Any]) -> Any:
    """Stack ``K`` pytrees of the same structure into one with a leading axis ``K``."""
    if len(trees) == 0:
        raise ValueError("trees must hold at least one pytree, got none")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def unstack(tree: Any) -> list:
    """Inverse of :func:`stack`: the list of the ``K`` models of a stacked pytree."""
    K = _n_models(tree, "tree")
    return [jax.tree_util.tree_map(lambda x: x[i], tree) for i in range(K)]


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


def init_models(init_params: Callable[[jax.Array], Any], key: jax.Array, n_models: int) -> Any:
    """``K = n_models`` initialisations stacked: model ``m`` is ``init_params(split(key, K)[m])``."""
    check_callable(init_params, "init_params")
    n_models = check_int(n_models, "n_models", minimum=1)
    return jax.vmap(init_params)(jax.random.split(key, n_models))


def split_batches(sample_batch: Callable[[jax.Array], Any], n_models: int) -> Callable[[jax.Array], Any]:
    """``sample_batches`` for :func:`train_models` in which model ``m`` draws its own batch
    ``sample_batch(split(key, K)[m])`` from each step's key (``K = n_models``)."""
    check_callable(sample_batch, "sample_batch")
    n_models = check_int(n_models, "n_models", minimum=1)

    def sample_batches(key):
        return jax.vmap(sample_batch)(jax.random.split(key, n_models))

    return sample_batches


def train_models(loss_fn: Callable[[Any, Any], jax.Array], params: Any, sample_batches: Callable[[jax.Array], Any],
                 optimizer: optax.GradientTransformation, n_steps: int, key: jax.Array, **options: Any) -> TrainResult:
    """Train the ``K`` stacked models ``params`` at once, each on its own loss and batch.

    Args:
        loss_fn: ``loss_fn(params_m, batch_m) -> scalar``, the loss of ONE model.
        params: the ``K`` models' parameters stacked along a leading axis ``K``
            (:func:`stack`, :func:`init_models`).
        sample_batches: ``sample_batches(key) -> batches``, the ``K`` models' batches of the step
            whose key is ``key``, stacked along a leading axis ``K`` (model ``m`` trains on
            batch ``m``; :func:`split_batches` builds one from a one-model sampler).
        optimizer, n_steps, key: as for :func:`xfmr.core.train.train`, which runs the loop on the
            ensemble loss ``sum_m loss_fn(params_m, batch_m)``.
        options: :func:`xfmr.core.train.train`'s keywords (``desc``, ``chunk``, ``checkpoints``).

    Returns:
        :class:`xfmr.core.train.TrainResult` with the stacked parameters (and snapshots) and the
        ``(n_steps,)`` losses *summed* over the ``K`` models.

    Raises:
        TypeError: ``loss_fn`` or ``sample_batches`` not callable (and :func:`xfmr.core.train.train`'s errors).
        ValueError: the batches' leading axis is not the number of models ``K``.
    """
    check_callable(loss_fn, "loss_fn")
    check_callable(sample_batches, "sample_batches")
    K = _n_models(params, "params")
    sizes = {leaf.shape[0] if leaf.shape else None
             for leaf in jax.tree_util.tree_leaves(jax.eval_shape(sample_batches, key))}
    if sizes != {K}:
        raise ValueError(f"sample_batches must return the batches of the K = {K} models stacked "
                         f"along a leading axis, got leading sizes {sorted(sizes, key=str)}")
    model_losses = jax.vmap(loss_fn)

    def ensemble_loss(stacked, batches):
        return jnp.sum(model_losses(stacked, batches))

    return train(ensemble_loss, params, sample_batches, optimizer, n_steps, key, **options)


def _n_models(tree: Any, name: str) -> int:
    """The common leading axis ``K`` of a stacked pytree's leaves."""
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"{name} must be models stacked along a leading axis K shared by every leaf, "
                         f"got leading sizes {sorted(sizes, key=str)}")
    return sizes.pop()
