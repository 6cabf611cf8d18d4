r"""Training the amortised structure learner (:mod:`xfmr.causal.amortised`) by binary cross-entropy.

The model is trained on edge indicators of simulated graphs
(:func:`xfmr.causal.amortised_data.sample_graphs_and_data`), so it learns a distribution over
edges given data (a product of Bernoullis):

.. math::

    \ell(\theta) = \mathbb{E}_{G, X}\Big[\tfrac{1}{d(d-1)} \sum_{i \ne j}
    \mathrm{BCE}\big(\sigma(L_\theta(X)_{ij}),\, A_{ij}\big)\Big].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from xfmr.causal import amortised, scm
from xfmr.causal.amortised_data import sample_graphs_and_data
from xfmr.core.ensemble import init_models, stack, train_models, unstack
from xfmr.core.train import TrainResult
from xfmr.core.validate import check_choice, check_instance, check_int, check_real

__all__ = ["edge_bce_loss", "train_per_kind"]


def edge_bce_loss(
    params: dict, batch: tuple, config: amortised.Config
) -> jax.Array:
    """Mean binary cross-entropy over the off-diagonal edges of a batch
    ``(Xs (B, n, d), As (B, d, d))``."""
    Xs, As = batch
    logits = amortised.forward(params, Xs, config)
    d = As.shape[-1]
    off = 1.0 - jnp.eye(d, dtype=logits.dtype)
    return (
        (optax.sigmoid_binary_cross_entropy(logits, As) * off).sum(
            (-2, -1)
        )
        / (d * (d - 1))
    ).mean()


def train_per_kind(key: jax.Array, config: amortised.Config, kinds: tuple[str, ...], *, n_steps: int,
                   batch_size: int, n: int, k: float = 1.0, low: float = 0.5, high: float = 2.0,
                   learning_rate: float = 1e-3, chunk: int = 100) -> tuple[dict, TrainResult]:
    """Train one model per data ``kind`` on ``config.d_max`` variables, all at once
    (:func:`xfmr.core.ensemble.train_models`: one compilation).

    Model ``m`` trains on batches of kind ``kinds[m]`` only (the batch keys are split from the
    step key); the models do not interact. Adam with a linear warm-up over the first 5 % of the
    steps, then cosine decay to 10 % of ``learning_rate``. ``key`` splits into the
    initialisation key and the training key; model ``m`` starts from
    ``init_params(split(k_init, M)[m])``.

    Returns:
        ``(params, result)``: ``params[kind]`` the trained parameters of each model and the
        :class:`~xfmr.core.train.TrainResult` (``result.params`` stacked in the order of
        ``kinds``; ``result.losses`` the per-step BCE summed over the models).
    """
    check_instance(config, "config", amortised.Config)
    check_instance(kinds, "kinds", tuple)
    if not kinds or len(set(kinds)) != len(kinds):
        raise ValueError(f"kinds must be a non-empty tuple of distinct data kinds, got {kinds!r}")
    for kind in kinds:
        check_choice(kind, "kinds[...]", scm.KINDS)
    k_init, k_train = jax.random.split(key)
    params = init_models(lambda ki: amortised.init_params(ki, config), k_init, len(kinds))
    jax.eval_shape(lambda key: sample_graphs_and_data(key, batch_size, config.d_max, n, "scm", k, low, high),
                   k_train)                                                      # checks the arguments only
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    learning_rate = check_real(learning_rate, "learning_rate", minimum=0.0, strict_minimum=True)
    warm = max(1, n_steps // 20)
    sched = optax.warmup_cosine_decay_schedule(0.0, learning_rate, warm, max(n_steps, warm + 1),
                                               0.1 * learning_rate)

    def batches(key):
        return stack([sample_graphs_and_data(kb, batch_size, config.d_max, n, kind, k, low, high)
                      for kind, kb in zip(kinds, jax.random.split(key, len(kinds)))])

    result = train_models(lambda p, b: edge_bce_loss(p, b, config), params, batches, optax.adam(sched), n_steps,
                          k_train, desc="amortised", chunk=chunk)
    return dict(zip(kinds, unstack(result.params))), result
