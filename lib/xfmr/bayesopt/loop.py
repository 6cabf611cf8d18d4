"""A fixed-shape Bayesian-optimisation loop (maximisation), one ``lax.scan`` per run.

A *problem* is ``problem(key) -> (C, g)``: a candidate set C (m, d) and the objective values
g (m,) at those candidates (noise-free; maximised). Branin and Hartmann draw fresh uniform
candidates every step; a GP sample path returns its fixed grid. The acquisition is maximised
by evaluating it at every candidate and taking the best (an exhaustive search over a random or
fixed candidate set, no gradient polish).

A *policy* is ``policy(X, y, mask, C, key, state) -> (scores (m,), state)``; the loop picks
argmax scores, observes g there and writes it into row ``n`` of the fixed-size arrays X
(n_max, d), y (n_max,), whose rows with ``mask == 1`` are the observations so far. The EI
policies score with log-EI (:func:`xfmr.bayesopt.acquisition.log_expected_improvement`), so
candidates whose EI underflows still rank by how much they could improve; a score of -inf is
a valid "no improvement possible". A NaN (or +inf) score is a failure: it is never chosen, and
the run counts such scores (:attr:`BayesOptRun.n_invalid_scores`, 0 in a sound run).

Run ``n_init`` random evaluations then ``n_iter`` policy steps. Vmap over keys to run many seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.bayesopt import acquisition, gp
from xfmr.bayesopt.pfn_model import Datasets, forward
from xfmr.core.validate import check_int

__all__ = ["BayesOptRun", "run_bayesopt", "random_policy", "gp_ei_policy", "pfn_ei_policy", "masked_standardize",
           "final_regret_rows"]


def masked_standardize(y, mask):
    """(y - mean) / std over the masked rows (std floored at 1e-9), masked-out rows 0;
    returns (z, mean, std)."""
    m = mask.astype(y.dtype)
    n = jnp.maximum(jnp.sum(m), 1.0)
    mu = jnp.sum(y * m) / n
    sd = jnp.sqrt(jnp.sum(((y - mu) * m) ** 2) / n)
    sd = jnp.where(sd > 1e-9, sd, 1.0)
    return (y - mu) / sd * m, mu, sd


def _incumbent(z, mask):
    return jnp.max(jnp.where(mask > 0, z, -jnp.inf))


def random_policy():
    """Uniformly random candidate (scores are i.i.d. uniform)."""
    def policy(X, y, mask, C, key, state):
        return jax.random.uniform(key, (C.shape[0],), C.dtype), state
    return policy, None


def gp_ei_policy(
    *,
    hyper: gp.GPParams | None = None,
    n_restarts: int = 4,
    n_steps: int = 60,
    standardize: bool = True,
):
    """GP log-EI. ``hyper`` fixed (the true hyperparameters) or
    ``None``: type-II ML refit
    (:func:`xfmr.bayesopt.gp.fit_hyperparameters`) every step,
    warm-started at the previous fit plus ``n_restarts - 1`` random
    starts. The state is the current
    :class:`~xfmr.bayesopt.gp.GPParams`."""
    init = gp.GPParams(0.2, 1.0, 1e-3) if hyper is None else hyper

    def policy(X, y, mask, C, key, state):
        z = masked_standardize(y, mask)[0] if standardize else y * mask
        if hyper is None:
            h = gp.fit_hyperparameters(
                X,
                z,
                mask,
                key,
                n_restarts=n_restarts,
                n_steps=n_steps,
                init=state,
            ).params
        else:
            h = gp.GPParams(*(jnp.asarray(v, X.dtype) for v in hyper))
        mean, var = gp.masked_posterior(X, z, mask, C, **h._asdict())
        return acquisition.log_expected_improvement(
            mean, jnp.sqrt(var), _incumbent(z, mask)
        ), h

    return policy, gp.GPParams(*(jnp.asarray(v) for v in init))


def pfn_ei_policy(params, config, borders, *, standardize: bool = False):
    """Log-EI of the PFN's bar distribution (one forward pass of the observations and the
    candidates, attending to the observation rows only: ``n_keys = len(X)``)."""
    def policy(X, y, mask, C, key, state):
        z = masked_standardize(y, mask)[0] if standardize else y * mask
        dtype = params["embed"]["W_x"].dtype
        x_all = jnp.concatenate([X, C]).astype(dtype)
        y_all = jnp.concatenate([z, jnp.zeros(C.shape[0], z.dtype)]).astype(dtype)
        data = Datasets(x_all, y_all, jnp.sum(mask).astype(jnp.int32))
        logits = forward(params, data, config, n_keys=X.shape[0])[X.shape[0]:]
        return acquisition.bar_log_expected_improvement(logits, borders, _incumbent(z, mask).astype(dtype)), state
    return policy, None


class BayesOptRun(NamedTuple):
    """Result of :func:`run_bayesopt`.

    Attributes:
        best: the best value observed after each of the n_init + n_iter evaluations.
        n_invalid_scores: how many acquisition scores, over all steps and candidates, were NaN
            or +inf (never chosen; 0 in a sound run).
    """

    best: jax.Array
    n_invalid_scores: jax.Array


def run_bayesopt(problem: Callable, policy_and_state, key, *, n_init: int, n_iter: int, d: int,
                 dtype=jnp.float64) -> BayesOptRun:
    """One BayesOpt run of ``policy_and_state = (policy, initial state)`` on ``problem``
    (module docstring), in ``dtype``."""
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
        X, y, mask, state, n_invalid = carry
        kc, kp = jax.random.split(jax.random.fold_in(k_loop, t))
        C, g = problem(kc)
        scores, state = policy(X, y, mask, C.astype(dtype), kp, state)
        invalid = jnp.isnan(scores) | (scores == jnp.inf)
        i = jnp.argmax(jnp.where(invalid, -jnp.inf, scores))
        n = n_init + t
        X, y, mask = X.at[n].set(C[i].astype(dtype)), y.at[n].set(g[i].astype(dtype)), mask.at[n].set(1.0)
        n_invalid = n_invalid + jnp.sum(invalid, dtype=jnp.int32)
        return (X, y, mask, state, n_invalid), jnp.max(jnp.where(mask > 0, y, -jnp.inf))

    carry0 = (X, y, mask, state0, jnp.zeros((), jnp.int32))
    (_, _, _, _, n_invalid), best = jax.lax.scan(step, carry0, jnp.arange(n_iter))
    return BayesOptRun(jnp.concatenate([best0, best]), n_invalid)


def final_regret_rows(results: dict) -> list[dict]:
    """One row per ``(problem, method)``: the final simple regret's median
    and quartiles over seeds, as printed strings (``.2e``).

    Args:
        results: ``{(problem, method): regret (n_seeds, T)}``; the last
            column is the final simple regret.

    Returns:
        ``[{"problem", "method", "median", "quartiles"}]`` in the order
        of ``results`` (for ``pandas.DataFrame(...).set_index``).
    """
    rows = []
    for (problem, method), r in results.items():
        r = np.asarray(r)
        if r.ndim != 2 or r.shape[0] < 1:
            raise ValueError(
                f"results[{problem!r}, {method!r}] must be (n_seeds, T), "
                f"got shape {r.shape}"
            )
        q25, q50, q75 = np.percentile(r[:, -1], [25, 50, 75])
        rows.append({
            "problem": problem,
            "method": method,
            "median": f"{q50:.2e}",
            "quartiles": f"[{q25:.2e}, {q75:.2e}]",
        })
    return rows
