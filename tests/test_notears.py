"""xfmr.notears: the acyclicity function in closed form, and recovery of a known graph."""

import jax
import numpy as np
import pytest

from xfmr import notears, scm

jax.config.update("jax_enable_x64", True)


def test_acyclicity_is_zero_on_dags_and_cosh_on_a_two_cycle():
    dag = np.array([[0, 1.5, 0.3], [0, 0, -2.0], [0, 0, 0]])
    assert abs(float(notears.acyclicity(dag))) < 1e-12
    a, b = 0.7, -1.3
    cyc = np.array([[0, a], [b, 0]])
    assert float(notears.acyclicity(cyc)) == pytest.approx(2 * np.cosh(a * b) - 2, rel=1e-12)


def test_recovers_a_known_graph():
    # x0 -> x1 -> x2 and x0 -> x3 with unit noise: equal noise variances make it identifiable
    W = np.zeros((4, 4))
    W[0, 1], W[1, 2], W[0, 3] = 1.5, -1.2, 0.8
    X = np.asarray(scm.sample(jax.random.PRNGKey(0), W, 3000, "scm"))
    est = notears.notears_linear(X, lambda1=0.05, w_threshold=0.3)
    np.testing.assert_array_equal(est != 0, W != 0)
    np.testing.assert_allclose(est[W != 0], W[W != 0], atol=0.1)
    with pytest.raises(ValueError, match="n >= 2"):
        notears.notears_linear(X[:1])
