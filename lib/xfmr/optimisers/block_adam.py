"""Block-wise Adam: one second-moment scalar per parameter block (as Adam-mini).

Adam keeps, for every coordinate ``i``, moving averages of the gradient and of its square
and steps by ``eta * m_hat_i / (sqrt(v_hat_i) + eps)``. Block-wise Adam (the rule of
Adam-mini, Zhang et al. 2024, arXiv 2406.16793) keeps the first moment per coordinate but
ONE second moment per block ``b`` (a leaf of the parameter pytree), the moving average of
the block's mean squared gradient:

.. math::

    m_t = \\beta_1 m_{t-1} + (1-\\beta_1) g_t, \\qquad
    v_{b,t} = \\beta_2 v_{b,t-1} + (1-\\beta_2) \\frac{1}{P_b}\\sum_{i \\in b} g_{t,i}^2,

    u_{t,i} = \\frac{m_t / (1-\\beta_1^t)}{\\sqrt{v_{b,t} / (1-\\beta_2^t)} + \\epsilon}
    \\quad (i \\in b).

So every coordinate of a block gets the same rate ``eta / (sqrt(v_hat_b) + eps)``: a
per-block learning rate that adapts during training, the adaptive form of "one learning
rate per block". :func:`scale_by_block_adam` returns it as an optax transformation (chain
it with ``optax.scale(-eta)``). Leaves chosen by ``coordinatewise(path)`` keep Adam's
per-coordinate second moment instead (Adam-mini does so for the embedding and output
layers). Adam-mini also splits the query and key weights into one block per attention head;
with one head, as in Part I's GPT, the head is the whole matrix.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from xfmr.core.validate import check_int, check_real
from xfmr.optimisers.blockwise import leaf_paths

__all__ = ["ScaleByBlockAdamState", "scale_by_block_adam"]


class ScaleByBlockAdamState(NamedTuple):
    """``count`` (int32 scalar), ``mu`` (like the parameters), ``nu`` (per leaf: the leading
    ``batch_dims`` shape for a block leaf, the leaf's shape for a coordinate-wise one)."""

    count: jax.Array
    mu: Any
    nu: Any


def scale_by_block_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *,
                        batch_dims: int = 0,
                        coordinatewise: Optional[Callable[[tuple], bool]] = None
                        ) -> optax.GradientTransformation:
    """Block-wise Adam's normalised update (see the module docstring).

    Args:
        b1, b2: decay rates of the first and second moments, in ``[0, 1)``.
        eps: added to the square root of the bias-corrected second moment, ``>= 0``.
        batch_dims: leading axes of every leaf that index independent models (stacked
            models, :mod:`xfmr.core.ensemble`); the block mean runs over the other axes.
        coordinatewise: ``path -> bool`` (paths as :func:`leaf_paths` gives them); a leaf for
            which it is true keeps a per-coordinate second moment (ordinary Adam). ``None``:
            every leaf is one block.

    Returns:
        An ``optax.GradientTransformation``; its updates are ``m_hat / (sqrt(v_hat) + eps)``.
    """
    b1 = check_real(b1, "b1", minimum=0.0, maximum=1.0)
    b2 = check_real(b2, "b2", minimum=0.0, maximum=1.0)
    eps = check_real(eps, "eps", minimum=0.0)
    batch_dims = check_int(batch_dims, "batch_dims", minimum=0)
    if coordinatewise is not None and not callable(coordinatewise):
        raise TypeError("coordinatewise must be None or a callable path -> bool, got "
                        f"{type(coordinatewise).__name__}")

    def flags(tree):
        if coordinatewise is None:
            return [False] * len(jax.tree_util.tree_leaves(tree))
        return [bool(coordinatewise(p)) for p in leaf_paths(tree)]

    def second(g, coord):
        if g.ndim < batch_dims:
            raise ValueError(f"batch_dims must be <= the rank of every leaf, got {batch_dims} "
                             f"for a leaf of shape {g.shape}")
        if coord:
            return jnp.square(g)
        return jnp.mean(jnp.square(g), axis=tuple(range(batch_dims, g.ndim)))

    def init_fn(params):
        leaves, treedef = jax.tree_util.tree_flatten(params)
        for x in leaves:
            if x.ndim < batch_dims:
                raise ValueError(f"batch_dims must be <= the rank of every leaf, got "
                                 f"{batch_dims} for a leaf of shape {x.shape}")
        nu = [jnp.zeros_like(x) if c else jnp.zeros(x.shape[:batch_dims], x.dtype)
              for x, c in zip(leaves, flags(params))]
        return ScaleByBlockAdamState(jnp.zeros((), jnp.int32),
                                     jax.tree_util.tree_map(jnp.zeros_like, params),
                                     jax.tree_util.tree_unflatten(treedef, nu))

    def update_fn(updates, state, params=None):
        del params
        g, treedef = jax.tree_util.tree_flatten(updates)
        mu = jax.tree_util.tree_leaves(state.mu)
        nu = jax.tree_util.tree_leaves(state.nu)
        count = state.count + 1
        out, new_mu, new_nu = [], [], []
        for gi, mi, ni, c in zip(g, mu, nu, flags(updates)):
            mi = b1 * mi + (1 - b1) * gi
            ni = b2 * ni + (1 - b2) * second(gi, c)
            t = count.astype(mi.dtype)
            m_hat = mi / (1 - b1 ** t)
            v_hat = ni / (1 - b2 ** t)
            v_hat = v_hat.reshape(v_hat.shape + (1,) * (gi.ndim - v_hat.ndim))
            out.append(m_hat / (jnp.sqrt(v_hat) + eps))
            new_mu.append(mi)
            new_nu.append(ni)
        unflat = jax.tree_util.tree_unflatten
        return unflat(treedef, out), ScaleByBlockAdamState(count, unflat(treedef, new_mu),
                                                           unflat(treedef, new_nu))

    return optax.GradientTransformation(init_fn, update_fn)
