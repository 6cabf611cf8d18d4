"""xfmr.bayesopt.loop on a 1-D grid: GP-EI finds the maximum; random search has the distribution
of a random search; log-EI ranks candidates whose EI underflows; invalid scores are counted and
never chosen."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from xfmr.bayesopt import acquisition, gp, loop

jax.config.update("jax_enable_x64", True)

GRID = jnp.linspace(0, 1, 101)[:, None]
G = -((GRID[:, 0] - 0.73) ** 2) + 0.1 * jnp.sin(20 * GRID[:, 0])


def problem(key):
    return GRID, G


def test_gp_ei_finds_the_grid_maximum_and_records_the_best():
    keys = jax.random.split(jax.random.key(0), 4)
    ei = jax.jit(jax.vmap(lambda k: loop.run_bayesopt(problem, loop.gp_ei_policy(n_restarts=2, n_steps=30), k,
                                                      n_init=3, n_iter=12, d=1)))(keys)
    assert ei.best.shape == (4, 15)
    assert np.all(np.diff(np.asarray(ei.best), axis=1) >= 0)  # best-so-far never decreases
    np.testing.assert_allclose(ei.best[:, -1], jnp.max(G), atol=1e-12)
    assert ei.n_invalid_scores.tolist() == [0, 0, 0, 0]


def test_random_search_has_the_distribution_of_random_search():
    """Values 0..m-1 on the grid: n_init distinct random points, then n_iter uniform draws. The
    best after them is below v with probability C(v, n_init)/C(m, n_init) * (v/m)^n_iter; the
    mean over 400 seeds matches the exact mean within 4 standard errors."""
    m, n_init, n_iter = 20, 2, 3
    values = jnp.asarray(np.random.default_rng(0).permutation(m), jnp.float64)
    grid = jnp.linspace(0, 1, m)[:, None]
    run = jax.jit(jax.vmap(lambda k: loop.run_bayesopt(lambda _: (grid, values), loop.random_policy(), k,
                                                       n_init=n_init, n_iter=n_iter, d=1).best[-1]))
    best = np.asarray(run(jax.random.split(jax.random.key(1), 400)))
    v = np.arange(m + 1)
    below = stats.hypergeom(m, v, n_init).pmf(n_init) * (v / m) ** n_iter   # P(best < v)
    pmf = np.diff(below)                                                  # P(best = v - 1)
    mean, sd = pmf @ np.arange(m), np.sqrt(pmf @ np.arange(m) ** 2 - (pmf @ np.arange(m)) ** 2)
    assert abs(best.mean() - mean) <= 4 * sd / np.sqrt(best.size), (best.mean(), mean)


def test_log_ei_ranks_candidates_whose_ei_underflows():
    """An incumbent 60 posterior standard deviations above every candidate: EI is 0 at all of
    them (an argmax of EI would take candidate 0), log-EI is finite and picks the candidate
    nearest the incumbent, where the posterior is highest."""
    X = jnp.array([[0.5], [0.0], [0.0]])
    y = jnp.array([60.0, 0.0, 0.0])
    mask = jnp.array([1.0, 0.0, 0.0])
    C = jnp.array([[0.0], [0.1], [0.2], [0.3]])
    hyper = gp.GPParams(0.05, 1.0, 1e-6)
    policy, state = loop.gp_ei_policy(hyper=hyper, standardize=False)
    scores, _ = policy(X, y, mask, C, jax.random.key(0), state)
    mean, var = gp.masked_posterior(X, y, mask, C, **hyper._asdict())
    assert np.all(np.asarray(acquisition.expected_improvement(mean, jnp.sqrt(var), 60.0)) == 0.0)
    assert np.all(np.isfinite(scores)) and int(jnp.argmax(scores)) == 3
    assert np.all(np.diff(np.asarray(scores)) > 0)


def test_invalid_scores_are_counted_and_never_chosen():
    def policy(X, y, mask, C, key, state):
        s = jax.random.uniform(key, (C.shape[0],), C.dtype)
        return s.at[0].set(jnp.nan).at[1].set(jnp.inf).at[2].set(-jnp.inf), state

    values = jnp.array([10.0, 9.0, -1.0, 1.0, 2.0])   # the invalid candidates hold the largest values
    res = loop.run_bayesopt(lambda _: (GRID[:5], values), (policy, None), jax.random.key(0), n_init=1, n_iter=6, d=1)
    assert int(res.n_invalid_scores) == 2 * 6
    assert float(res.best[0]) < 9.0 and float(res.best[-1]) == 2.0   # candidates 0 and 1 never chosen


def test_masked_standardize_and_argument_errors():
    z, mu, sd = loop.masked_standardize(jnp.array([1.0, 3.0, 100.0]), jnp.array([1.0, 1.0, 0.0]))
    np.testing.assert_allclose(z, [-1.0, 1.0, 0.0])
    assert (float(mu), float(sd)) == (2.0, 1.0)
    with pytest.raises(ValueError, match="^n_init must be"):
        loop.run_bayesopt(problem, loop.random_policy(), jax.random.key(0), n_init=0, n_iter=1, d=1)


def test_final_regret_rows_are_the_quartiles_of_the_last_column():
    r = np.array([[5.0, 4.0], [5.0, 1.0], [5.0, 3.0], [5.0, 2.0]])
    rows = loop.final_regret_rows({("p", "m"): r, ("p", "n"): 2 * r})
    assert [(x["problem"], x["method"]) for x in rows] == [("p", "m"), ("p", "n")]
    assert rows[0]["median"] == "2.50e+00"
    assert rows[0]["quartiles"] == "[1.75e+00, 3.25e+00]"
    assert rows[1]["median"] == "5.00e+00"
    with pytest.raises(ValueError, match="must be \\(n_seeds, T\\)"):
        loop.final_regret_rows({("p", "m"): np.ones(3)})
