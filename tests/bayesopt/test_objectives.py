"""xfmr.bayesopt.objectives: known minima of Branin and Hartmann-3 on the unit cube."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.bayesopt import objectives

jax.config.update("jax_enable_x64", True)


def test_known_minima():
    u = (objectives.BRANIN_MINIMISERS - np.array([-5.0, 0.0])) / 15.0
    np.testing.assert_allclose(objectives.branin(u), objectives.BRANIN_MIN, atol=1e-5)
    x = jnp.array([0.114614, 0.555649, 0.852547])
    np.testing.assert_allclose(objectives.hartmann3(x), objectives.HARTMANN3_MIN, atol=1e-5)
    np.testing.assert_allclose(objectives.forrester(jnp.array([0.757249])), objectives.FORRESTER_MIN, atol=1e-5)
    assert float(jnp.min(objectives.forrester(jnp.linspace(0, 1, 10001)[:, None]))) >= objectives.FORRESTER_MIN - 1e-6
    grid = jax.random.uniform(jax.random.key(0), (20000, 3))
    assert float(jnp.min(objectives.hartmann3(grid))) > objectives.HARTMANN3_MIN


def test_gp_sample_and_errors():
    C = jnp.linspace(0, 1, 50)[:, None]
    f = objectives.gp_sample_on_grid(jax.random.key(0), C, lengthscale=0.2, outputscale=1.0)
    assert f.shape == (50,) and np.all(np.isfinite(f))
    with pytest.raises(ValueError, match="^x must have d = 2 columns"):
        objectives.branin(jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="^x must be finite"):
        objectives.hartmann3(jnp.array([0.1, jnp.nan, 0.2]))
