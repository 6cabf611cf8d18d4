"""A small, deterministic training loop: optax optimiser, jitted steps, fresh batch per step.

One step $t = 0, 1, \\dots, T-1$ draws a batch from its own key
$k_t = \\mathrm{fold\\_in}(k, t)$, evaluates $\\ell_t = L(\\theta_t, b_t)$ and its gradient,
and applies the optimiser:

$$
b_t = \\mathrm{sample\\_batch}(k_t), \\qquad
(u_t, s_{t+1}) = \\mathrm{update}(\\nabla_\\theta L(\\theta_t, b_t), s_t, \\theta_t), \\qquad
\\theta_{t+1} = \\theta_t + u_t .
$$

Steps run in chunks, each chunk one jitted ``jax.lax.scan``; because the key of step $t$
depends only on $(k, t)$, the result does not depend on the chunk size. A tqdm progress bar
(one tick per step) is shown on stderr unless the environment variable ``TQDM_DISABLE`` is set
to a true value (``1``, ``true``, ``yes``).

Example::

    result = train(loss_fn, params, sample_batch, optax.adam(1e-2), 1000, jax.random.key(0))
    result.params, result.losses  # final parameters, (1000,) losses
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from xfmr.core.validate import check_callable, check_instance, check_int

__all__ = ["TrainResult", "Snapshot", "train", "progress_disabled"]


class TrainResult(NamedTuple):
    """Output of :func:`train`.

    Attributes:
        params: final parameters (same pytree structure and dtypes as the initial ones).
        losses: ``(n_steps,)`` numpy array, the training loss $\\ell_t$ of step $t$, evaluated
            at the parameters *before* that step's update (dtype of the loss).
        opt_state: the optimiser state after the last step.
        snapshots: one :class:`Snapshot` per requested checkpoint step, in increasing order.
    """

    params: Any
    losses: np.ndarray
    opt_state: Any = None
    snapshots: tuple = ()


class Snapshot(NamedTuple):
    """The state of a run after ``step`` steps (``step = 0``: the initial state).

    Attributes:
        step: number of steps taken, $t$.
        params: $\\theta_t$, the parameters before step $t$'s update.
        opt_state: the optimiser state $s_t$ at that point (e.g. Adam's moments).
    """

    step: int
    params: Any
    opt_state: Any


def progress_disabled() -> bool:
    """True when the environment variable ``TQDM_DISABLE`` asks for silent progress bars."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() in {"1", "true", "yes", "on"}


def _is_key(key: Any) -> bool:
    """A new-style typed PRNG key (shape ``()``) or a raw ``uint32`` key of shape ``(2,)``."""
    try:
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            return key.shape == ()
        return key.dtype == jnp.uint32 and key.shape == (2,)
    except AttributeError:
        return False


def train(
    loss_fn: Callable[[Any, Any], jax.Array],
    params: Any,
    sample_batch: Callable[[jax.Array], Any],
    optimizer: optax.GradientTransformation,
    n_steps: int,
    key: jax.Array,
    *,
    desc: str = "train",
    chunk: int = 100,
    checkpoints: Sequence[int] = (),
) -> TrainResult:
    """Minimise ``loss_fn`` with ``optimizer`` for ``n_steps`` steps, one fresh batch per step.

    Args:
        loss_fn: ``loss_fn(params, batch) -> scalar`` (shape ``()``), differentiable in
            ``params``; traced under ``jax.jit``.
        params: initial parameters, any pytree of float arrays.
        sample_batch: ``sample_batch(key) -> batch``, jit-compatible (pure JAX); called once
            per step with the step's key $k_t = \\mathrm{fold\\_in}(k, t)$.
        optimizer: an ``optax.GradientTransformation`` (e.g. ``optax.adam(1e-2)``).
        n_steps: number of steps $T \\ge 1$.
        key: a PRNG key (``jax.random.key(seed)`` or ``jax.random.PRNGKey(seed)``).
        desc: label of the progress bar.
        chunk: steps per jitted ``lax.scan`` call (the progress bar advances per chunk).
        checkpoints: steps $t \\in [0, T]$ after which ``(params, opt_state)`` is kept
            (a :class:`Snapshot`); chunks also end there, so each distinct chunk length
            compiles once (checkpoints at multiples of ``chunk`` add no compilation).

    Returns:
        :class:`TrainResult` with the final ``params``, the ``(n_steps,)`` ``losses``, the
        final ``opt_state`` and the ``snapshots``.

    Raises:
        TypeError: ``loss_fn``/``sample_batch`` not callable, ``optimizer`` not an optax
            transformation, ``n_steps``/``chunk``/a checkpoint not integers.
        ValueError: ``n_steps < 1``, ``chunk < 1``, a checkpoint outside ``[0, n_steps]``,
            ``key`` not a PRNG key, or ``loss_fn`` not returning a scalar.
    """
    check_callable(loss_fn, "loss_fn")
    check_callable(sample_batch, "sample_batch")
    check_instance(optimizer, "optimizer", optax.GradientTransformation)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    chunk = check_int(chunk, "chunk", minimum=1)
    if isinstance(checkpoints, (str, bytes)) or not hasattr(checkpoints, "__iter__"):
        raise TypeError(f"checkpoints must be a sequence of steps, got {type(checkpoints).__name__}")
    checkpoints = sorted({check_int(c, "checkpoints", minimum=0, maximum=n_steps)
                          for c in checkpoints})
    if not _is_key(key):
        raise ValueError(
            "key must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
            f"got {getattr(key, 'dtype', type(key).__name__)} with shape {getattr(key, 'shape', None)}"
        )

    batch_shape = jax.eval_shape(sample_batch, key)
    loss_shape = jax.eval_shape(loss_fn, params, batch_shape)
    if not hasattr(loss_shape, "shape") or loss_shape.shape != ():
        raise ValueError(
            "loss_fn must return a scalar (shape ()), got "
            f"{getattr(loss_shape, 'shape', type(loss_shape).__name__)}"
        )

    value_and_grad = jax.value_and_grad(loss_fn)

    def step(carry, t):
        p, s = carry
        batch = sample_batch(jax.random.fold_in(key, t))
        loss, grads = value_and_grad(p, batch)
        updates, s = optimizer.update(grads, s, p)
        p = optax.apply_updates(p, updates)
        return (p, s), loss

    @jax.jit
    def run(carry, ts):
        return jax.lax.scan(step, carry, ts)

    carry = (params, optimizer.init(params))
    bounds = sorted(set(range(0, n_steps, chunk)) | set(checkpoints) | {n_steps})
    losses, snapshots = [], []
    with tqdm(total=n_steps, desc=desc, disable=progress_disabled()) as bar:
        for start, stop in zip(bounds[:-1], bounds[1:]):
            if start in checkpoints:
                snapshots.append(Snapshot(start, *carry))
            ts = jnp.arange(start, stop, dtype=jnp.uint32)
            carry, chunk_losses = run(carry, ts)
            losses.append(np.asarray(chunk_losses))
            bar.update(len(ts))
    if n_steps in checkpoints:
        snapshots.append(Snapshot(n_steps, *carry))
    return TrainResult(params=carry[0], losses=np.concatenate(losses), opt_state=carry[1],
                       snapshots=tuple(snapshots))

