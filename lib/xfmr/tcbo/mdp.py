"""The MDP of transition-constrained BO and its exact planner (dynamic programming).

States ``s = 0..S-1`` (cells of a grid, optionally with obstacles); a move table
``neighbours`` of shape (S, A) gives the state entered by action ``a`` from ``s``, ``-1`` where
the move does not exist. Transitions are known and deterministic. A path of ``horizon`` moves
from ``start`` collects a reward in every state it enters.

The best path under rewards on states (or on moves) is a longest-path problem, solved exactly
by backward induction, one ``lax.scan`` step per move:

    V_H = terminal,   V_h(s) = max_a [ r_h(s, a) + V_{h+1}(neighbours[s, a]) ]

(:func:`backward_induction`); :func:`best_path` wraps it and rolls the maximising policy out,
:func:`brute_force_best_path` enumerates every path (for tiny problems and tests). A terminal
value of -inf outside a state ``end`` forces the path to end there.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import (check_array, check_choice, check_finite, check_int, check_shape)

__all__ = [
    "MOVES_4",
    "grid_states",
    "check_neighbours",
    "edge_rewards",
    "terminal_values",
    "backward_induction",
    "rollout",
    "best_path",
    "brute_force_best_path",
]

#: stay, down, up, right, left as (row, column) steps; the first move is "stay".
MOVES_4 = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))


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
    moves = np.asarray(check_shape(check_array(moves, "moves", ndim=2, kind="int"), "moves", (None, 2)))
    if len(moves) < 1:
        raise ValueError("moves must hold at least one (row step, column step) pair")
    if monotone_axis is not None:
        check_choice(monotone_axis, "monotone_axis", (0, 1))
    free = np.ones((n_rows, n_cols), bool) if free is None else np.asarray(free, bool)
    check_shape(free, "free", (n_rows, n_cols))
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


def edge_rewards(state_reward, neighbours) -> jax.Array:
    """Rewards on moves from rewards on the states they enter: (..., S) -> (..., S, A).

    ``out[..., s, a] = state_reward[..., neighbours[s, a]]``, 0 where the move does not exist
    (:func:`backward_induction` never takes such a move).
    """
    valid = neighbours >= 0
    return jnp.where(valid, state_reward[..., jnp.where(valid, neighbours, 0)], 0.0)


def terminal_values(n_states: int, end: int | None, dtype) -> jax.Array:
    """(S,) values of ending in each state: 0 everywhere, or 0 at ``end`` and -inf elsewhere."""
    if end is None:
        return jnp.zeros(n_states, dtype)
    return jnp.where(jnp.arange(n_states) == end, 0.0, -jnp.inf).astype(dtype)


@jax.jit
def backward_induction(edge_reward, neighbours, terminal):
    """Backward induction for the best path under rewards on moves.

    Args:
        edge_reward: (H, S, A) reward for taking move a from state s at
            step h.
        neighbours: (S, A) move table (-1 = no move), already validated.
        terminal: (S,) value of ending in each state (0, or -inf to
            forbid an end state).

    Returns:
        ``values`` (H + 1, S): values[h, s] = best total reward of the
        moves h..H-1 from s
        (-inf if no feasible path), and ``policy`` (H, S) the maximising
        move index.

    V_H = terminal;  V_h(s) = max_a [ r_h(s, a) + V_{h+1}(neighbours[s,
    a]) ] over existing moves.
    """
    valid = neighbours >= 0
    nb = jnp.where(valid, neighbours, 0)

    def step(v_next, r_h):
        q = jnp.where(valid, r_h + v_next[nb], -jnp.inf)
        return q.max(1), (q.max(1), q.argmax(1))

    _, (values, policy) = jax.lax.scan(
        step, terminal, edge_reward, reverse=True
    )
    return jnp.concatenate([values, terminal[None]], 0), policy


@jax.jit
def rollout(policy, neighbours, start) -> jax.Array:
    """The states (H,) entered by following ``policy`` (H, S) from ``start`` through ``neighbours``."""
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


def _no_path(horizon: int, start: int, end: int | None) -> ValueError:
    return ValueError(f"no feasible path of {horizon} moves from state {start} ends in state {end}")


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
    edge = edge_rewards(reward, nb)
    values, policy = backward_induction(edge, nb, terminal_values(nb.shape[0], end, edge.dtype))
    value = values[0, start]
    if not bool(jnp.isfinite(value)):
        raise _no_path(horizon, start, end)
    return value, rollout(policy, nb, jnp.asarray(start))


def brute_force_best_path(reward, neighbours, start, horizon, *, end=None):
    """Enumerate every feasible path (exponential: for tiny problems and tests only).

    Same arguments and result as :func:`best_path`, plus the number of feasible paths.
    """
    reward, nb, start, horizon, end = _check_plan_args(reward, neighbours, start, horizon, end)
    reward, nb = np.asarray(reward), np.asarray(nb)
    best, best_states, n_paths = -np.inf, None, 0
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
                best, best_states = total, states
    if best_states is None:
        raise _no_path(horizon, start, end)
    return best, np.array(best_states), n_paths
