"""TC-BO and its baselines, run for whole episodes and vmapped over seeds.

An episode is ``horizon`` moves from a fixed ``start``; every state entered is measured,
y = f(s') + sigma(s, a) eps, the weight-space GP (``xfmr.tcbo.weight_gp``) is updated and the
state of largest posterior mean is recommended. The methods (:data:`METHODS`):

- ``tcbo``: the receding-horizon planner, one Frank-Wolfe step linearised at the history
  (``xfmr.tcbo.design``): plan the rest of the episode by DP with the reward
  (phi_s^T V^-1 Delta)^2 / sigma(s, a)^2 of the hardest candidate pair, take the first move;
- ``greedy_ucb_stay`` / ``greedy_ucb_move``: move to the allowed neighbour of largest
  UCB = mean + sqrt(beta) sd, "stay" allowed or forbidden;
- ``ei_path`` / ``ucb_path``: the DP path maximising the sum of expected improvement (over the
  largest posterior mean) or of UCB, re-planned after every move;
- ``random``: a random walk over the allowed moves.

Every method keeps an end constraint satisfiable (a move is allowed only if the episode can
still end in the required state).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.bayesopt.acquisition import expected_improvement, upper_confidence_bound
from xfmr.core import linalg
from xfmr.core.validate import (check_array, check_choice, check_finite, check_int, check_real, check_shape,
                                check_tokens)
from xfmr.tcbo.design import candidates, masked_max_pair
from xfmr.tcbo.mdp import backward_induction, check_neighbours, edge_rewards, terminal_values
from xfmr.tcbo.weight_gp import posterior_solves, prior, update, whitened_pair_variances

__all__ = ["METHODS", "TCBOProblem", "make_problem", "run_episodes"]

#: the methods :func:`run_episodes` knows.
METHODS = ("tcbo", "greedy_ucb_stay", "greedy_ucb_move", "ei_path", "ucb_path", "random")


class TCBOProblem(NamedTuple):
    """A TC-BO problem (arrays only, so that it can be passed through ``jit``).

    Phi (S, m) features; neighbours (S, A); noise_sd (S, A) the noise sd of the measurement
    after each move; plan_noise_sd (S, A) the noise sd the planner assumes; start () int;
    terminal (S,) 0 or -inf (end constraint); beta () the UCB parameter (UCB = mean + sqrt(beta) sd).
    """

    Phi: jax.Array
    neighbours: jax.Array
    noise_sd: jax.Array
    plan_noise_sd: jax.Array
    start: jax.Array
    terminal: jax.Array
    beta: jax.Array


def make_problem(Phi, neighbours, start, *, noise_sd=0.1, plan_noise_sd=None, end=None,
                 beta=4.0) -> TCBOProblem:
    """Validate and pack a problem. ``noise_sd`` and ``plan_noise_sd``: scalars or (S, A) arrays;
    ``beta``: the UCB parameter, UCB = mean + sqrt(beta) sd (4.0: two standard deviations)."""
    nb = check_neighbours(neighbours)
    n_states = nb.shape[0]
    Phi = check_finite(check_array(Phi, "Phi", ndim=2, kind="float"), "Phi")
    check_shape(Phi, "Phi", (n_states, None))
    start = check_int(start, "start", minimum=0, maximum=n_states - 1)
    beta = check_real(beta, "beta", minimum=0.0)
    noise = jnp.broadcast_to(jnp.asarray(noise_sd, Phi.dtype), nb.shape)
    plan = noise if plan_noise_sd is None else jnp.broadcast_to(jnp.asarray(plan_noise_sd, Phi.dtype), nb.shape)
    for arr, name in ((noise, "noise_sd"), (plan, "plan_noise_sd")):
        if not bool(jnp.all(arr > 0)):
            raise ValueError(f"{name} must be positive")
    if end is not None:
        end = check_int(end, "end", minimum=0, maximum=n_states - 1)
    terminal = terminal_values(n_states, end, Phi.dtype)
    return TCBOProblem(Phi, jnp.asarray(nb), noise, plan, jnp.asarray(start), terminal,
                       jnp.asarray(beta, Phi.dtype))


def _feasible_values(problem: TCBOProblem, horizon: int) -> jax.Array:
    """(horizon + 1, S): 0 where the end constraint can still be met from s with h moves done, else -inf."""
    zero = jnp.zeros((horizon,) + problem.neighbours.shape, problem.Phi.dtype)
    return backward_induction(zero, problem.neighbours, problem.terminal)[0]


def _plan_action(problem, feasible_values, state_reward, h, s, edge_scale=None, lookahead=None):
    """First move of the best path for a static reward on states (scaled per move).

    The path covers the rest of the episode, or at most ``lookahead`` moves (then it must end
    in a state from which the episode can still be completed).
    """
    nb = problem.neighbours
    edge = edge_rewards(state_reward, nb)
    edge = edge if edge_scale is None else edge * edge_scale
    horizon = feasible_values.shape[0] - 1
    steps = horizon if lookahead is None else min(lookahead, horizon)
    # plan min(steps, remaining) moves: the DP over `steps` moves read from row steps - planned
    first = jnp.maximum(steps - (horizon - h), 0)
    terminal = jnp.where(jnp.isfinite(feasible_values[jnp.minimum(h + steps, horizon)]), 0.0, -jnp.inf)
    _, policy = backward_induction(jnp.broadcast_to(edge, (steps,) + edge.shape), nb, terminal.astype(edge.dtype))
    return policy[first, s]


def _allowed_moves(problem, feasible_values, h, s):
    """(A,) bool: the moves from s that exist and keep the end constraint satisfiable; and the
    states they enter (0 where the move does not exist)."""
    nb_s = problem.neighbours[s]
    entered = jnp.where(nb_s >= 0, nb_s, 0)
    return (nb_s >= 0) & jnp.isfinite(feasible_values[h + 1][entered]), entered


def _greedy_action(problem, feasible_values, score, h, s, allow_stay):
    ok, entered = _allowed_moves(problem, feasible_values, h, s)
    moving = ok & (problem.neighbours[s] != s)
    ok = ok if allow_stay else jnp.where(jnp.any(moving), moving, ok)
    return jnp.argmax(jnp.where(ok, score[entered], -jnp.inf))


def _choose(method, key, problem, feasible_values, post, h, s, lookahead=None):
    Phi, beta = problem.Phi, problem.beta
    mean, A, L = posterior_solves(post, Phi)
    sd = jnp.sqrt(jnp.maximum(jnp.sum(A**2, 0), 0.0))
    if method == "tcbo":
        mask = candidates(mean, sd, beta)
        _, z, z2 = masked_max_pair(whitened_pair_variances(A), mask)
        u = Phi @ linalg.cho_solve(L, Phi[z] - Phi[z2])
        return _plan_action(problem, feasible_values, u**2, h, s, 1.0 / problem.plan_noise_sd**2, lookahead)
    if method == "ucb_path":
        return _plan_action(problem, feasible_values, upper_confidence_bound(mean, sd, beta), h, s,
                            lookahead=lookahead)
    if method == "ei_path":
        ei = expected_improvement(mean, sd, jnp.max(mean))
        return _plan_action(problem, feasible_values, ei, h, s, lookahead=lookahead)
    if method in ("greedy_ucb_stay", "greedy_ucb_move"):
        return _greedy_action(problem, feasible_values, upper_confidence_bound(mean, sd, beta), h, s,
                              method == "greedy_ucb_stay")
    # random walk over the moves that keep the end constraint satisfiable
    ok, _ = _allowed_moves(problem, feasible_values, h, s)
    return jax.random.choice(key, problem.neighbours.shape[1], p=ok / jnp.sum(ok))


def _choose_int(method, lookahead, *args):
    return jnp.asarray(_choose(method, *args, lookahead=lookahead), jnp.int32)


def _run_one(method_index, problem, key, f_given, start, horizon, episodes, lookahead, sample_f, branch_names):
    Phi, nb = problem.Phi, problem.neighbours
    kf, key = jax.random.split(key)
    f = Phi @ jax.random.normal(kf, (Phi.shape[1],), Phi.dtype) if sample_f else f_given
    feasible_values = _feasible_values(problem, horizon)

    def regret_of(post):
        mean = Phi @ jnp.linalg.solve(post.precision, post.shift)
        best = jnp.argmax(mean)
        return jnp.max(f) - f[best], best == jnp.argmax(f)

    def step(carry, t):
        post, s, key = carry
        key, ka, ke = jax.random.split(key, 3)
        h = t % horizon
        s = jnp.where(h == 0, start, s)
        branches = [functools.partial(_choose_int, m, lookahead) for m in branch_names]
        a = jax.lax.switch(method_index, branches, ka, problem, feasible_values, post, h, s)
        s_next = nb[s, a]
        sigma = problem.noise_sd[s, a]
        y = f[s_next] + sigma * jax.random.normal(ke, (), Phi.dtype)
        post = update(post, Phi[s_next], y, sigma)
        regret, found = regret_of(post)
        return (post, s_next, key), (s_next, regret, found)

    post0 = prior(Phi.shape[1], Phi.dtype)
    _, (states, regret, found) = jax.lax.scan(step, (post0, start, key), jnp.arange(horizon * episodes))
    return {"f": f, "states": states, "regret": regret, "found": found}


def run_episodes(method: str, problem: TCBOProblem, keys, *, horizon: int, episodes: int, f=None, starts=None,
                 lookahead: int | None = None, compiled_with=METHODS) -> dict:
    """Run one method, vmapped over seeds.

    For each key: take the ground truth f (by default a GP sample f = Phi theta, theta ~ N(0, I),
    drawn from the key); run ``episodes`` episodes of ``horizon`` moves from the start state,
    measuring every state entered; after each measurement recommend argmax of the posterior mean.

    Args:
        method: one of :data:`METHODS`.
        problem: from :func:`make_problem`; keys: (n, 2) PRNG keys, one per seed.
        f: optional fixed ground truth (S,) used for every seed instead of GP samples.
        starts: optional (n,) start state of each seed (default ``problem.start`` for all).
        lookahead: the planners plan at most this many moves ahead (re-planning after every
            move, a receding horizon); default: the rest of the episode.
        compiled_with: the methods that share one compiled program (per problem shape); a page
            that runs only some methods on a problem passes those to compile less.

    Returns a dict of arrays with a leading seed axis: ``f`` (n, S), ``states`` (n, E*H) the
    path, ``regret`` (n, E*H) the simple regret f* - f(recommendation) after each measurement,
    ``found`` (n, E*H) whether the recommendation is the true maximiser.
    """
    check_choice(method, "method", METHODS)
    compiled_with = tuple(compiled_with)
    for m in compiled_with:
        check_choice(m, "compiled_with", METHODS)
    check_choice(method, "method (one of compiled_with)", compiled_with)
    horizon = check_int(horizon, "horizon", minimum=1)
    episodes = check_int(episodes, "episodes", minimum=1)
    if lookahead is not None:
        lookahead = check_int(lookahead, "lookahead", minimum=1)
    keys = check_array(keys, "keys", ndim=(1, 2))
    n_states, n_seeds = problem.neighbours.shape[0], keys.shape[0]
    if f is None:
        f_given = jnp.zeros((n_seeds, n_states), problem.Phi.dtype)
    else:
        f = check_finite(check_array(f, "f", ndim=1, kind="number"), "f")
        check_shape(f, "f", (n_states,))
        f_given = jnp.broadcast_to(jnp.asarray(f, problem.Phi.dtype), (n_seeds, n_states))
    if starts is None:
        starts = np.full((n_seeds,), int(problem.start))
    else:
        starts = np.asarray(check_shape(check_tokens(starts, "starts", ndim=1, n_states=n_states), "starts",
                                        (n_seeds,)))
    if not bool(jnp.all(jnp.isfinite(_feasible_values(problem, horizon)[0][starts]))):
        raise ValueError(f"no feasible path of {horizon} moves from the start meets the end constraint")
    starts = jnp.asarray(starts, jnp.int32)
    return _run_batch(jnp.asarray(compiled_with.index(method)), problem, keys, f_given, starts, horizon, episodes,
                      lookahead, f is None, compiled_with)


# one compiled program per problem shape serves every method of `compiled_with` (a traced index)
_run_batch = jax.jit(jax.vmap(_run_one, in_axes=(None, None, 0, 0, 0, None, None, None, None, None)),
                     static_argnums=(5, 6, 7, 8, 9))
