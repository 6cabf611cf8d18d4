"""Per-block quantities along a training run: Adam's effective step and block Hessian scales.

**Adam's effective step.** After ``t`` steps Adam's state holds the moment estimates
``mu_t, nu_t`` (``optax.ScaleByAdamState``) and the update it applied last was

.. math::

    u_t = -\\eta\\, \\frac{\\hat\\mu_t}{\\sqrt{\\hat\\nu_t + \\epsilon_{\\rm root}} + \\epsilon},
    \\qquad \\hat\\mu_t = \\frac{\\mu_t}{1-\\beta_1^t},\\ \\hat\\nu_t = \\frac{\\nu_t}{1-\\beta_2^t}.

The *effective step* of block ``b`` (one leaf) is the root mean square of ``u_t / eta``
over the block's ``P_b`` entries, :func:`adam_effective_step`. It is the size of Adam's
*normalised* update, of order one by construction whatever the block's curvature (a
coordinate whose gradient keeps its sign has ``|mu_hat| ~ sqrt(nu_hat)``).

**Adam's per-block rate.** The update is the momentum ``mu_hat`` times the per-coordinate
rate ``eta / (sqrt(nu_hat + eps_root) + eps)``: that rate, not the normalised update, is what
Adam sets per coordinate from the gradients' scale. :func:`adam_block_rate` gives its median
over each block's entries, per unit of ``eta`` (the rate the block gets; the median ignores the
few coordinates of zero gradient, whose rate is ``1 / eps``; the RMS does not). What a block's
gradient receives in one step, momentum included, is :func:`update_gradient_ratio`,
``|u_b| / |g_b|``.

**Block Hessian scales from one SLQ run** (:func:`xfmr.optimisers.blockwise.block_spectra`). Each
probe of a block is a Rademacher vector ``v`` and its Lanczos quadrature reproduces
``v^T H_bb^2 v / P_b = ||H_bb v||^2 / P_b`` exactly (from two steps on), so
``sqrt(P_b * second SLQ moment)`` is the Hutchinson estimate of the Frobenius norm
``||H_bb||_F`` from the same probes (:func:`slq_frobenius`); the top eigenvalue is the
largest node.

**Spread across blocks** of positive scales ``s_b``: ``log10(max_b s_b / min_b s_b)``
decades (:func:`spread_decades`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xfmr.optimisers.lanczos import SLQResult
from xfmr.core.validate import check_instance, check_int, check_real

__all__ = ["find_adam_state", "adam_effective_step", "adam_block_rate", "update_gradient_ratio",
           "slq_frobenius", "spread_decades"]


def find_adam_state(opt_state: Any) -> optax.ScaleByAdamState:
    """The first ``optax.ScaleByAdamState`` inside a (nested, e.g. ``optax.chain``) state."""
    if isinstance(opt_state, optax.ScaleByAdamState):
        return opt_state
    if isinstance(opt_state, (tuple, list)):
        for s in opt_state:
            try:
                return find_adam_state(s)
            except ValueError:
                pass
    raise ValueError("opt_state must contain an optax.ScaleByAdamState (from optax.adam or "
                     f"optax.scale_by_adam), got {type(opt_state).__name__}")


def adam_effective_step(opt_state: Any, *, b1: float = 0.9, b2: float = 0.999,
                        eps: float = 1e-8, eps_root: float = 0.0, batch_dims: int = 0) -> Any:
    """RMS over each block of ``u_t / eta`` (see the module docstring), from the state.

    Args:
        opt_state: a state holding an ``optax.ScaleByAdamState`` with ``count = t >= 1``
            (found by :func:`find_adam_state`); ``b1, b2, eps, eps_root`` must be those of
            the optimiser (optax defaults here).
        batch_dims: leading axes of every leaf that index independent models (e.g. ``1``
            for the stacked models of :mod:`xfmr.core.ensemble`); the RMS runs over the others.

    Returns:
        A pytree like the parameters whose leaves have the shape of the leading
        ``batch_dims`` axes (scalars for ``batch_dims=0``).
    """
    b1 = check_real(b1, "b1", minimum=0.0, maximum=1.0)
    state, t, b2, eps, eps_root, batch_dims = _adam_arguments(opt_state, b2, eps, eps_root, batch_dims)

    def rms(mu, nu):
        _check_batch_dims(mu, batch_dims)
        mu_hat = mu / (1 - b1 ** t)
        nu_hat = nu / (1 - b2 ** t)
        u = mu_hat / (jnp.sqrt(nu_hat + eps_root) + eps)
        axes = tuple(range(batch_dims, u.ndim))
        return jnp.sqrt(jnp.mean(jnp.square(u), axis=axes))

    return jax.tree_util.tree_map(rms, state.mu, state.nu)


def adam_block_rate(
    opt_state: Any,
    *,
    b2: float = 0.999,
    eps: float = 1e-8,
    eps_root: float = 0.0,
    batch_dims: int = 0,
    stat: str = "median",
) -> Any:
    """Median (or RMS) over each block of ``1 / (sqrt(nu_hat_t +
    eps_root) + eps)``, the per-coordinate rate of Adam per unit of
    learning rate (see the module docstring), from the state.

    Args:
        opt_state: a state holding an ``optax.ScaleByAdamState`` with
            ``count = t >= 1``; ``b2, eps, eps_root`` must be those of
            the optimiser (optax defaults here).
        batch_dims: leading axes of every leaf that index independent
            models; the median runs over the others.
        stat: ``"median"`` or ``"rms"`` (root mean square) over the
        block's coordinates.

    Returns:
        A pytree like the parameters whose leaves have the shape of the
        leading ``batch_dims`` axes.
    """
    if stat not in ("median", "rms"):
        raise ValueError(
            f"stat must be 'median' or 'rms', got {stat!r}"
        )
    state, t, b2, eps, eps_root, batch_dims = _adam_arguments(
        opt_state, b2, eps, eps_root, batch_dims
    )

    def rate(nu):
        _check_batch_dims(nu, batch_dims)
        r = 1.0 / (jnp.sqrt(nu / (1 - b2**t) + eps_root) + eps)
        r = r.reshape(r.shape[:batch_dims] + (-1,))
        if stat == "rms":
            return jnp.sqrt(jnp.mean(jnp.square(r), axis=-1))
        return jnp.median(r, axis=-1)

    return jax.tree_util.tree_map(rate, state.nu)


def update_gradient_ratio(updates: Any, grads: Any, *, batch_dims: int = 0) -> Any:
    """``|u_b| / |g_b|`` per block: the Euclidean norm of the update over that of the gradient.

    For SGD with learning rate ``eta`` (no momentum) it is ``eta`` on every block; for Adam
    it is the rate the block's gradient actually received in one step.

    Args:
        updates, grads: pytrees of the same structure and leaf shapes.
        batch_dims: leading axes that index independent models; the norms run over the others.

    Returns:
        A pytree of the leading ``batch_dims`` shapes (``inf`` where a gradient is zero).
    """
    batch_dims = check_int(batch_dims, "batch_dims", minimum=0)
    if jax.tree_util.tree_structure(updates) != jax.tree_util.tree_structure(grads):
        raise ValueError("updates and grads must have the same pytree structure")

    def ratio(u, g):
        if u.shape != g.shape:
            raise ValueError(f"updates and grads must have equal leaf shapes, got {u.shape} "
                             f"and {g.shape}")
        _check_batch_dims(u, batch_dims)
        axes = tuple(range(batch_dims, u.ndim))
        return (jnp.sqrt(jnp.sum(jnp.square(u), axis=axes))
                / jnp.sqrt(jnp.sum(jnp.square(g), axis=axes)))

    return jax.tree_util.tree_map(ratio, updates, grads)


def _adam_arguments(opt_state, b2, eps, eps_root, batch_dims):
    """The Adam state found in ``opt_state``, its step count ``t >= 1`` and the checked arguments."""
    state = find_adam_state(opt_state)
    b2 = check_real(b2, "b2", minimum=0.0, maximum=1.0)
    eps = check_real(eps, "eps", minimum=0.0)
    eps_root = check_real(eps_root, "eps_root", minimum=0.0)
    batch_dims = check_int(batch_dims, "batch_dims", minimum=0)
    t = int(state.count)
    if t < 1:
        raise ValueError(f"opt_state must come after at least one step (count >= 1), got {t}")
    return state, t, b2, eps, eps_root, batch_dims


def _check_batch_dims(leaf, batch_dims: int) -> None:
    if leaf.ndim < batch_dims:
        raise ValueError(f"batch_dims must be <= the rank of every leaf, got {batch_dims} "
                         f"for a leaf of shape {leaf.shape}")


def slq_frobenius(result: SLQResult) -> tuple[float, float]:
    """Hutchinson estimate of ``||H_bb||_F`` from an SLQ run of the block, with its
    standard error (delta method, over probes): ``sqrt(P m_2)`` with ``m_2`` the mean over
    probes of ``sum_k w_k theta_k^2`` (exact ``||H v||^2 / P`` per probe when ``m >= 2``).
    """
    check_instance(result, "result", SLQResult)
    per_probe = result.dim * np.sum(result.weights * np.asarray(result.nodes, float) ** 2, axis=1)
    norm = float(np.sqrt(per_probe.mean()))
    n = per_probe.shape[0]
    se = float(per_probe.std(ddof=1) / np.sqrt(n) / (2 * max(norm, np.finfo(float).tiny))) \
        if n > 1 else float("nan")
    return norm, se


def spread_decades(values: Any, axis: int = -1) -> np.ndarray:
    """``log10(max / min)`` of positive ``values`` along ``axis`` (decades)."""
    v = np.asarray(values, dtype=float)
    if v.ndim == 0 or v.shape[axis] == 0:
        raise ValueError(f"values must have a non-empty axis {axis}, got shape {v.shape}")
    if not np.all(v > 0) or not np.all(np.isfinite(v)):
        raise ValueError("values must be finite and positive")
    return np.log10(v.max(axis) / v.min(axis))
