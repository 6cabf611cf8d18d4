"""xfmr.bayesopt.loop: the fixed-shape loop on a 1-D grid; GP-EI finds the maximum, random is worse."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.bayesopt import loop, gp

jax.config.update("jax_enable_x64", True)

GRID = jnp.linspace(0, 1, 101)[:, None]
G = -((GRID[:, 0] - 0.73) ** 2) + 0.1 * jnp.sin(20 * GRID[:, 0])


def problem(key):
    return GRID, G


def test_gp_ei_finds_the_grid_maximum_and_records_the_best():
    keys = jax.random.split(jax.random.key(0), 4)
    ei = jax.vmap(lambda k: loop.run(problem, loop.gp_ei_policy(n_restarts=2, n_steps=30), k,
                                         n_init=3, n_iter=12, d=1))(keys)
    rnd = jax.vmap(lambda k: loop.run(problem, loop.random_policy(), k, n_init=3, n_iter=12, d=1))(keys)
    assert ei.shape == (4, 15)
    assert np.all(np.diff(np.asarray(ei), axis=1) >= 0)  # best-so-far never decreases
    np.testing.assert_allclose(ei[:, -1], jnp.max(G), atol=1e-12)
    assert float(jnp.mean(rnd[:, -1])) <= float(jnp.max(G))


def test_standardise_and_argument_errors():
    z, mu, sd = loop.standardise(jnp.array([1.0, 3.0, 100.0]), jnp.array([1.0, 1.0, 0.0]))
    np.testing.assert_allclose(z, [-1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="^n_init must be"):
        loop.run(problem, loop.random_policy(), jax.random.key(0), n_init=0, n_iter=1, d=1)
