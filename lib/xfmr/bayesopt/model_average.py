"""The exact Bayesian model average over a GP's hyperparameters, on buckets.

With hyperparameters theta = (lengthscale, outputscale, noise) drawn from a hyper-prior
p(theta), the posterior predictive of a query y given a context D is the mixture

    p(y | x, D) = sum_k w_k p(y | x, D, theta_k),   w_k proportional to c_k p(D | theta_k),

over nodes theta_k with prior weights c_k: a quadrature rule of p(theta) (a product grid of
midpoints in log space, :func:`log_grid`, equal weights for a log-uniform prior) or draws from
the prior (importance sampling with the prior as proposal, c_k = 1). Each component is the
GP posterior predictive N(mu_k, v_k + noise_k), integrated over the buckets
(:func:`xfmr.bayesopt.bar.binned_normal`), so the average is a bar distribution on the same
buckets as a PFN's. The *plug-in* (type-II maximum likelihood over the nodes) keeps only the
node of largest evidence p(D | theta_k).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from xfmr.bayesopt import bar, gp
from xfmr.core.validate import check_array, check_int

__all__ = ["Average", "log_grid", "model_average", "effective_sample_size"]


class Average(NamedTuple):
    """Result of :func:`model_average` for one context.

    Attributes:
        bma: bucket masses of the model average at the queries, (m, B).
        plugin: bucket masses of the node of largest evidence, (m, B).
        log_weights: normalised log posterior weights of the nodes, (K,).
    """

    bma: jax.Array
    plugin: jax.Array
    log_weights: jax.Array


def log_grid(boxes, sizes) -> jax.Array:
    """Nodes (prod(sizes), 3) of the product midpoint rule in log space on the boxes
    ((low, high) per hyperparameter): for a log-uniform prior every node has equal weight.

    Node j of axis i is exp(log low + (j + 1/2) (log high - log low) / size).
    """
    if len(boxes) != len(sizes):
        raise ValueError(f"boxes and sizes must have the same length, got {len(boxes)} and {len(sizes)}")
    axes = []
    for (lo, hi), size in zip(boxes, sizes):
        size = check_int(size, "sizes", minimum=1)
        if not 0 < lo < hi:
            raise ValueError(f"each box must satisfy 0 < low < high, got ({lo}, {hi})")
        t = (np.arange(size) + 0.5) / size
        axes.append(np.exp(np.log(lo) + t * (np.log(hi) - np.log(lo))))
    mesh = np.meshgrid(*axes, indexing="ij")
    return jnp.asarray(np.stack([m.reshape(-1) for m in mesh], axis=1), jnp.float64)


def model_average(X, y, mask, X_star, nodes, borders, log_prior=None) -> Average:
    """The model average and the plug-in over ``nodes`` (K, 3) = (lengthscale, outputscale,
    noise) for the context rows of X (n, d), y (n,) where ``mask`` is 1, at X_star (m, d), on
    ``borders`` (B + 1,). ``log_prior`` (K,): log prior weights of the nodes (None: equal).

    Traceable (jit/vmap); masses in the dtype of X (float64 advised).
    """
    nodes = check_array(nodes, "nodes", ndim=2, kind="float")
    if nodes.shape[1] != 3:
        raise ValueError(f"nodes must have 3 columns (lengthscale, outputscale, noise), got shape {nodes.shape}")
    borders = bar.check_borders(borders).astype(X.dtype)
    log_prior = jnp.zeros(nodes.shape[0], X.dtype) if log_prior is None else jnp.asarray(log_prior, X.dtype)

    def at(theta):
        h = dict(lengthscale=theta[0], outputscale=theta[1], noise=theta[2])
        m, v = gp.masked_posterior(X, y, mask, X_star, **h)
        lml = gp.masked_log_marginal_likelihood(X, y, mask, **h)
        return bar.binned_normal(m, jnp.sqrt(v + theta[2]), borders), lml

    masses, lml = jax.vmap(at)(nodes.astype(X.dtype))
    log_w = log_prior + lml
    log_w = log_w - logsumexp(log_w)
    bma = jnp.einsum("k,kqb->qb", jnp.exp(log_w), masses)
    return Average(bma, masses[jnp.argmax(lml)], log_w)


def effective_sample_size(log_weights) -> jax.Array:
    """Kish's effective sample size 1 / sum_k w_k^2 of normalised log weights (..., K)."""
    log_weights = check_array(log_weights, "log_weights", kind="float")
    return jnp.exp(-logsumexp(2.0 * log_weights, axis=-1))
