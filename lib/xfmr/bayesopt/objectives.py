"""Test functions for Bayesian optimisation on the unit cube (to be *minimised*; the loop
maximises -f).

- :func:`branin`: d = 2, x in [0,1]^2 mapped to [-5,10] x [0,15]; three global minima,
  f* = 0.397887 (:data:`BRANIN_MIN`).
- :func:`hartmann3`: d = 3 on [0,1]^3, f* = -3.86278 (:data:`HARTMANN3_MIN`).
- :func:`forrester`: d = 1 on [0,1], f* = -6.020740 at x = 0.757249 (:data:`FORRESTER_MIN`).
- :func:`gp_sample_on_grid`: a sample path of the GP prior on a fixed candidate set (the
  well-specified case): f values at every candidate, so the minimum is known exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.bayesopt import gp
from xfmr.core import linalg
from xfmr.core.validate import check_array, check_float_dtype, check_real, is_concrete

__all__ = ["forrester", "FORRESTER_MIN", "branin", "hartmann3", "gp_sample_on_grid", "BRANIN_MIN", "HARTMANN3_MIN",
           "BRANIN_MINIMISERS"]

BRANIN_MIN = 0.397887
HARTMANN3_MIN = -3.86278
FORRESTER_MIN = -6.020740
BRANIN_MINIMISERS = np.array([[-np.pi, 12.275], [np.pi, 2.275], [9.42478, 2.475]])
"""The three minimisers in the original domain [-5, 10] x [0, 15]."""


def _finite(x, name):
    """NumPy check (also correct while a caller is traced, where a jnp check would be staged)."""
    if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError(f"{name} must be finite")
    return x


def _unit(x, d, name="x"):
    x = _finite(check_array(x, name, ndim=(1, 2), kind="number"), name)
    if x.shape[-1] != d:
        raise ValueError(f"{name} must have d = {d} columns (last axis), got shape {x.shape}")
    return x


def forrester(x) -> jax.Array:
    """Forrester et al. (2008): (6x - 2)^2 sin(12x - 4) on [0, 1]; x (..., 1) -> (...,)."""
    x = _unit(x, 1)[..., 0]
    return (6.0 * x - 2.0) ** 2 * jnp.sin(12.0 * x - 4.0)


def branin(x) -> jax.Array:
    """Branin on the unit square; x (..., 2) -> (...,)."""
    x = _unit(x, 2)
    x1, x2 = 15.0 * x[..., 0] - 5.0, 15.0 * x[..., 1]
    b, c = 5.1 / (4 * np.pi**2), 5.0 / np.pi
    r, s, t = 6.0, 10.0, 1.0 / (8 * np.pi)
    return (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * jnp.cos(x1) + s


_H3_A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
_H3_P = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]])
_H3_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann3(x) -> jax.Array:
    """Hartmann-3 on [0,1]^3; x (..., 3) -> (...,)."""
    x = _unit(x, 3)
    inner = jnp.sum(_H3_A * (x[..., None, :] - _H3_P) ** 2, axis=-1)
    return -jnp.sum(_H3_ALPHA * jnp.exp(-inner), axis=-1)


def gp_sample_on_grid(key, candidates, *, lengthscale, outputscale, jitter: float = 1e-8,
                      dtype=jnp.float64) -> jax.Array:
    """f(candidates) for one sample path of GP(0, RBF(lengthscale, outputscale)), shape (m,).

    f = L z with L the Cholesky factor of k(C, C) + jitter * outputscale * I
    (:func:`xfmr.bayesopt.gp.rbf_kernel`) and z ~ N(0, I), drawn in ``dtype`` (float64 needs
    ``jax_enable_x64``).
    """
    candidates = _finite(check_array(candidates, "candidates", ndim=2, kind="number"), "candidates")
    check_real(jitter, "jitter", minimum=0.0)
    C = candidates.astype(check_float_dtype(dtype))
    K = gp.rbf_kernel(C, C, lengthscale=lengthscale, outputscale=outputscale)
    L = linalg.cholesky(K + jitter * outputscale * jnp.eye(K.shape[0], dtype=K.dtype))
    if is_concrete(L) and not np.all(np.isfinite(np.asarray(L))):
        raise ValueError(f"the prior covariance on candidates is not positive definite after jitter {jitter:.3g}")
    return L @ jax.random.normal(key, (K.shape[0],), K.dtype)
