r"""The K-hop induction-head task (Sanford, Hsu, Telgarsky, ICML 2024).

For a sequence :math:`x_0 \dots x_{n-1}` over an alphabet :math:`\Sigma = \{0, \dots, S-1\}`
the *pointer map* is

.. math::

    \mathrm{find}(p) = 1 + \max\{j < p : x_j = x_p\}  \qquad (\text{null if there is none}),

null is absorbing, and :math:`\mathrm{hop}_k(x)_i = x_{\mathrm{find}^k(i)}`, or :data:`BOTTOM`
(the symbol :math:`\bot`) when the chain of pointers hits null. ``hop_0`` is the identity.
Note the trap: hop :math:`r+1` searches *before the current pointer*
:math:`\mathrm{find}^r(i)`, not before :math:`i`.

This module holds the task: the reference implementation (:func:`find`, :func:`hop`), the
pointer maps :math:`\mathrm{find}^e` (:func:`find_power`) and the data distribution of the
paper (:func:`sample_khop_sequences`). The explicit transformer that computes
:math:`\mathrm{hop}_k` is in :mod:`xfmr.khop.construction`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import check_int, check_tokens

Array = jax.Array

BOTTOM: int = -1
"""The integer that stands for :math:`\\bot` in outputs (tokens are ``0 .. S-1``)."""

NULL: int = -1
"""The null pointer returned by :func:`find`."""


def _tokens(x: Any, name: str = "x") -> Array:
    """Integer tokens >= 0 of shape (n,) or (batch, n) (values checked when concrete)."""
    return check_tokens(x, name, ndim=(1, 2))


# ----------------------------------------------------------------------------- the task
def _find_1d(x: Array) -> Array:
    # Stable sort groups equal tokens in order of position; the predecessor in the sorted
    # order with the same token is the previous occurrence.
    order = jnp.argsort(x, stable=True)
    xs = x[order]
    prev = jnp.where(xs[1:] == xs[:-1], order[:-1] + 1, NULL)
    ptr_sorted = jnp.concatenate([jnp.full((1,), NULL, order.dtype), prev])
    return jnp.zeros_like(order).at[order].set(ptr_sorted)


@jax.jit
def _find(x: Array) -> Array:
    return _find_1d(x) if x.ndim == 1 else jax.vmap(_find_1d)(x)


def find(x: Any) -> Array:
    r"""Pointer map :math:`\mathrm{find}(p) = 1 + \max\{j < p : x_j = x_p\}`.

    Args:
      x: integer tokens >= 0, shape (n,) or (batch, n).

    Returns:
      int array of the same shape; entry p is find(p), or :data:`NULL` (= -1) if x_p has no
      earlier occurrence. Note find(p) <= p, with equality iff x_{p-1} = x_p.
      Cost O(n log n) (one stable sort), vectorised over the batch.
    """
    return _find(_tokens(x))


@jax.jit
def _find_power(x: Array, e: Array) -> Array:
    f = _find(x)
    p0 = jnp.broadcast_to(
        jnp.arange(x.shape[-1], dtype=f.dtype), f.shape
    )

    def step(_, p):  # one hop: O(n) gather; null (-1) is absorbing
        return jnp.where(
            p >= 0,
            jnp.take_along_axis(f, jnp.maximum(p, 0), axis=-1),
            NULL,
        )

    return jax.lax.fori_loop(0, e, step, p0)


def find_power(x: Any, e: int) -> Array:
    r"""The pointer map iterated ``e`` times, :math:`\mathrm{find}^e` (null absorbing).

    Args:
      x: integer tokens >= 0, shape (n,) or (batch, n).
      e: number of applications, an integer >= 0 (``find_power(x, 0)`` is ``arange(n)``).

    Returns:
      int array of x's shape: entry i is :math:`\mathrm{find}^e(i)`, or :data:`NULL`.
      Cost: one pointer map, then e gathers of O(n) each.
    """
    e = check_int(e, "e", minimum=0)
    return _find_power(_tokens(x), jnp.asarray(e, jnp.int32))


@jax.jit
def _hop(x: Array, k: Array) -> Array:
    p = _find_power(x, k)
    return jnp.where(
        p >= 0,
        jnp.take_along_axis(x, jnp.maximum(p, 0), axis=-1),
        BOTTOM,
    ).astype(x.dtype)


def hop(x: Any, k: int) -> Array:
    r""":math:`\mathrm{hop}_k(x)_i = x_{\mathrm{find}^k(i)}`, or :data:`BOTTOM` if undefined.

    Args:
      x: integer tokens >= 0, shape (n,) or (batch, n).
      k: number of hops, an integer >= 0 (``hop(x, 0)`` is ``x``).

    Returns:
      array of x's shape and dtype. Cost: one pointer map, then k gathers of O(n) each.
    """
    k = check_int(k, "k", minimum=0)
    return _hop(_tokens(x), jnp.asarray(k, jnp.int32))


def hop_all(x: Any, k_max: int) -> Array:
    r"""All of :math:`\mathrm{hop}_0, \dots, \mathrm{hop}_{k_{max}}` in one pass.

    Args:
      x: integer tokens >= 0, shape (n,) or (batch, n) (may be traced: usable under jit).
      k_max: largest number of hops, integer >= 0.

    Returns:
      array (k_max + 1,) + x.shape; entry k is ``hop(x, k)``. Cost O(k_max n).
    """
    k_max = check_int(k_max, "k_max", minimum=0)
    return _hop_all(_tokens(x), k_max)


@partial(jax.jit, static_argnums=1)
def _hop_all(x: Array, k_max: int) -> Array:
    f = _find(x)
    p = jnp.broadcast_to(jnp.arange(x.shape[-1], dtype=f.dtype), f.shape)

    def step(p, _):
        y = jnp.where(p >= 0, jnp.take_along_axis(x, jnp.maximum(p, 0), axis=-1), BOTTOM).astype(x.dtype)
        return jnp.where(p >= 0, jnp.take_along_axis(f, jnp.maximum(p, 0), axis=-1), NULL), y

    return jax.lax.scan(step, p, None, length=k_max + 1)[1]


def hop_before_i(x: Any, k: int) -> Array:
    r"""The *wrong* reading of the definition (for illustration): hop r+1 searches for the
    current token before position i instead of before the current pointer.

    With :math:`t_0 = x_i`, :math:`t_{r+1} = x_{j+1}` for the last :math:`j < i` with
    :math:`x_j = t_r` (:data:`BOTTOM` if none). Shapes as in :func:`hop`; plain O(k n^2)
    numpy, meant for short examples only.
    """
    k = check_int(k, "k", minimum=0)
    xs = np.asarray(_tokens(x))
    flat = xs.reshape(-1, xs.shape[-1])
    out = np.full_like(flat, BOTTOM)
    for b, row in enumerate(flat):
        for i in range(row.shape[0]):
            t = int(row[i])
            for _ in range(k):
                js = np.nonzero(row[:i] == t)[0]
                if js.size == 0:
                    t = BOTTOM
                    break
                t = int(row[js[-1] + 1])
            out[b, i] = t
    return jnp.asarray(out.reshape(xs.shape))


def sample_khop_sequences(key: Array, batch: int, n: int, alphabet_size: int) -> Array:
    r"""The paper's data: tokens uniform over :math:`\Sigma`, no two equal neighbours.

    :math:`x_0 \sim U(\Sigma)` and :math:`x_{t+1} = x_t + u_t \bmod S` with
    :math:`u_t \sim U\{1, \dots, S-1\}`, i.e. :math:`x_{t+1}` is uniform over the other
    :math:`S - 1` symbols.

    Returns:
      int32 array (batch, n).
    """
    batch = check_int(batch, "batch", minimum=1)
    n = check_int(n, "n", minimum=1)
    alphabet_size = check_int(alphabet_size, "alphabet_size", minimum=2)
    if n * alphabet_size >= 2**31:
        raise ValueError(f"n * alphabet_size must be < 2**31 (int32 cumulative sums), got n={n}, alphabet_size={alphabet_size}")
    return _sample(key, batch, n, alphabet_size)


@partial(jax.jit, static_argnums=(1, 2))
def _sample(key: Array, batch: int, n: int, alphabet_size: Array) -> Array:
    k0, k1 = jax.random.split(key)
    first = jax.random.randint(k0, (batch, 1), 0, alphabet_size, dtype=jnp.int32)
    steps = jax.random.randint(k1, (batch, n - 1), 1, alphabet_size, dtype=jnp.int32)
    return jnp.cumsum(jnp.concatenate([first, steps], axis=1), axis=1) % alphabet_size
