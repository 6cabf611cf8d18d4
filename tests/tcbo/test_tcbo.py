"""xfmr.tcbo.tcbo: the DP oracle against brute-force enumeration, the weight-space GP against
xfmr.bayesopt.gp, the Danskin gradient against autodiff, Frank-Wolfe's duality gap as a certified bound,
the runner's paths against the move table, and the error paths."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.bayesopt import gp
from xfmr.tcbo import tcbo

jax.config.update("jax_enable_x64", True)


def test_grid_states_move_table():
    coords, nb = tcbo.grid_states(2, 3)
    assert coords.shape == (6, 2) and nb.shape == (6, 5)
    # state 0 = (0, 0): stay, down -> (1, 0) = 3, up leaves, right -> 1, left leaves
    np.testing.assert_array_equal(nb[0], [0, 3, -1, 1, -1])
    np.testing.assert_array_equal(nb[5], [5, -1, 2, -1, 4])
    np.testing.assert_allclose(coords[5], [1.0, 1.0])


def test_obstacles_and_monotone():
    free = np.array([[True, False], [True, True]])
    coords, nb = tcbo.grid_states(2, 2, free=free)
    assert len(coords) == 3  # states (0,0), (1,0), (1,1)
    np.testing.assert_array_equal(nb[0], [0, 1, -1, -1, -1])  # right is the obstacle
    _, nb = tcbo.grid_states(3, 3, monotone_axis=1)
    assert np.all(nb[:, 4] == -1)  # "left" decreases the column
    assert nb[4, 3] == 5


@pytest.mark.parametrize("bad,match", [
    (np.array([[0, 2], [1, 0]]), "leaves the 2 states"),
    (np.array([[0, -2], [1, 0]]), "leaves the 2 states"),
    (np.array([[1, -1], [-1, -1]]), "state 1 has no allowed move"),
])
def test_bad_move_tables(bad, match):
    with pytest.raises(ValueError, match=match):
        tcbo.best_path(np.zeros(2), bad, 0, 2)


def test_constraint_leaving_a_state_without_moves():
    # only "down" allowed: the bottom row has no move
    with pytest.raises(ValueError, match="has no allowed move"):
        tcbo.grid_states(3, 3, moves=((1, 0),))


def test_argument_errors():
    _, nb = tcbo.grid_states(2, 2)
    with pytest.raises(ValueError, match="start"):
        tcbo.best_path(np.zeros(4), nb, 4, 2)
    with pytest.raises(ValueError, match="start"):
        tcbo.best_path(np.zeros(4), nb, -1, 2)
    with pytest.raises(TypeError, match="start"):
        tcbo.best_path(np.zeros(4), nb, 1.0, 2)
    with pytest.raises(ValueError, match="horizon"):
        tcbo.best_path(np.zeros(4), nb, 0, 0)
    with pytest.raises(ValueError, match="reward"):
        tcbo.best_path(np.zeros((3, 4)), nb, 0, 2)
    with pytest.raises(TypeError, match="neighbours"):
        tcbo.best_path(np.zeros(4), nb.astype(float), 0, 2)
    with pytest.raises(ValueError, match="no feasible path"):  # parity: 1 move cannot return without stay
        _, nb_move = tcbo.grid_states(2, 2, moves=tcbo.MOVES_4[1:])
        tcbo.best_path(np.zeros(4), nb_move, 0, 1, end=0)


@pytest.mark.parametrize("seed,rows,cols,horizon,per_step,end", [
    (0, 2, 2, 4, False, None), (1, 3, 3, 5, True, None), (2, 2, 3, 6, True, 0),
    (3, 3, 2, 5, False, 5), (4, 1, 4, 4, True, None),
])
def test_best_path_matches_brute_force_exactly(seed, rows, cols, horizon, per_step, end):
    rng = np.random.default_rng(seed)
    _, nb = tcbo.grid_states(rows, cols)
    S = nb.shape[0]
    # integer rewards: every sum is exact in float64, so the values must agree exactly
    reward = rng.integers(-5, 10, size=(horizon, S) if per_step else S).astype(float)
    value, states = tcbo.best_path(reward, nb, 0, horizon, end=end)
    ref, _, n_paths = tcbo.brute_force_best_path(reward, nb, 0, horizon, end=end)
    assert n_paths > 1
    assert float(value) == ref
    states = np.asarray(states)
    r = np.broadcast_to(reward, (horizon, S))
    assert r[np.arange(horizon), states].sum() == ref  # the returned path attains the value
    prev = 0
    for s in states:  # and it follows the move table
        assert s in nb[prev]
        prev = s
    if end is not None:
        assert states[-1] == end


def test_best_path_with_obstacles_and_monotone():
    free = np.ones((3, 3), bool)
    free[1, 1] = False
    _, nb = tcbo.grid_states(3, 3, free=free, monotone_axis=0)
    reward = np.random.default_rng(7).normal(size=nb.shape[0])
    value, _ = tcbo.best_path(reward, nb, 0, 5)
    ref, _, _ = tcbo.brute_force_best_path(reward, nb, 0, 5)
    assert abs(float(value) - ref) <= 1e-12


def test_weight_space_posterior_matches_function_space_gp():
    coords, _ = tcbo.grid_states(5, 5)
    Phi = tcbo.features(coords, lengthscale=0.3, rel_tol=1e-12)
    K = gp.rbf_kernel(coords, coords, lengthscale=0.3, outputscale=1.0)
    assert float(jnp.max(jnp.abs(Phi @ Phi.T - K))) < 1e-10
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 25, size=8)
    y = rng.normal(size=8)
    post = tcbo.prior(Phi.shape[1])
    for i, yi in zip(idx, y):
        post = tcbo.update(post, Phi[i], yi, 0.2)
    mean, var = tcbo.predict(post, Phi)
    ref_mean, ref_var = gp.posterior(coords[idx], y, coords, lengthscale=0.3, outputscale=1.0, noise=0.04)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-8)
    np.testing.assert_allclose(var, ref_var, atol=1e-8)


def test_candidates():
    mean = jnp.array([0.0, 1.0, 0.5, -3.0])
    sd = jnp.array([0.1, 0.1, 0.3, 0.5])
    # max LCB = 1 - 0.2 = 0.8; UCBs 0.2, 1.2, 1.1, -2
    np.testing.assert_array_equal(tcbo.candidates(mean, sd, 2.0), [False, True, True, False])


def _small_design_problem(seed=0):
    coords, nb = tcbo.grid_states(3, 3)
    Phi = tcbo.features(coords, lengthscale=0.5)
    rng = np.random.default_rng(seed)
    post = tcbo.prior(Phi.shape[1])
    for i in rng.integers(0, 9, size=3):
        post = tcbo.update(post, Phi[i], 0.0, 0.3)
    mask = jnp.array([True, False, True, False, True, False, False, True, True])
    return coords, nb, Phi, post.precision, mask


def test_danskin_gradient_matches_autodiff():
    _, _, Phi, V, mask = _small_design_problem()
    Psi = Phi / 0.3
    d = jnp.asarray(np.random.default_rng(1).dirichlet(np.ones(9)))
    value, grad = tcbo.utility_gradient(d, Psi, Phi, V, mask, 7)
    auto = jax.grad(tcbo.utility)(d, Psi, Phi, V, mask, 7)
    assert abs(float(value - tcbo.utility(d, Psi, Phi, V, mask, 7))) < 1e-14
    np.testing.assert_allclose(grad, auto, rtol=1e-9, atol=1e-12)
    assert bool(jnp.all(grad <= 0))


def test_frank_wolfe_gap_bounds_the_optimum():
    _, nb, Phi, V, mask = _small_design_problem(2)
    horizon = 4
    utilities, gaps, d = tcbo.frank_wolfe(Phi, 0.3, V, mask, nb, 0, horizon, 12)
    assert bool(jnp.all(gaps >= -1e-12))
    assert abs(float(jnp.sum(d)) - 1.0) < 1e-12
    # the best single path (brute force over all paths) cannot beat U(d_k) - gap_k
    import itertools
    best_path_utility = np.inf
    for actions in itertools.product(range(nb.shape[1]), repeat=horizon):
        s, states = 0, []
        for a in actions:
            s = nb[s, a]
            if s < 0:
                break
            states.append(s)
        else:
            dp = jnp.zeros(9).at[jnp.array(states)].add(1.0 / horizon)
            best_path_utility = min(best_path_utility, float(tcbo.utility(dp, Phi / 0.3, Phi, V, mask, horizon)))
    lower = float(jnp.max(utilities[:-1] - gaps))
    assert lower <= best_path_utility + 1e-12
    assert float(utilities[-1]) <= float(utilities[0]) + 1e-12


def _paths_follow(states, nb, start, horizon):
    for run_states in np.asarray(states):
        prev = start
        for t, s in enumerate(run_states):
            if t % horizon == 0:
                prev = start
            assert s in nb[prev], (t, prev, s)
            prev = s


def test_runner_every_method_follows_the_moves_and_returns():
    free = np.ones((3, 4), bool)
    free[1, 1:3] = False
    coords, nb = tcbo.grid_states(3, 4, free=free)
    Phi = tcbo.features(coords, lengthscale=0.5)
    prob = tcbo.make_problem(Phi, nb, 0, end=0)
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    for method in tcbo.METHODS:  # one compiled program serves every method
        out = tcbo.run(method, prob, keys, horizon=6, episodes=2)
        s = np.asarray(out["states"])
        assert out["regret"].shape == (2, 12) and bool(jnp.all(out["regret"] >= 0))
        last = np.asarray(out["regret"])[:, -1]
        np.testing.assert_array_equal(np.asarray(out["found"])[:, -1], last == 0)
        assert np.all(s[:, 5::6] == 0), method  # every episode ends at the start
        _paths_follow(s, nb, 0, 6)
        if method == "greedy_ucb_move":  # it stays only on the last move, to be back at the start
            prev = np.concatenate([np.zeros((2, 1), int), s[:, :-1]], 1)
            prev[:, ::6] = 0
            stayed = np.argwhere(s == prev)
            assert all(t % 6 == 5 or (t % 6 >= 3) for _, t in stayed), stayed
    with pytest.raises(ValueError, match="method"):
        tcbo.run("ei", prob, keys, horizon=4, episodes=1)
    with pytest.raises(ValueError, match="horizon"):
        tcbo.run("tcbo", prob, keys, horizon=0, episodes=1)
    with pytest.raises(ValueError, match="no feasible path"):
        _, nb_move = tcbo.grid_states(2, 2, moves=tcbo.MOVES_4[1:])
        prob2 = tcbo.make_problem(tcbo.features(tcbo.grid_states(2, 2)[0], lengthscale=0.5), nb_move, 0, end=0)
        tcbo.run("tcbo", prob2, keys, horizon=3, episodes=1)


def test_runner_fixed_truth_starts_and_lookahead():
    coords, nb = tcbo.grid_states(3, 4)
    Phi = tcbo.features(coords, lengthscale=0.5)
    prob = tcbo.make_problem(Phi, nb, 0, end=0)  # every episode must return to state 0
    keys = jax.random.split(jax.random.PRNGKey(2), 3)
    f = np.arange(12.0) / 12
    starts = np.array([5, 0, 11])
    kw = dict(horizon=6, episodes=2, f=f, starts=starts)
    # planning one move ahead (ending where the episode can still be completed) = greedy
    ucb1 = tcbo.run("ucb_path", prob, keys, lookahead=1, compiled_with=("ucb_path",), **kw)
    greedy = tcbo.run("greedy_ucb_stay", prob, keys, compiled_with=("greedy_ucb_stay",), **kw)
    np.testing.assert_array_equal(ucb1["states"], greedy["states"])
    np.testing.assert_allclose(ucb1["f"], np.broadcast_to(f, (3, 12)))
    s = np.asarray(ucb1["states"])
    assert np.all(s[:, 5::6] == 0) and len(np.unique(s)) > 2
    for i, start in enumerate(starts):
        _paths_follow(s[i:i + 1, :6], np.asarray(nb), start, 6)
    with pytest.raises(ValueError, match="compiled_with"):
        tcbo.run("tcbo", prob, keys, horizon=6, episodes=1, compiled_with=("random",))
    with pytest.raises(ValueError, match="starts"):
        tcbo.run("tcbo", prob, keys, horizon=6, episodes=1, starts=np.array([0, 1, 12]))
    with pytest.raises(ValueError, match="lookahead"):
        tcbo.run("tcbo", prob, keys, horizon=6, episodes=1, lookahead=0)
