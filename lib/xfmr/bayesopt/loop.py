"""A fixed-shape Bayesian-optimisation loop (maximisation), one ``lax.scan`` per run.

A *problem* is ``problem(key) -> (C, g)``: a candidate set C (m, d) and the objective values
g (m,) at those candidates (noise-free; maximised). Branin and Hartmann draw fresh uniform
candidates every step; a GP sample path returns its fixed grid. The acquisition is maximised
by evaluating it at every candidate and taking the best (an exhaustive search over a random or
fixed candidate set, no gradient polish).

A *policy* is ``policy(X, y, mask, C, key, state) -> (scores (m,), state)``; the loop picks
argmax scores, observes g there and writes it into row ``n`` of the fixed-size arrays X
(n_max, d), y (n_max,), whose rows with ``mask == 1`` are the observations so far.

Run ``n_init`` random evaluations then ``n_iter`` policy steps; the result is the best value
observed after each evaluation, shape (n_init + n_iter,). Vmap over keys to run many seeds.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from xfmr.bayesopt import acquisition, bar, gp, pfn
from xfmr.core.validate import check_int

__all__ = ["run", "random_policy", "gp_ei_policy", "pfn_ei_policy", "standardise"]


def standardise(y, mask):
    """(y - mean) / std over the masked rows (std floored at 1e-9); returns (z, mean, std)."""
    m = mask.astype(y.dtype)
    n = jnp.maximum(jnp.sum(m), 1.0)
    mu = jnp.sum(y * m) / n
    sd = jnp.sqrt(jnp.sum(((y - mu) * m) ** 2) / n)
    sd = jnp.where(sd > 1e-9, sd, 1.0)
    return (y - mu) / sd * m, mu, sd


def random_policy():
    """Uniformly random candidate (scores are i.i.d. uniform)."""
    def policy(X, y, mask, C, key, state):
        return jax.random.uniform(key, (C.shape[0],)), state
    return policy, None


def gp_ei_policy(*, hyper: dict | None = None, n_restarts: int = 4, n_steps: int = 60,
                 standardize: bool = True):
    """GP expected improvement. ``hyper`` fixed (the true hyperparameters) or ``None``: type-II
    ML refit every step, warm-started at the previous fit plus ``n_restarts - 1`` random starts."""
    init = {"lengthscale": 0.2, "outputscale": 1.0, "noise": 1e-3} if hyper is None else hyper

    def policy(X, y, mask, C, key, state):
        z, _, _ = standardise(y, mask) if standardize else (y * mask, 0.0, 1.0)
        if hyper is None:
            fit = gp.fit_hyperparameters(X, z, mask, key, n_restarts=n_restarts, n_steps=n_steps, init=state)
            h = {k: fit[k] for k in ("lengthscale", "outputscale", "noise")}
        else:
            h = {k: jnp.asarray(v, X.dtype) for k, v in hyper.items()}
        mean, var = gp.masked_posterior(X, z, mask, C, **h)
        best = jnp.max(jnp.where(mask > 0, z, -jnp.inf))
        return acquisition.expected_improvement(mean, jnp.sqrt(var), best), h

    return policy, {k: jnp.asarray(v) for k, v in init.items()}


def pfn_ei_policy(params, config, borders, *, standardize: bool = False):
    """Expected improvement of the PFN's bar distribution (one forward pass)."""
    def policy(X, y, mask, C, key, state):
        z, _, _ = standardise(y, mask) if standardize else (y * mask, 0.0, 1.0)
        n = jnp.sum(mask).astype(jnp.int32)
        x_all = jnp.concatenate([X, C]).astype(jnp.float32)
        y_all = jnp.concatenate([z, jnp.zeros(C.shape[0], z.dtype)]).astype(jnp.float32)
        logits = pfn.forward(params, config, x_all, y_all, n, n_keys=X.shape[0])[X.shape[0]:]
        best = jnp.max(jnp.where(mask > 0, z, -jnp.inf)).astype(jnp.float32)
        return bar.expected_improvement(logits, borders, best), state
    return policy, None


def run(problem: Callable, policy_and_state, key, *, n_init: int, n_iter: int, d: int,
        dtype=jnp.float64) -> jax.Array:
    """Best observed value after each of the n_init + n_iter evaluations, shape (n_init + n_iter,)."""
    n_init = check_int(n_init, "n_init", minimum=1)
    n_iter = check_int(n_iter, "n_iter", minimum=0)
    d = check_int(d, "d", minimum=1)
    policy, state0 = policy_and_state
    n_max = n_init + n_iter
    k_init, k_loop = jax.random.split(key)
    C0, g0 = problem(k_init)
    pick = jax.random.choice(jax.random.fold_in(k_init, 1), C0.shape[0], (n_init,), replace=False)
    X = jnp.zeros((n_max, d), dtype).at[:n_init].set(C0[pick].astype(dtype))
    y = jnp.zeros(n_max, dtype).at[:n_init].set(g0[pick].astype(dtype))
    mask = (jnp.arange(n_max) < n_init).astype(dtype)
    best0 = jax.lax.cummax(g0[pick].astype(dtype))

    def step(carry, t):
        X, y, mask, state = carry
        kc, kp = jax.random.split(jax.random.fold_in(k_loop, t))
        C, g = problem(kc)
        scores, state = policy(X, y, mask, C.astype(dtype), kp, state)
        i = jnp.argmax(jnp.where(jnp.isfinite(scores), scores, -jnp.inf))
        n = n_init + t
        X, y, mask = X.at[n].set(C[i].astype(dtype)), y.at[n].set(g[i].astype(dtype)), mask.at[n].set(1.0)
        return (X, y, mask, state), jnp.max(jnp.where(mask > 0, y, -jnp.inf))

    (_, _, _, _), best = jax.lax.scan(step, (X, y, mask, state0), jnp.arange(n_iter))
    return jnp.concatenate([best0, best])
