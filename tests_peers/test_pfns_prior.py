"""Part IV's GP prior sampler against the authors' ``pfns`` package (its ``priors.fast_gp``,
the GP prior of the PFN paper), same hyperparameters.

``pfns`` is not in the peer lock (its requirements pull developer tools: black, pre-commit,
tensorboard); this module skips without it. To run it: a side virtual environment with the
peers' torch, ``pip install torch==2.13.0 pfns==0.4.2`` and the book's jax, jaxlib, optax and
hypothesis pins, ``pip install --no-deps -e .``, then ``pytest tests_peers/test_pfns_prior.py``.

The test: for each dataset, whiten y by the Cholesky factor L of our k(x, x) + noise I,
z = L^{-1} y. If a sampler draws y | x ~ N(0, k(x, x) + noise I) with our conventions
(outputscale and noise as variances, k = s^2 exp(-|x - x'|^2 / (2 l^2))), z ~ N(0, I): the
mean of z^2 is 1 (checked to 4 standard errors, sqrt(2 / N_z)) and z passes a
Kolmogorov-Smirnov test against N(0, 1) (p > 1e-3). x is checked uniform on [0, 1]^d by KS.
Power, stated and checked: the same test applied to our own sampler with the lengthscale 10 %
too long (or the noise given as a standard deviation) rejects.
"""

import pytest

torch = pytest.importorskip("torch")
fast_gp = pytest.importorskip("pfns.priors.fast_gp")  # not in the lock: see above

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from xfmr.bayesopt import gp, pfn_prior  # noqa: E402

HYPER = {"lengthscale": 0.2, "outputscale": 1.3, "noise": 0.01}
BATCH, SEQ, D = 1500, 6, 2


def _whitened(x, y, *, lengthscale, outputscale, noise):
    """z = L^{-1} y per dataset, L the Cholesky factor of our k(x, x) + noise I; (batch * seq,)."""
    x, y = jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.float64)

    def one(xi, yi):
        K = gp.rbf_kernel(xi, xi, lengthscale=lengthscale, outputscale=outputscale) + noise * jnp.eye(xi.shape[0])
        return jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(K), yi, lower=True)

    return np.asarray(jax.vmap(one)(x, y)).reshape(-1)


def _consistent(z) -> bool:
    """mean z^2 within 4 standard errors of 1, and a KS test against N(0, 1) not rejected."""
    return abs(np.mean(z**2) - 1.0) < 4 * np.sqrt(2.0 / z.size) and stats.kstest(z, "norm").pvalue > 1e-3


def _pfns_batch(seed):
    torch.manual_seed(seed)
    hp = {**HYPER, "sampling": "uniform", "fast_computations": (False, False, False)}
    batch = fast_gp.get_batch(BATCH, SEQ, D, device="cpu", hyperparameters=hp)
    x, y = batch.x.double().numpy(), batch.y.double().numpy()
    if x.shape[0] == SEQ:  # sequence-first layout
        x, y = x.transpose(1, 0, 2), y.transpose(1, 0)
    return x, y.reshape(BATCH, SEQ)


def test_pfns_gp_prior_is_ours():
    x, y = _pfns_batch(0)
    assert x.shape == (BATCH, SEQ, D)
    assert stats.kstest(x.reshape(-1), "uniform").pvalue > 1e-3
    assert _consistent(_whitened(x, y, **HYPER))


def test_our_gp_prior_passes_and_the_test_has_power():
    x, y = pfn_prior.sample_gp_datasets(jax.random.key(1), BATCH, SEQ, D, **HYPER)
    assert _consistent(_whitened(x, y, **HYPER))
    wrong_ls = {**HYPER, "lengthscale": 1.1 * HYPER["lengthscale"]}
    xw, yw = pfn_prior.sample_gp_datasets(jax.random.key(2), BATCH, SEQ, D, **wrong_ls)
    assert not _consistent(_whitened(xw, yw, **HYPER))
    wrong_noise = {**HYPER, "noise": HYPER["noise"] ** 0.5}
    xn, yn = pfn_prior.sample_gp_datasets(jax.random.key(3), BATCH, SEQ, D, **wrong_noise)
    assert not _consistent(_whitened(xn, yn, **HYPER))
