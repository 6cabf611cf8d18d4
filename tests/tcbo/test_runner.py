"""xfmr.tcbo.runner: every method's paths follow the move table and the end constraint, the
regret is that of the posterior-mean recommendation (recomputed with xfmr.bayesopt.gp), a
one-move lookahead planner is the greedy rule, and the error paths."""

import jax
import numpy as np
import pytest

from xfmr.bayesopt import gp
from xfmr.tcbo import mdp, runner, weight_gp

LENGTHSCALE = 0.5


def _paths_follow(states, nb, starts, horizon):
    for run_states, start in zip(np.asarray(states), starts):
        prev = start
        for t, s in enumerate(run_states):
            if t % horizon == 0:
                prev = start
            assert s in nb[prev][nb[prev] >= 0], (t, prev, s)
            prev = s


def test_every_method_follows_the_moves_and_returns():
    free = np.ones((3, 4), bool)
    free[1, 1:3] = False
    coords, nb = mdp.grid_states(3, 4, free=free)
    prob = runner.make_problem(weight_gp.features(coords, lengthscale=LENGTHSCALE), nb, 0, end=0)
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    for method in runner.METHODS:  # one compiled program serves every method
        out = runner.run_episodes(method, prob, keys, horizon=6, episodes=2)
        s = np.asarray(out["states"])
        assert s.shape == (2, 12) and np.all(s[:, 5::6] == 0), method  # every episode ends at the start
        _paths_follow(s, nb, [0, 0], 6)
        f = np.asarray(out["f"])
        np.testing.assert_array_equal(np.asarray(out["found"]), np.asarray(out["regret"]) == 0)
        assert np.all(np.isin(np.asarray(out["regret"]), f.max(1, keepdims=True) - f)), method
        if method == "greedy_ucb_move":  # it stays only late, to be back at the start
            prev = np.concatenate([np.zeros((2, 1), int), s[:, :-1]], 1)
            prev[:, ::6] = 0
            stayed = np.argwhere(s == prev)
            assert all(t % 6 >= 3 for _, t in stayed), stayed
        if method == "random":  # a random walk differs between seeds
            assert not np.array_equal(s[0], s[1])


def test_fixed_truth_starts_regret_and_lookahead():
    coords, nb = mdp.grid_states(3, 4)
    Phi = weight_gp.features(coords, lengthscale=LENGTHSCALE, rel_tol=1e-12)
    noise_sd = 1e-3  # nearly noiseless: the recommendation can be recomputed from f at the path
    prob = runner.make_problem(Phi, nb, 0, end=0, noise_sd=noise_sd)  # every episode returns to state 0
    keys = jax.random.split(jax.random.PRNGKey(2), 3)
    f = np.sin(7.0 * np.arange(12) / 12) + np.arange(12) / 12
    starts = np.array([5, 0, 11])
    kw = dict(horizon=6, episodes=2, f=f, starts=starts)
    # planning one move ahead (ending where the episode can still be completed) = greedy
    ucb1 = runner.run_episodes("ucb_path", prob, keys, lookahead=1, compiled_with=("ucb_path",), **kw)
    greedy = runner.run_episodes("greedy_ucb_stay", prob, keys, compiled_with=("greedy_ucb_stay",), **kw)
    s = np.asarray(greedy["states"])
    np.testing.assert_array_equal(ucb1["states"], s)
    assert np.all(s[:, 5::6] == 0) and len(np.unique(s)) > 2
    _paths_follow(s[:, :6], np.asarray(nb), starts, 6)
    # the regret after each measurement: f* - f(argmax of the posterior mean given the path)
    K = np.asarray(gp.rbf_kernel(coords, coords, lengthscale=LENGTHSCALE, outputscale=1.0))
    checked = 0
    for seed in range(3):
        for t in range(12):
            seen = s[seed, :t + 1]  # function-space GP mean K_*x (K_xx + noise^2 I)^-1 f(x)
            mean = K[:, seen] @ np.linalg.solve(K[np.ix_(seen, seen)] + noise_sd**2 * np.eye(t + 1), f[seen])
            top = np.sort(mean)[-2:]
            if top[1] - top[0] > 0.01:  # a clear recommendation, not moved by the noise
                assert greedy["regret"][seed, t] == f.max() - f[int(np.argmax(mean))], (seed, t)
                checked += 1
    assert checked >= 30, checked


def test_ground_truth_is_a_gp_sample():
    # f = Phi theta, theta ~ N(0, I): over seeds its covariance is Phi Phi^T = K
    coords, nb = mdp.grid_states(2, 2)
    Phi = weight_gp.features(coords, lengthscale=LENGTHSCALE)
    n_seeds = 4000
    keys = jax.random.split(jax.random.PRNGKey(3), n_seeds)
    out = runner.run_episodes("random", runner.make_problem(Phi, nb, 0), keys, horizon=1, episodes=1,
                              compiled_with=("random",))
    f = np.asarray(out["f"])
    K = np.asarray(gp.rbf_kernel(coords, coords, lengthscale=LENGTHSCALE, outputscale=1.0))
    assert np.max(np.abs(f.mean(0))) < 4 / np.sqrt(n_seeds)
    np.testing.assert_allclose(np.cov(f.T), K, atol=4 * np.sqrt(2 / n_seeds))  # 4 sd of an entry
    assert np.linalg.matrix_rank(f) == 4  # not one function for every seed


def test_argument_errors():
    coords, nb = mdp.grid_states(2, 2)
    Phi = weight_gp.features(coords, lengthscale=LENGTHSCALE)
    prob = runner.make_problem(Phi, nb, 0)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    with pytest.raises(ValueError, match="method"):
        runner.run_episodes("ei", prob, keys, horizon=4, episodes=1)
    with pytest.raises(ValueError, match="horizon"):
        runner.run_episodes("tcbo", prob, keys, horizon=0, episodes=1)
    with pytest.raises(ValueError, match="compiled_with"):
        runner.run_episodes("tcbo", prob, keys, horizon=6, episodes=1, compiled_with=("random",))
    with pytest.raises(ValueError, match="starts"):
        runner.run_episodes("tcbo", prob, keys, horizon=6, episodes=1, starts=np.array([0, 1, 4]))
    with pytest.raises(ValueError, match="starts"):
        runner.run_episodes("tcbo", prob, keys, horizon=6, episodes=1, starts=np.array([0, 1]))
    with pytest.raises(ValueError, match="lookahead"):
        runner.run_episodes("tcbo", prob, keys, horizon=6, episodes=1, lookahead=0)
    with pytest.raises(ValueError, match="noise_sd"):
        runner.make_problem(Phi, nb, 0, noise_sd=0.0)
    with pytest.raises(ValueError, match="beta"):
        runner.make_problem(Phi, nb, 0, beta=-1.0)
    with pytest.raises(ValueError, match="Phi"):
        runner.make_problem(Phi[:3], nb, 0)
    _, nb_move = mdp.grid_states(2, 2, moves=mdp.MOVES_4[1:])
    with pytest.raises(ValueError, match="no feasible path"):  # parity: 3 moves cannot return without stay
        runner.run_episodes("tcbo", runner.make_problem(Phi, nb_move, 0, end=0), keys, horizon=3, episodes=1)
