"""Tests of xfmr.experiments.curvature on the single attention layer, whose Hessian and Gauss-Newton
parts xfmr.hessian.attention computes independently (H_o = c J^T J, H_f = Hess <g, F>)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.hessian import attention
from xfmr.experiments.curvature import (CURVATURES, Problem, dense_matrices, exact_block_norms, get_path,
                            hutchinson_block_norms, hutchinson_samples, mean_squared_error_loss,
                            products, set_path)


def layer_problem(seed=0, L=4, d_V=4, d_K=4, softmax=True):
    """The paper's layer as a Problem: theta = (W_Q, W_K, W_V), loss ||F - Y||^2 / (L d_V)."""
    k = jax.random.split(jax.random.key(seed), 5)
    X = jax.random.normal(k[0], (L, d_V), jnp.float64)
    Y = jax.random.normal(k[1], (L, d_V), jnp.float64)
    theta = (jax.random.normal(k[2], (d_V, d_K), jnp.float64),
             jax.random.normal(k[3], (d_V, d_K), jnp.float64),
             jax.random.normal(k[4], (d_V, d_V), jnp.float64))
    problem = Problem(lambda th: attention.attention_layer(X, *th, softmax=softmax),
                      mean_squared_error_loss(Y), theta)
    return problem, X, Y


@pytest.mark.parametrize("softmax", [True, False])
def test_dense_matrices_match_the_attention_reference(softmax):
    problem, X, Y = layer_problem(softmax=softmax, L=3, d_V=3, d_K=2)
    dense = dense_matrices(problem)
    ref = attention.autodiff_hessian(X, Y, *problem.theta, softmax=softmax)
    scale = float(jnp.abs(ref.H).max())
    for kind in CURVATURES:
        np.testing.assert_allclose(np.asarray(getattr(dense, kind)), np.asarray(getattr(ref, kind)),
                                   atol=1e-12 * scale, rtol=0)
    assert [(s.start, s.stop) for s in dense.slices] == [(0, 6), (6, 12), (12, 21)]


def test_products_match_dense():
    problem, _, _ = layer_problem(seed=1)
    dense = dense_matrices(problem)
    scale = float(jnp.abs(dense.H).max())
    prod = jax.jit(lambda b, v: products(problem, b, v), static_argnums=0)
    for b in range(3):
        v = jax.random.normal(jax.random.key(10 + b), problem.theta[b].shape, jnp.float64)
        H_o_v, H_f_v = prod(b, v)
        for a in range(3):
            rows, cols = dense.slices[a], dense.slices[b]
            np.testing.assert_allclose(np.asarray(H_o_v[a]).ravel(),
                                       np.asarray(dense.H_o[rows, cols] @ v.ravel()), atol=1e-12 * scale)
            np.testing.assert_allclose(np.asarray(H_f_v[a]).ravel(),
                                       np.asarray(dense.H_f[rows, cols] @ v.ravel()), atol=1e-12 * scale)


def test_hutchinson_converges_to_exact_norms():
    problem, _, _ = layer_problem(seed=2)
    exact = exact_block_norms(problem)
    samples = jax.jit(lambda k: hutchinson_samples(problem, k, 4000))(jax.random.key(7))
    est = hutchinson_block_norms(samples)
    for k in CURVATURES:
        norm, se = est[k]
        assert norm.shape == (3, 3)
        floor = 1e-12 * exact[k].max()  # round-off of the dense H - H_o
        # within 5 standard errors and 4% relative, for every block
        assert np.all(np.abs(norm - exact[k]) <= 5 * se + floor), (k, norm, exact[k], se)
        assert np.all(np.abs(norm - exact[k]) <= 0.04 * exact[k] + floor)
    # the value block of H_f is exactly zero (F is linear in W_V)
    assert exact["H_f"][2, 2] < 1e-12 * exact["H_f"].max() and est["H_f"][0][2, 2] < 1e-14
    # a single Rademacher probe of a P x P block gives at most P ||M||_F^2 (P = 16 here)
    q = np.asarray(samples["H_o"])
    assert q.shape == (3, 3, 4000) and np.all(q <= 16 * exact["H_o"][:, :, None] ** 2 + 1e-9)


def test_probe_keys_are_shared_by_sub_problems():
    """A problem made of block 2 alone, with key_ids=(2,), sees the probes of block 2 of the
    full problem: its H_o(2,2) samples equal the full problem's."""
    problem, _, _ = layer_problem(seed=3)
    full = hutchinson_samples(problem, jax.random.key(5), 3)
    sub = Problem(lambda th: problem.out_fn(problem.theta[:2] + th), problem.loss_fn,
                  problem.theta[2:])
    part = hutchinson_samples(sub, jax.random.key(5), 3, key_ids=(2,))
    np.testing.assert_allclose(np.asarray(part["H_o"][0, 0]), np.asarray(full["H_o"][2, 2]), rtol=1e-12)


def test_paths_helpers():
    tree = {"a": [{"b": 1}, {"b": 2}], "t": (1, 2)}
    new = set_path(tree, ("a", 1, "b"), 5)
    assert get_path(new, ("a", 1, "b")) == 5 and get_path(tree, ("a", 1, "b")) == 2
    assert set_path(tree, ("t", 0), 9)["t"] == (9, 2)
    with pytest.raises(TypeError, match="path must index"):
        set_path({"a": 1}, ("a", "b"), 2)


def test_bad_input_raises():
    problem, _, _ = layer_problem()
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="n_probes"):
        hutchinson_samples(problem, key, 0)
    with pytest.raises(TypeError, match="n_probes"):
        hutchinson_samples(problem, key, 2.0)
    with pytest.raises(ValueError, match="probe_blocks"):
        hutchinson_samples(problem, key, 2, probe_blocks=[5])
    with pytest.raises(ValueError, match="key_ids"):
        hutchinson_samples(problem, key, 2, key_ids=(0,))
    with pytest.raises(TypeError, match="theta"):
        hutchinson_samples(problem._replace(theta=list(problem.theta)), key, 2)
    with pytest.raises(TypeError, match="Problem"):
        dense_matrices(tuple(problem))
    with pytest.raises(TypeError, match="problem.loss_fn must be callable"):
        dense_matrices(problem._replace(loss_fn=None))
    with pytest.raises(ValueError, match="problem.theta must be a non-empty tuple"):
        dense_matrices(problem._replace(theta=()))
    with pytest.raises(ValueError, match="3-D"):
        hutchinson_block_norms({"H": np.ones((2, 2))})
