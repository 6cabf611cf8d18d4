"""Transition-constrained Bayesian optimisation (TC-BO) on a finite graph of states.

After Folch, Tsay, Lee, Shafei, Ormaniec, Krause, van der Wilk, Misener, Mutny (NeurIPS 2024,
arXiv 2402.08406), rebuilt from the paper's description (the official code is not used).

**The MDP.** States ``s = 0..S-1`` (cells of a grid, optionally with obstacles); a move table
``neighbours`` of shape (S, A) gives the state entered by action ``a`` from ``s``, ``-1`` where
the move does not exist. Transitions are known and deterministic. An episode is ``horizon``
moves from a fixed ``start``; every state entered is measured, y = f(s') + sigma(s, a) eps.

**The model.** A GP in weight space, f(s) = phi(s)^T theta, theta ~ N(0, I). The features are
Phi = U sqrt(Lambda) from the eigendecomposition of the RBF kernel matrix on the states
(``xfmr.bayesopt.gp.rbf_kernel``), so Phi Phi^T = K up to the dropped eigenvalues. After measurements
with features phi_t and noise sd sigma_t the posterior of theta has precision and shift

    V = I + sum_t phi_t phi_t^T / sigma_t^2,      b = sum_t phi_t y_t / sigma_t^2,

mean(s) = phi(s)^T V^-1 b, variance(s) = phi(s)^T V^-1 phi(s).

**The utility.** Candidates Z = {s : UCB(s) >= max_s' LCB(s')}. For a design d (a visitation
distribution over measurement types i with scaled features psi_i = phi_i / sigma_i) and n
remaining measurements, V(d) = V_hist + n sum_i d_i psi_i psi_i^T and

    U(d) = max_{z, z' in Z} (phi_z - phi_z')^T V(d)^-1 (phi_z - phi_z').

U is convex in d; by Danskin's theorem its gradient at a d with a unique maximising pair
(Delta = phi_z - phi_z') is dU/dd_i = -n (psi_i^T V(d)^-1 Delta)^2.

**The planner.** Minimising the linearisation of U over the visitation distributions of paths
is a longest-path problem with reward r_i = (psi_i^T V^-1 Delta)^2, solved exactly by backward
induction (:func:`best_path`). Frank-Wolfe mixes such paths (:func:`frank_wolfe`); the
receding-horizon policy the authors run takes one Frank-Wolfe step linearised at the
history, executes the first move of the planned path and re-plans after every measurement.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.scipy.stats import norm

from xfmr.bayesopt.gp import rbf_kernel
from xfmr.core.validate import check_array, check_choice, check_finite, check_int, check_real, check_shape

__all__ = [
    "MOVES_4",
    "grid_states",
    "check_neighbours",
    "best_path",
    "backward_induction",
    "brute_force_best_path",
    "features",
    "Posterior",
    "prior",
    "update",
    "predict",
    "candidates",
    "pair_variances",
    "hardest_pair",
    "linearised_reward",
    "utility",
    "utility_gradient",
    "frank_wolfe",
    "METHODS",
    "Problem",
    "make_problem",
    "run",
]

#: stay, down, up, right, left as (row, column) steps; the first move is "stay".
MOVES_4 = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))


# ----------------------------------------------------------------------------- the MDP


def grid_states(n_rows: int, n_cols: int, moves=MOVES_4, *, free=None,
                monotone_axis: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """States and move table of a grid in the unit square.

    Args:
        n_rows, n_cols: grid size (>= 1 each).
        moves: sequence of (row step, column step) pairs; the move table has one column per move.
        free: optional (n_rows, n_cols) bool mask; ``False`` cells are obstacles (not states).
        monotone_axis: if 0 (rows) or 1 (columns), moves that decrease that coordinate are
            removed (a reactor's residence time may only increase).

    Returns:
        ``coords`` (S, 2) float in [0, 1]^2 (row, column) and ``neighbours`` (S, A) int32 with
        -1 for a move that leaves the grid, enters an obstacle or breaks monotonicity. States
        are the free cells in row-major order.
    """
    n_rows, n_cols = check_int(n_rows, "n_rows", minimum=1), check_int(n_cols, "n_cols", minimum=1)
    moves = np.asarray(moves, dtype=int)
    if moves.ndim != 2 or moves.shape[1] != 2 or len(moves) < 1:
        raise ValueError(f"moves must be a sequence of (row step, column step) pairs, got shape {moves.shape}")
    if monotone_axis is not None:
        check_choice(monotone_axis, "monotone_axis", (0, 1))
    free = np.ones((n_rows, n_cols), bool) if free is None else np.asarray(free, bool)
    if free.shape != (n_rows, n_cols):
        raise ValueError(f"free must have shape ({n_rows}, {n_cols}), got {free.shape}")
    index = -np.ones((n_rows, n_cols), int)
    cells = np.argwhere(free)
    if len(cells) == 0:
        raise ValueError("free must contain at least one free cell")
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    target = cells[:, None, :] + moves[None, :, :]
    inside = (target[..., 0] >= 0) & (target[..., 0] < n_rows) & (target[..., 1] >= 0) & (target[..., 1] < n_cols)
    clipped = np.clip(target, 0, [n_rows - 1, n_cols - 1])
    neighbours = np.where(inside, index[clipped[..., 0], clipped[..., 1]], -1)
    if monotone_axis is not None:
        neighbours = np.where(moves[None, :, monotone_axis] < 0, -1, neighbours)
    scale = np.array([max(n_rows - 1, 1), max(n_cols - 1, 1)], float)
    coords = cells / scale
    return coords, np.asarray(check_neighbours(neighbours), np.int32)


def check_neighbours(neighbours, name: str = "neighbours") -> np.ndarray:
    """Validate a move table: 2-D integers in [-1, S) and at least one move from every state.

    Raises ``ValueError`` naming the first entry that leaves the set of S states (the table's
    number of rows) and the first state with no allowed move.
    """
    nb = np.asarray(check_array(neighbours, name, ndim=2, kind="int"))
    n_states = nb.shape[0]
    bad = np.argwhere((nb < -1) | (nb >= n_states))
    if len(bad):
        s, a = bad[0]
        raise ValueError(f"{name}[{s}, {a}] = {nb[s, a]} leaves the {n_states} states (entries must be in "
                         f"[-1, {n_states - 1}], -1 = no move)")
    stuck = np.flatnonzero(np.all(nb < 0, axis=1))
    if len(stuck):
        raise ValueError(f"{name}: state {stuck[0]} has no allowed move ({len(stuck)} such state(s)); "
                         "allow 'stay' or relax the constraint")
    return nb


# ----------------------------------------------------------------------------- the DP oracle


@jax.jit
def backward_induction(edge_reward, neighbours, terminal):
    """Backward induction for the best path under rewards on moves.

    Args:
        edge_reward: (H, S, A) reward for taking move a from state s at step h.
        neighbours: (S, A) move table (-1 = no move), already validated.
        terminal: (S,) value of ending in each state (0, or -inf to forbid an end state).

    Returns:
        ``values`` (H + 1, S): values[h, s] = best total reward of the moves h..H-1 from s
        (-inf if no feasible path), and ``policy`` (H, S) the maximising move index.

    V_H = terminal;  V_h(s) = max_a [ r_h(s, a) + V_{h+1}(neighbours[s, a]) ] over existing moves.
    """
    valid = neighbours >= 0
    nb = jnp.where(valid, neighbours, 0)

    def step(v_next, r_h):
        q = jnp.where(valid, r_h + v_next[nb], -jnp.inf)
        return q.max(1), (q.max(1), q.argmax(1))

    _, (values, policy) = jax.lax.scan(step, terminal, edge_reward, reverse=True)
    return jnp.concatenate([values, terminal[None]], 0), policy


@jax.jit
def _rollout(policy, neighbours, start):
    def step(s, pol_h):
        s_next = neighbours[s, pol_h[s]]
        return s_next, s_next

    _, states = jax.lax.scan(step, start, policy)
    return states


def _check_plan_args(reward, neighbours, start, horizon, end):
    nb = check_neighbours(neighbours)
    n_states = nb.shape[0]
    horizon = check_int(horizon, "horizon", minimum=1)
    start = check_int(start, "start", minimum=0, maximum=n_states - 1)
    if end is not None:
        end = check_int(end, "end", minimum=0, maximum=n_states - 1)
    reward = check_finite(check_array(reward, "reward", ndim=(1, 2), kind="number"), "reward")
    if reward.ndim == 1:
        check_shape(reward, "reward", (n_states,))
        reward = jnp.broadcast_to(reward, (horizon, n_states))
    else:
        check_shape(reward, "reward", (horizon, n_states))
    return reward, jnp.asarray(nb), start, horizon, end


def best_path(reward, neighbours, start, horizon, *, end=None):
    """The best total reward over feasible paths and one optimal path (the DP oracle).

    Args:
        reward: (S,) or (horizon, S): reward for being in state s after move h (h = 0..horizon-1).
        neighbours: (S, A) integer move table, -1 marking a move that does not exist.
        start: the state before the first move.
        horizon: the number of moves (>= 1).
        end: optional state the path must end in (a return-to-start constraint).

    Returns:
        ``(value, states)``: the largest sum_h reward[h, s_h] over paths s_0..s_{H-1} with
        s_h = neighbours[s_{h-1}, a_h] (s_{-1} = start), and one maximising path, shape (horizon,).
    """
    reward, nb, start, horizon, end = _check_plan_args(reward, neighbours, start, horizon, end)
    valid = nb >= 0
    edge = jnp.where(valid[None], reward[:, jnp.where(valid, nb, 0)], 0.0)
    terminal = jnp.zeros(nb.shape[0], edge.dtype)
    if end is not None:
        terminal = jnp.where(jnp.arange(nb.shape[0]) == end, 0.0, -jnp.inf).astype(edge.dtype)
    values, policy = backward_induction(edge, nb, terminal)
    value = values[0, start]
    if not bool(jnp.isfinite(value)):
        raise ValueError(f"no feasible path of {horizon} moves from state {start} ends in state {end}")
    return value, _rollout(policy, nb, jnp.asarray(start))


def brute_force_best_path(reward, neighbours, start, horizon, *, end=None):
    """Enumerate every feasible path (exponential: for tiny problems and tests only).

    Same arguments and result as :func:`best_path`, plus the number of feasible paths.
    """
    reward, nb, start, horizon, end = _check_plan_args(reward, neighbours, start, horizon, end)
    reward, nb = np.asarray(reward), np.asarray(nb)
    best, best_path_, n_paths = -np.inf, None, 0
    for actions in itertools.product(range(nb.shape[1]), repeat=horizon):
        s, states, total = start, [], 0.0
        for h, a in enumerate(actions):
            s = nb[s, a]
            if s < 0:
                break
            states.append(s)
            total += reward[h, s]
        else:
            if end is not None and s != end:
                continue
            n_paths += 1
            if total > best:
                best, best_path_ = total, states
    if best_path_ is None:
        raise ValueError(f"no feasible path of {horizon} moves from state {start} ends in state {end}")
    return best, np.array(best_path_), n_paths


# ----------------------------------------------------------------------------- the GP in weight space


def features(coords, *, lengthscale: float, outputscale: float = 1.0, rel_tol: float = 1e-10) -> jax.Array:
    """Features Phi (S, m) with Phi Phi^T = K = rbf_kernel(coords, coords) up to dropped eigenvalues.

    Phi = U_m sqrt(Lambda_m) keeps the eigenpairs of K with eigenvalue > rel_tol * max eigenvalue.
    """
    check_real(rel_tol, "rel_tol", minimum=0.0, maximum=1.0)
    K = np.asarray(rbf_kernel(coords, coords, lengthscale=lengthscale, outputscale=outputscale), float)
    lam, U = np.linalg.eigh(K)
    keep = lam > rel_tol * lam.max()
    order = np.argsort(-lam[keep])
    return jnp.asarray(U[:, keep][:, order] * np.sqrt(lam[keep][order]))


class Posterior(NamedTuple):
    """Posterior of theta ~ N(0, I) in weight space: precision V (m, m) and shift b (m,)."""

    precision: jax.Array
    shift: jax.Array


def prior(n_features: int, dtype=jnp.float64) -> Posterior:
    """The prior theta ~ N(0, I): V = I, b = 0."""
    m = check_int(n_features, "n_features", minimum=1)
    return Posterior(jnp.eye(m, dtype=dtype), jnp.zeros(m, dtype))


@jax.jit
def update(post: Posterior, phi, y, noise_sd) -> Posterior:
    """Add one measurement y = phi^T theta + sigma eps (phi (m,)): V += phi phi^T / s^2, b += phi y / s^2."""
    w = 1.0 / noise_sd**2
    return Posterior(post.precision + w * jnp.outer(phi, phi), post.shift + w * y * phi)


def _solve_factor(post: Posterior, Phi):
    L = jnp.linalg.cholesky(post.precision)
    A = jsl.solve_triangular(L, Phi.T, lower=True)  # (m, S), A^T A = Phi V^-1 Phi^T
    # The solve above and cho_solve's below are independent; batched (under vmap) and run at once
    # on XLA's two CPU threads, jaxlib's batched LAPACK kernels deadlock its thread pool (each
    # waits for work queued behind the other). The barrier makes cho_solve wait for A; the values
    # are those of the unordered computation.
    A, L = jax.lax.optimization_barrier((A, L))
    mean = Phi @ jsl.cho_solve((L, True), post.shift)
    return mean, A, L


@jax.jit
def predict(post: Posterior, Phi) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and variance of f at the states with features Phi (S, m); each (S,)."""
    mean, A, _ = _solve_factor(post, Phi)
    return mean, jnp.sum(A**2, 0)


def candidates(mean, sd, beta) -> jax.Array:
    """Bool mask of the possible maximisers: UCB(s) = mean + beta sd >= max_s' (mean - beta sd)."""
    return mean + beta * sd >= jnp.max(mean - beta * sd)


@jax.jit
def pair_variances(precision, Phi) -> jax.Array:
    """D[z, z'] = (phi_z - phi_z')^T V^-1 (phi_z - phi_z'), shape (S, S)."""
    A = jsl.solve_triangular(jnp.linalg.cholesky(precision), Phi.T, lower=True)
    G = A.T @ A
    g = jnp.diag(G)
    return g[:, None] + g[None, :] - 2.0 * G


def _design_precision(design, Psi, precision_hist, n_remaining):
    return precision_hist + n_remaining * (Psi.T * design) @ Psi


def _masked_max_pair(D, mask):
    D = jnp.where(mask[:, None] & mask[None, :], D, -jnp.inf)
    k = jnp.argmax(D)
    return D.reshape(-1)[k], k // D.shape[0], k % D.shape[0]


@jax.jit
def hardest_pair(precision, Phi, mask):
    """``(variance, z, z2)``: the candidate pair whose difference f(z) - f(z2) has the largest
    variance (phi_z - phi_z2)^T V^-1 (phi_z - phi_z2) under the precision V, mask (S,) bool."""
    return _masked_max_pair(pair_variances(precision, Phi), mask)


@jax.jit
def linearised_reward(precision, Phi, mask) -> jax.Array:
    """The TC-BO reward per state (before dividing by the noise variance), shape (S,):
    r(s) = (phi_s^T V^-1 Delta)^2 with Delta = phi_z - phi_z2 the :func:`hardest_pair`."""
    _, z, z2 = hardest_pair(precision, Phi, mask)
    return (Phi @ jnp.linalg.solve(precision, Phi[z] - Phi[z2])) ** 2


@jax.jit
def utility(design, Psi, Phi, precision_hist, mask, n_remaining) -> jax.Array:
    """U(d) = max over candidate pairs of the variance of f(z) - f(z') under V(d).

    Args:
        design: (n,) weights d_i >= 0 on measurement types (a visitation distribution).
        Psi: (n, m) scaled features psi_i = phi_i / sigma_i of the measurement types.
        Phi: (S, m) features of the states; mask (S,) bool, the candidate set Z.
        precision_hist: (m, m) V_hist; n_remaining: number of measurements the design spreads.
    """
    V = _design_precision(design, Psi, precision_hist, n_remaining)
    return _masked_max_pair(pair_variances(V, Phi), mask)[0]


@jax.jit
def utility_gradient(design, Psi, Phi, precision_hist, mask, n_remaining):
    """``(U, grad)``: U(d) and its Danskin gradient -n (psi_i^T V(d)^-1 Delta)^2, shape (n,)."""
    V = _design_precision(design, Psi, precision_hist, n_remaining)
    value, z, z2 = _masked_max_pair(pair_variances(V, Phi), mask)
    u = jnp.linalg.solve(V, Phi[z] - Phi[z2])
    return value, -n_remaining * (Psi @ u) ** 2


def frank_wolfe(Phi, noise_sd, precision_hist, mask, neighbours, start, horizon, n_steps):
    """Frank-Wolfe over the visitation distributions of paths (state design, noise per state).

    d_0 is the visitation of the oracle path linearised at the history (the receding-horizon
    plan); step k: g = grad U(d_k), oracle path p_k = best_path(-g), gap_k = <g, d_k - d(p_k)>
    (an upper bound on U(d_k) - min U), d_{k+1} = (1 - gamma_k) d_k + gamma_k d(p_k),
    gamma_k = 2 / (k + 2).

    Returns ``(utilities (n_steps + 1,), gaps (n_steps,), design (S,))``.
    """
    nb = jnp.asarray(check_neighbours(neighbours))
    start = check_int(start, "start", minimum=0, maximum=nb.shape[0] - 1)
    horizon = check_int(horizon, "horizon", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    Psi = Phi / jnp.broadcast_to(noise_sd, (Phi.shape[0],))[:, None]
    n_states = Phi.shape[0]
    valid = nb >= 0
    terminal = jnp.zeros(n_states, Phi.dtype)

    def oracle(grad):
        edge = jnp.where(valid, -grad[jnp.where(valid, nb, 0)], 0.0)
        _, policy = backward_induction(jnp.broadcast_to(edge, (horizon,) + edge.shape), nb, terminal)
        states = _rollout(policy, nb, jnp.asarray(start))
        return jnp.zeros(n_states, Phi.dtype).at[states].add(1.0 / horizon)

    _, g0 = utility_gradient(jnp.zeros(n_states, Phi.dtype), Psi, Phi, precision_hist, mask, horizon)
    d = oracle(g0)
    utilities, gaps = [], []
    for k in range(n_steps):
        value, g = utility_gradient(d, Psi, Phi, precision_hist, mask, horizon)
        p = oracle(g)
        utilities.append(value)
        gaps.append(jnp.dot(g, d - p))
        gamma = 2.0 / (k + 2.0)
        d = (1.0 - gamma) * d + gamma * p
    utilities.append(utility(d, Psi, Phi, precision_hist, mask, horizon))
    return jnp.stack(utilities), jnp.stack(gaps), d


# ----------------------------------------------------------------------------- policies and runner

#: the methods :func:`run` knows.
METHODS = ("tcbo", "greedy_ucb_stay", "greedy_ucb_move", "ei_path", "ucb_path", "random")


class Problem(NamedTuple):
    """A TC-BO problem (arrays only, so that it can be passed through ``jit``).

    Phi (S, m) features; neighbours (S, A); noise_sd (S, A) the noise sd of the measurement
    after each move; plan_noise_sd (S, A) the noise sd the planner assumes; start () int;
    terminal (S,) 0 or -inf (end constraint); beta () the UCB width.
    """

    Phi: jax.Array
    neighbours: jax.Array
    noise_sd: jax.Array
    plan_noise_sd: jax.Array
    start: jax.Array
    terminal: jax.Array
    beta: jax.Array


def make_problem(Phi, neighbours, start, *, noise_sd=0.1, plan_noise_sd=None, end=None, beta=2.0) -> Problem:
    """Validate and pack a problem. ``noise_sd`` and ``plan_noise_sd``: scalars or (S, A) arrays."""
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
    terminal = jnp.zeros(n_states, Phi.dtype)
    if end is not None:
        end = check_int(end, "end", minimum=0, maximum=n_states - 1)
        terminal = jnp.where(jnp.arange(n_states) == end, 0.0, -jnp.inf).astype(Phi.dtype)
    return Problem(Phi, jnp.asarray(nb), noise, plan, jnp.asarray(start), terminal, jnp.asarray(beta, Phi.dtype))


def _plan_action(problem, feasible_values, state_reward, h, s, edge_scale=None, lookahead=None):
    """First move of the best path for a static reward on states (scaled per move).

    The path covers the rest of the episode, or at most ``lookahead`` moves (then it must end
    in a state from which the episode can still be completed).
    """
    nb = problem.neighbours
    valid = nb >= 0
    safe = jnp.where(valid, nb, 0)
    edge = state_reward[safe] if edge_scale is None else state_reward[safe] * edge_scale
    edge = jnp.where(valid, edge, 0.0)
    horizon = feasible_values.shape[0] - 1
    steps = horizon if lookahead is None else min(lookahead, horizon)
    # plan min(steps, remaining) moves: the DP over `steps` moves read from row steps - planned
    first = jnp.maximum(steps - (horizon - h), 0)
    terminal = jnp.where(jnp.isfinite(feasible_values[jnp.minimum(h + steps, horizon)]), 0.0, -jnp.inf)
    _, policy = backward_induction(jnp.broadcast_to(edge, (steps,) + edge.shape), nb, terminal.astype(edge.dtype))
    return policy[first, s]


def _greedy_action(problem, feasible_values, score, h, s, allow_stay):
    nb = problem.neighbours
    ok = (nb[s] >= 0) & jnp.isfinite(feasible_values[h + 1][jnp.where(nb[s] >= 0, nb[s], 0)])
    moving = ok & (nb[s] != s)
    ok = ok if allow_stay else jnp.where(jnp.any(moving), moving, ok)
    return jnp.argmax(jnp.where(ok, score[jnp.where(nb[s] >= 0, nb[s], 0)], -jnp.inf))


def _choose(method, key, problem, feasible_values, post, h, s, lookahead=None):
    Phi, beta = problem.Phi, problem.beta
    mean, A, L = _solve_factor(post, Phi)
    sd = jnp.sqrt(jnp.maximum(jnp.sum(A**2, 0), 0.0))
    if method == "tcbo":
        mask = candidates(mean, sd, beta)
        G = A.T @ A
        g = jnp.diag(G)
        _, z, z2 = _masked_max_pair(g[:, None] + g[None, :] - 2.0 * G, mask)
        u = Phi @ jsl.cho_solve((L, True), Phi[z] - Phi[z2])
        return _plan_action(problem, feasible_values, u**2, h, s, 1.0 / problem.plan_noise_sd**2, lookahead)
    if method == "ucb_path":
        return _plan_action(problem, feasible_values, mean + beta * sd, h, s, lookahead=lookahead)
    if method == "ei_path":
        best = jnp.max(mean)
        sd_ = jnp.maximum(sd, 1e-12)
        z = (mean - best) / sd_
        ei = (mean - best) * norm.cdf(z) + sd_ * norm.pdf(z)
        return _plan_action(problem, feasible_values, ei, h, s, lookahead=lookahead)
    if method in ("greedy_ucb_stay", "greedy_ucb_move"):
        return _greedy_action(problem, feasible_values, mean + beta * sd, h, s, method == "greedy_ucb_stay")
    # random walk over the moves that keep the end constraint satisfiable
    nb = problem.neighbours
    ok = (nb[s] >= 0) & jnp.isfinite(feasible_values[h + 1][jnp.where(nb[s] >= 0, nb[s], 0)])
    return jax.random.choice(key, nb.shape[1], p=ok / jnp.sum(ok))


def _choose_int(method, lookahead, *args):
    return jnp.asarray(_choose(method, *args, lookahead=lookahead), jnp.int32)


def _run_one(method_index, problem, key, f_given, start, horizon, episodes, lookahead, sample_f, branch_names):
    Phi, nb = problem.Phi, problem.neighbours
    kf, key = jax.random.split(key)
    f = Phi @ jax.random.normal(kf, (Phi.shape[1],), Phi.dtype) if sample_f else f_given
    zero = jnp.zeros(nb.shape, Phi.dtype)
    feasible_values, _ = backward_induction(jnp.broadcast_to(zero, (horizon,) + nb.shape), nb, problem.terminal)

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


def run(method: str, problem: Problem, keys, *, horizon: int, episodes: int, f=None, starts=None,
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
    if method not in compiled_with:
        raise ValueError(f"compiled_with must contain the method {method!r}, got {compiled_with}")
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
        starts = np.asarray(check_array(starts, "starts", ndim=1, kind="int"))
        check_shape(starts, "starts", (n_seeds,))
        if np.any((starts < 0) | (starts >= n_states)):
            raise ValueError(f"starts must be states in [0, {n_states - 1}], got {starts.min()}..{starts.max()}")
    feasible = backward_induction(jnp.zeros((horizon,) + problem.neighbours.shape, problem.Phi.dtype),
                                  problem.neighbours, problem.terminal)[0][0]
    if not bool(jnp.all(jnp.isfinite(feasible[starts]))):
        raise ValueError(f"no feasible path of {horizon} moves from the start meets the end constraint")
    starts = jnp.asarray(starts, jnp.int32)
    return _run_batch(jnp.asarray(compiled_with.index(method)), problem, keys, f_given, starts, horizon, episodes,
                      lookahead, f is None, compiled_with)


# one compiled program per problem shape serves every method of `compiled_with` (a traced index)
_run_batch = jax.jit(jax.vmap(_run_one, in_axes=(None, None, 0, 0, 0, None, None, None, None, None)),
                     static_argnums=(5, 6, 7, 8, 9))
