"""xfmr.causal.notears: the acyclicity function in closed form, and recovery of a known graph."""

import jax
import numpy as np
import pytest

from xfmr.causal import notears, scm


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


def test_settings_that_would_skip_the_solver_are_errors():
    X = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (20, 3)))
    with pytest.raises(ValueError, match="^rho_max must be a real number \\(> 1.0\\), got 1.0"):
        notears.notears_linear(X, rho_max=1.0)
    with pytest.raises(ValueError, match="^rho_max must be"):
        notears.notears_linear(X, rho_max=0.5)
    with pytest.raises(ValueError, match="^max_iter must be"):
        notears.notears_linear(X, max_iter=0)
    with pytest.raises(ValueError, match="^h_tol must be"):
        notears.notears_linear(X, h_tol=-1.0)
    with pytest.raises(ValueError, match="^n \\(samples"):
        notears.notears_linear(X[:1])
    # the smallest penalty bound that runs gives an estimate
    assert notears.notears_linear(X, rho_max=1.5, max_iter=1).shape == (3, 3)


def test_closed_form_objective_and_gradient_match_autodiff_of_the_data_form():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 5))
    X = X - X.mean(0)
    w = np.abs(rng.normal(size=50)) * 0.3
    for j in range(5):                       # zero diagonal, as the bounds keep it
        w[j * 5 + j] = w[25 + j * 5 + j] = 0.0
    ref_v, ref_g = jax.value_and_grad(notears._objective)(w, X, 0.1, 10.0, 0.5)
    v, g = notears._value_and_grad_cov(w, X.T @ X / 50, 0.1, 10.0, 0.5)
    assert v == pytest.approx(float(ref_v), rel=1e-12)
    np.testing.assert_allclose(g, ref_g, rtol=1e-10, atol=1e-12)
