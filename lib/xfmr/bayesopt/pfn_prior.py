"""The prior a PFN is trained on: datasets from a Gaussian process.

A dataset is x_1..x_N uniform on [0, 1]^d and y = f(x) + eps with f ~ GP(0, RBF(l, s^2))
(the kernel :func:`xfmr.bayesopt.gp.rbf_kernel`) and eps ~ N(0, sigma^2). The lengthscale
and outputscale (and the noise) are fixed, or drawn per dataset from a *hyper-prior*:
:func:`loguniform_lengthscale` (the lengthscale only) or :func:`loguniform_hyperprior` (all
three). :func:`gp_dataset_sampler` turns the prior into the batch
sampler of :func:`xfmr.core.train.train`: one context size per batch, uniform on
0..max_context (as PFNs4BO samples it).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.bayesopt import gp
from xfmr.bayesopt.pfn_model import Datasets, PFNConfig
from xfmr.core import linalg
from xfmr.core.validate import check_float_dtype, check_int, check_real

__all__ = ["sample_gp_datasets", "loguniform_lengthscale", "loguniform_hyperprior", "gp_dataset_sampler"]

# added to the diagonal of the prior covariance, relative to the outputscale, so that its
# Cholesky factor exists for any lengthscale
_JITTER = 1e-5


def sample_gp_datasets(key, batch: int, n_points: int, d: int, *, lengthscale, outputscale, noise,
                       dtype=jnp.float64) -> tuple[jax.Array, jax.Array]:
    """x (batch, n_points, d) uniform on [0,1]^d and y (batch, n_points) from the GP prior with
    noise variance ``noise``, drawn in ``dtype`` (float64 needs ``jax_enable_x64``);
    ``lengthscale``/``outputscale``/``noise`` scalars or (batch,) arrays (a hyper-prior).

    y = L z, z ~ N(0, I), with L the Cholesky factor of k(x, x) + (noise + 1e-5 s^2) I.
    """
    batch = check_int(batch, "batch", minimum=1)
    n_points = check_int(n_points, "n_points", minimum=1)
    d = check_int(d, "d", minimum=1)
    dtype = check_float_dtype(dtype)
    kx, kf = jax.random.split(key)
    x = jax.random.uniform(kx, (batch, n_points, d), dtype)
    ls = jnp.broadcast_to(jnp.asarray(lengthscale, dtype), (batch,))
    os_ = jnp.broadcast_to(jnp.asarray(outputscale, dtype), (batch,))
    nz = jnp.broadcast_to(jnp.asarray(noise, dtype), (batch,))

    def one(k, xi, l, s, e):
        K = gp.rbf_kernel(xi, xi, lengthscale=l, outputscale=s) + (e + _JITTER * s) * jnp.eye(n_points, dtype=dtype)
        return linalg.cholesky(K) @ jax.random.normal(k, (n_points,), dtype)

    return x, jax.vmap(one)(jax.random.split(kf, batch), x, ls, os_, nz)


def loguniform_lengthscale(ls_min: float, ls_max: float, outputscale: float = 1.0, *,
                           dtype=jnp.float64) -> Callable:
    """A hyper-prior: lengthscale log-uniform on [ls_min, ls_max], outputscale fixed.

    Returns ``hyperprior(key, batch) -> (lengthscale (batch,), outputscale (batch,))`` in ``dtype``.
    """
    ls_min = check_real(ls_min, "ls_min", minimum=0.0, strict_minimum=True)
    ls_max = check_real(ls_max, "ls_max", minimum=ls_min, strict_minimum=True)
    outputscale = check_real(outputscale, "outputscale", minimum=0.0, strict_minimum=True)
    dtype = check_float_dtype(dtype)

    def hyperprior(key, batch):
        u = jax.random.uniform(key, (batch,), dtype)
        return jnp.exp(np.log(ls_min) + u * (np.log(ls_max) - np.log(ls_min))), jnp.full((batch,), outputscale, dtype)
    return hyperprior


def loguniform_hyperprior(lengthscale: tuple[float, float], outputscale: tuple[float, float],
                          noise: tuple[float, float], *, dtype=jnp.float64) -> Callable:
    """A hyper-prior on all three hyperparameters, independent and each log-uniform on its
    (low, high) box.

    Returns ``hyperprior(key, batch) -> (lengthscale, outputscale, noise)``, each (batch,) in
    ``dtype``.
    """
    boxes = []
    for box, name in ((lengthscale, "lengthscale"), (outputscale, "outputscale"), (noise, "noise")):
        if len(box) != 2:
            raise ValueError(f"{name} must be a (low, high) pair, got {box!r}")
        lo = check_real(box[0], f"{name}[0]", minimum=0.0, strict_minimum=True)
        hi = check_real(box[1], f"{name}[1]", minimum=lo, strict_minimum=True)
        boxes.append((np.log(lo), np.log(hi)))
    dtype = check_float_dtype(dtype)

    def hyperprior(key, batch):
        u = jax.random.uniform(key, (3, batch), dtype)
        return tuple(jnp.exp(a + u[i] * (b - a)) for i, (a, b) in enumerate(boxes))
    return hyperprior


def gp_dataset_sampler(config: PFNConfig, batch: int, *, lengthscale, outputscale, noise,
                       hyperprior: Callable | None = None, dtype=jnp.float64,
                       model_dtype=jnp.float32) -> Callable[[jax.Array], Datasets]:
    """``sample(key) -> Datasets(x, y, n_ctx)`` for :func:`xfmr.core.train.train`: ``batch``
    datasets of ``config.n_points`` points in ``config.d_in`` dimensions (:func:`sample_gp_datasets`,
    drawn in ``dtype``, returned in ``model_dtype``), one context size per batch, uniform on
    0..config.max_context. ``hyperprior(key, batch) -> (lengthscale, outputscale)`` or
    ``(lengthscale, outputscale, noise)`` (arrays of shape (batch,)) overrides the fixed
    values when given.
    """
    batch = check_int(batch, "batch", minimum=1)
    model_dtype = check_float_dtype(model_dtype, "model_dtype")

    def sample(key):
        kn, kh, kd = jax.random.split(key, 3)
        n_ctx = jax.random.randint(kn, (), 0, config.max_context + 1)
        drawn = (lengthscale, outputscale) if hyperprior is None else hyperprior(kh, batch)
        ls, os_, nz = (*drawn, noise) if len(drawn) == 2 else drawn
        x, y = sample_gp_datasets(kd, batch, config.n_points, config.d_in,
                                  lengthscale=ls, outputscale=os_, noise=nz, dtype=dtype)
        return Datasets(x.astype(model_dtype), y.astype(model_dtype), n_ctx)
    return sample
