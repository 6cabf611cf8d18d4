"""Distributions on a finite alphabet and the divergences between them.

A distribution on $K$ outcomes is a vector $p \\in \\Delta^{K-1} = \\{p \\in \\mathbb{R}^K :
p_k \\ge 0, \\sum_k p_k = 1\\}$; every function here acts on the last axis and broadcasts over
the leading ones. Conventions: $0 \\log 0 = 0$, and $p_k \\log (p_k / 0) = +\\infty$ for $p_k > 0$.

$$
H(p) = -\\sum_k p_k \\log p_k, \\qquad
\\mathrm{CE}(p, q) = -\\sum_k p_k \\log q_k = H(p) + \\mathrm{KL}(p \\,\\|\\, q),
$$
$$
\\mathrm{KL}(p \\,\\|\\, q) = \\sum_k p_k \\log \\frac{p_k}{q_k}, \\qquad
\\mathrm{TV}(p, q) = \\tfrac12 \\sum_k |p_k - q_k| .
$$

Concrete (non-traced) inputs are validated: entries must be non-negative and sum to one up to
a dtype-dependent tolerance ($\\sqrt{\\varepsilon}$ of the dtype); under ``jit`` no checks run.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import is_concrete

__all__ = [
    "check_distribution",
    "histogram",
    "entropy",
    "cross_entropy",
    "kl_divergence",
    "total_variation",
]


def _as_float(x, name: str) -> jax.Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    if x.ndim < 1:
        raise ValueError(f"{name} must have at least 1 dimension (..., K), got shape {x.shape}")
    return x


def simplex_atol(dtype) -> float:
    """Tolerance on $|\\sum_k p_k - 1|$ for ``dtype``: $\\sqrt{\\varepsilon}$."""
    return float(np.sqrt(jnp.finfo(dtype).eps))


def check_distribution(p, name: str = "p") -> jax.Array:
    """Return ``p`` as a float array after checking it lies on the simplex along its last axis.

    Args:
        p: ``(..., K)`` array of probabilities.
        name: the argument's name, used in error messages.

    Raises:
        ValueError: ``p`` is 0-D, has a negative or non-finite entry, or a row that does not sum
            to one (checked only for concrete, non-traced inputs).
    """
    p = _as_float(p, name)
    if is_concrete(p):
        a = np.asarray(p)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite probabilities, got non-finite entries")
        if np.any(a < 0):
            raise ValueError(f"{name} must be non-negative (a distribution), got min entry {a.min():.3g}")
        err = float(np.max(np.abs(a.sum(-1) - 1.0)))
        if err > simplex_atol(p.dtype):
            raise ValueError(
                f"{name} must sum to 1 along its last axis (a distribution), off by up to {err:.3g}"
            )
    return p


def _check_pair(p, q) -> tuple[jax.Array, jax.Array]:
    p = check_distribution(p, "p")
    q = check_distribution(q, "q")
    if p.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"p and q must have the same number of outcomes K (last axis), got p {p.shape} and q {q.shape}"
        )
    try:
        np.broadcast_shapes(p.shape, q.shape)
    except ValueError:
        raise ValueError(f"p and q must have broadcastable shapes, got p {p.shape} and q {q.shape}") from None
    return p, q


def histogram(counts) -> jax.Array:
    """Empirical distribution $\\hat p_k = n_k / N$, $N = \\sum_k n_k$, along the last axis.

    Args:
        counts: ``(..., K)`` non-negative counts (integers or floats), each row with $N > 0$.

    Returns:
        ``(..., K)`` float array on the simplex (float dtype of ``counts``, default float otherwise).

    Raises:
        ValueError: negative counts, non-finite counts, or a row with total count 0.
    """
    c = _as_float(counts, "counts")
    if is_concrete(c):
        a = np.asarray(c)
        if not np.all(np.isfinite(a)):
            raise ValueError("counts must be finite, got non-finite entries")
        if np.any(a < 0):
            raise ValueError(f"counts must be non-negative, got min count {a.min():.3g}")
        if np.any(a.sum(-1) <= 0):
            raise ValueError("counts must have a positive total along the last axis, got a row summing to 0")
    return c / c.sum(-1, keepdims=True)


def entropy(p) -> jax.Array:
    """Shannon entropy $H(p) = -\\sum_k p_k \\log p_k$ in nats; ``(..., K) -> (...)``."""
    p = check_distribution(p, "p")
    safe = jnp.where(p > 0, p, 1.0)
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(safe), 0.0), axis=-1)


def cross_entropy(p, q) -> jax.Array:
    """Cross-entropy $\\mathrm{CE}(p, q) = -\\sum_k p_k \\log q_k$ in nats; ``(..., K) -> (...)``.

    Terms with $p_k = 0$ contribute 0; a term with $p_k > 0 = q_k$ gives $+\\infty$.
    """
    p, q = _check_pair(p, q)
    safe_q = jnp.where(p > 0, q, 1.0)
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(safe_q), 0.0), axis=-1)


def kl_divergence(p, q) -> jax.Array:
    """Kullback-Leibler divergence $\\mathrm{KL}(p \\| q) = \\sum_k p_k \\log(p_k / q_k) \\ge 0$.

    ``(..., K), (..., K) -> (...)``; $+\\infty$ when $q_k = 0 < p_k$ for some $k$.
    """
    p, q = _check_pair(p, q)
    pos = p > 0
    safe_p = jnp.where(pos, p, 1.0)
    safe_q = jnp.where(pos, q, 1.0)
    return jnp.sum(jnp.where(pos, p * (jnp.log(safe_p) - jnp.log(safe_q)), 0.0), axis=-1)


def total_variation(p, q) -> jax.Array:
    """Total variation distance $\\tfrac12 \\sum_k |p_k - q_k| \\in [0, 1]$; ``(..., K) -> (...)``."""
    p, q = _check_pair(p, q)
    return 0.5 * jnp.sum(jnp.abs(p - q), axis=-1)
