"""xfmr.tcbo.mdp: move tables of grids, their error paths, and the DP planner against
enumeration of every path over drawn grids, rewards, starts, horizons and end states."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xfmr.tcbo import mdp


def test_grid_states_move_table():
    coords, nb = mdp.grid_states(2, 3)
    assert coords.shape == (6, 2) and nb.shape == (6, 5)
    # state 0 = (0, 0): stay, down -> (1, 0) = 3, up leaves, right -> 1, left leaves
    np.testing.assert_array_equal(nb[0], [0, 3, -1, 1, -1])
    np.testing.assert_array_equal(nb[5], [5, -1, 2, -1, 4])
    np.testing.assert_allclose(coords[5], [1.0, 1.0])


def test_obstacles_and_monotone():
    free = np.array([[True, False], [True, True]])
    coords, nb = mdp.grid_states(2, 2, free=free)
    assert len(coords) == 3  # states (0,0), (1,0), (1,1)
    np.testing.assert_array_equal(nb[0], [0, 1, -1, -1, -1])  # right is the obstacle
    _, nb = mdp.grid_states(3, 3, monotone_axis=1)
    assert np.all(nb[:, 4] == -1)  # "left" decreases the column
    assert nb[4, 3] == 5


@pytest.mark.parametrize("bad,match", [
    (np.array([[0, 2], [1, 0]]), "leaves the 2 states"),
    (np.array([[0, -2], [1, 0]]), "leaves the 2 states"),
    (np.array([[1, -1], [-1, -1]]), "state 1 has no allowed move"),
])
def test_bad_move_tables(bad, match):
    with pytest.raises(ValueError, match=match):
        mdp.best_path(np.zeros(2), bad, 0, 2)


def test_grid_argument_errors():
    with pytest.raises(ValueError, match="has no allowed move"):  # only "down": the bottom row is stuck
        mdp.grid_states(3, 3, moves=((1, 0),))
    with pytest.raises(ValueError, match="moves"):
        mdp.grid_states(3, 3, moves=((1, 0, 0),))
    with pytest.raises(ValueError, match="free"):
        mdp.grid_states(3, 3, free=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="free cell"):
        mdp.grid_states(2, 2, free=np.zeros((2, 2), bool))
    with pytest.raises(ValueError, match="monotone_axis"):
        mdp.grid_states(2, 2, monotone_axis=2)


def test_plan_argument_errors():
    _, nb = mdp.grid_states(2, 2)
    with pytest.raises(ValueError, match="start"):
        mdp.best_path(np.zeros(4), nb, 4, 2)
    with pytest.raises(ValueError, match="start"):
        mdp.best_path(np.zeros(4), nb, -1, 2)
    with pytest.raises(TypeError, match="start"):
        mdp.best_path(np.zeros(4), nb, 1.0, 2)
    with pytest.raises(ValueError, match="horizon"):
        mdp.best_path(np.zeros(4), nb, 0, 0)
    with pytest.raises(ValueError, match="reward"):
        mdp.best_path(np.zeros((3, 4)), nb, 0, 2)
    with pytest.raises(ValueError, match="reward"):
        mdp.best_path(np.array([0.0, np.inf, 0.0, 0.0]), nb, 0, 2)
    with pytest.raises(TypeError, match="neighbours"):
        mdp.best_path(np.zeros(4), nb.astype(float), 0, 2)
    _, nb_move = mdp.grid_states(2, 2, moves=mdp.MOVES_4[1:])
    for plan in (mdp.best_path, mdp.brute_force_best_path):  # parity: 1 move cannot return without stay
        with pytest.raises(ValueError, match="no feasible path"):
            plan(np.zeros(4), nb_move, 0, 1, end=0)


@st.composite
def planning_problems(draw):
    """A grid of at most 2 x 3 cells with drawn obstacles, allowed moves (a subset of MOVES_4, the
    others marked -1, so the table keeps its 5 columns) and monotone axis; integer rewards, static
    or per step; a start, a horizon and maybe an end state."""
    rows, cols = draw(st.sampled_from([(1, 3), (2, 2), (2, 3)]))
    free = np.array(draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))).reshape(rows, cols)
    free.flat[draw(st.integers(0, rows * cols - 1))] = True
    allowed = np.array(draw(st.lists(st.booleans(), min_size=5, max_size=5)))
    monotone_axis = draw(st.sampled_from([None, 0, 1]))
    _, nb = mdp.grid_states(rows, cols, free=free, monotone_axis=monotone_axis)
    nb = np.where(allowed, nb, -1)
    if np.any(np.all(nb < 0, axis=1)):  # a state without an allowed move: not a valid MDP
        nb = mdp.grid_states(rows, cols, free=free)[1]
    n_states = nb.shape[0]
    horizon = draw(st.integers(1, 4))
    shape = draw(st.sampled_from([(n_states,), (horizon, n_states)]))
    reward = np.array(draw(st.lists(st.integers(-5, 9), min_size=int(np.prod(shape)),
                                    max_size=int(np.prod(shape))))).reshape(shape).astype(float)
    start = draw(st.integers(0, n_states - 1))
    end = draw(st.one_of(st.none(), st.integers(0, n_states - 1)))
    return reward, nb, start, horizon, end


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planning_problems())
def test_best_path_equals_brute_force(problem):
    reward, nb, start, horizon, end = problem
    try:
        ref, _, n_paths = mdp.brute_force_best_path(reward, nb, start, horizon, end=end)
    except ValueError as err:  # no feasible path: the DP must say so too
        assert "no feasible path" in str(err)
        with pytest.raises(ValueError, match="no feasible path"):
            mdp.best_path(reward, nb, start, horizon, end=end)
        return
    value, states = mdp.best_path(reward, nb, start, horizon, end=end)
    # integer rewards: every sum is exact in floating point, so the values agree exactly
    assert float(value) == ref
    states = np.asarray(states)
    assert states.shape == (horizon,)
    r = np.broadcast_to(reward, (horizon, nb.shape[0]))
    assert r[np.arange(horizon), states].sum() == ref  # the returned path attains the value
    prev = start
    for s in states:  # and it follows the move table
        assert s in nb[prev][nb[prev] >= 0], (prev, s)
        prev = s
    if end is not None:
        assert states[-1] == end


def test_best_path_collects_a_far_reward():
    # one rewarding corner at Manhattan distance 4 on a 3 x 3 grid: max(0, H - 3) with stay
    _, nb = mdp.grid_states(3, 3)
    reward = np.zeros(9)
    reward[8] = 1.0
    assert [float(mdp.best_path(reward, nb, 0, h)[0]) for h in (3, 4, 6)] == [0.0, 1.0, 3.0]
    # and back to the start: in the corner from move 4 to move H - 4, max(0, H - 7)
    assert [float(mdp.best_path(reward, nb, 0, h, end=0)[0]) for h in (7, 8, 9)] == [0.0, 1.0, 2.0]
