"""How close a PFN is to the GP posterior predictive of its (fixed-hyperparameter) prior.

For datasets (x, y) of N points, the first ``n`` are the context and the last ``n_queries``
the queries. At each query, with the exact GP posterior predictive N(mu, v + sigma^2) under
the true hyperparameters and its binned version p (:func:`xfmr.bayesopt.bar.binned_normal`):

- exact NLL  -log N(y; mu, v + sigma^2),
- binned NLL -log p_b(y) + log w_b  (the best any bar distribution on these buckets can do),
- PFN NLL    -log q_b(y) + log w_b,
- KL(p || q) from the binned GP to the PFN (what training can reduce),

each averaged over queries and datasets (:func:`kl_at`), for several context sizes
(:func:`kl_table`). The binned minus the exact NLL is the bucket *floor*.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm

from xfmr.bayesopt import bar, gp
from xfmr.bayesopt.pfn_model import Datasets, PFNConfig, forward
from xfmr.core.validate import check_array, check_int

__all__ = ["COLUMNS", "kl_at", "kl_table"]

COLUMNS = ("exact GP NLL", "binned GP NLL", "PFN NLL", "KL(binned GP || PFN)")


def kl_at(n, params, config: PFNConfig, borders, x, y, *, lengthscale, outputscale, noise,
          n_queries: int = 10) -> jax.Array:
    """The four numbers of :data:`COLUMNS` (4,) at context size ``n`` (traceable in ``n``),
    for x (batch, N, d), y (batch, N) in float64 and ``borders`` (B + 1,)."""
    N = x.shape[1]
    n_ctx = N - n_queries
    b64 = borders.astype(jnp.float64)
    logw = jnp.log(jnp.diff(b64))
    mask = (jnp.arange(n_ctx) < n).astype(jnp.float64)

    def one(xi, yi):
        m, v = gp.masked_posterior(xi[:n_ctx], yi[:n_ctx], mask, xi[n_ctx:], lengthscale=lengthscale,
                                   outputscale=outputscale, noise=noise)
        return m, jnp.sqrt(v + noise)

    mu, sd = jax.vmap(one)(x, y)
    yq = y[:, n_ctx:]
    exact = -jnp.mean(norm.logpdf(yq, mu, sd))
    p = bar.binned_normal(mu, sd, b64)
    i = bar.bucket_index(yq, b64)
    p_i = jnp.take_along_axis(p, i[..., None], -1)[..., 0]
    binned = -jnp.mean(jnp.log(jnp.clip(p_i, 1e-300)) - logw[i])
    logits = forward(params, Datasets(x.astype(jnp.float32), y.astype(jnp.float32), n), config)
    logits = logits[:, n_ctx:].astype(jnp.float64)
    logq = jax.nn.log_softmax(logits, -1)
    model = -jnp.mean(jnp.take_along_axis(logq, i[..., None], -1)[..., 0] - logw[i])
    return jnp.stack([exact, binned, model, jnp.mean(bar.kl_from_masses(p, logits))])


def kl_table(params, config: PFNConfig, borders, x, y, n_values, *, lengthscale, outputscale, noise,
             n_queries: int = 10) -> np.ndarray:
    """:func:`kl_at` for every context size of ``n_values``: an array (len(n_values), 4),
    compiled once (``n`` is traced)."""
    n_queries = check_int(n_queries, "n_queries", minimum=1)
    x = check_array(x, "x", ndim=3, kind="float")
    y = check_array(y, "y", ndim=2, kind="float")
    if x.shape[:2] != y.shape or x.shape[2] != config.d_in:
        raise ValueError(f"x must have shape (batch, N, d_in={config.d_in}) and y (batch, N), "
                         f"got {x.shape} and {y.shape}")
    if any(not 0 <= n <= x.shape[1] - n_queries for n in n_values):
        raise ValueError(f"n_values must lie in 0..{x.shape[1] - n_queries} (N - n_queries), got {list(n_values)}")
    f = jax.jit(lambda n: kl_at(n, params, config, borders, x, y, lengthscale=lengthscale,
                                outputscale=outputscale, noise=noise, n_queries=n_queries))
    return np.array([np.asarray(f(n)) for n in n_values])
