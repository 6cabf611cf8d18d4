"""The single self-attention layer and its autodiff Hessian reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import layer_instances

from xfmr.hessian import attention


def random_layer(seed, L, d_V, d_K, scale=1.0):
    return attention.random_instance(jax.random.PRNGKey(seed), L, d_V, d_K, input_scale=scale)


def test_layer_matches_explicit_formula():
    X, Y, W_Q, W_K, W_V = random_layer(0, 5, 4, 3)
    T = np.asarray(X) @ np.asarray(W_Q) @ np.asarray(W_K).T @ np.asarray(X).T / np.sqrt(3)
    A = np.exp(T - T.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    F = A @ np.asarray(X) @ np.asarray(W_V)
    np.testing.assert_allclose(attention.attention_layer(X, W_Q, W_K, W_V), F, rtol=1e-12)
    np.testing.assert_allclose(attention.loss(X, Y, W_Q, W_K, W_V), ((F - np.asarray(Y)) ** 2).mean(), rtol=1e-12)
    np.testing.assert_allclose(attention.attention_matrix(X, W_Q, W_K, softmax=False), T, rtol=1e-12)


def test_flatten_roundtrip_is_row_major():
    _, _, W_Q, W_K, W_V = random_layer(1, 2, 3, 2)
    w = attention.flatten_weights(W_Q, W_K, W_V)
    assert w[1] == W_Q[0, 1] and w[2] == W_Q[1, 0]
    for a, b in zip(attention.unflatten_weights(w, 3, 2), (W_Q, W_K, W_V)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=8, deadline=None)
@given(drawn=layer_instances([(1, 2, 3), (3, 2, 1), (4, 3, 4)], input_scales=(0.05, 1.0, 3.0),
                             dtypes=(np.float32, np.float64)),
       softmax=st.booleans())
def test_gauss_newton_split(drawn, softmax):
    (X, Y, W_Q, W_K, W_V), _ = drawn
    # float32: the rounding of a score t carries eps |t| into the softmax's derivatives, so the
    # tolerance grows with the largest score (saturated instances reach |t| ~ 100)
    scores = attention.attention_matrix(X, W_Q, W_K, softmax=False)
    tol = 1e-10 if X.dtype == np.float64 else 1e-4 * max(1.0, float(jnp.abs(scores).max()))
    H, H_o, H_f = attention.autodiff_hessian(X, Y, W_Q, W_K, W_V, softmax=softmax)
    assert H.dtype == X.dtype
    norm = float(jnp.linalg.norm(H)) + 1e-30
    assert float(jnp.linalg.norm(H_o + H_f - H)) <= tol * norm
    eig = jnp.linalg.eigvalsh(H_o)
    assert float(eig.min()) >= -tol * max(float(jnp.abs(eig).max()), 1e-30)
    d_V, d_K = W_Q.shape
    assert float(jnp.abs(attention.split_blocks(H_f, d_V, d_K)["VV"]).max()) == 0.0


def test_random_instance_draws_what_it_says():
    inst = attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2, weights="fan_in", query_scale=2.0)
    ref = attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2)
    np.testing.assert_array_equal(inst.X, ref.X)
    np.testing.assert_allclose(inst.W_Q, ref.W_Q, rtol=1e-15)  # 2 / sqrt(4) = 1
    np.testing.assert_allclose(inst.W_V, ref.W_V / 2.0, rtol=1e-15)
    with pytest.raises(ValueError, match="weights"):
        attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2, weights="xavier")
    with pytest.raises(TypeError, match="d_K"):
        attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2.0)
    # entries are standard normal: moments over a large instance (8000 draws each for X and Y)
    big = attention.random_instance(jax.random.PRNGKey(1), 4000, 2, 1)
    for a in (big.X, big.Y):
        assert abs(float(a.mean())) < 0.05 and abs(float(a.var()) - 1.0) < 0.05
    # the dtype is an argument, not the process flag: float32 draws are the same with x64 off
    f32 = attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2, dtype=jnp.float32)
    assert all(a.dtype == jnp.float32 for a in f32)
    with jax.enable_x64(False):
        off = attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2, dtype=jnp.float32)
        with pytest.raises(ValueError, match="jax_enable_x64"):
            attention.random_instance(jax.random.PRNGKey(0), 3, 4, 2)
    for a, b in zip(f32, off):
        np.testing.assert_array_equal(a, b)


def test_split_blocks_shapes_and_symmetry():
    X, Y, W_Q, W_K, W_V = random_layer(2, 3, 3, 2)
    H = attention.autodiff_hessian(X, Y, W_Q, W_K, W_V).H
    blocks = attention.split_blocks(H, 3, 2)
    assert blocks["QV"].shape == (6, 9) and blocks["VV"].shape == (9, 9)
    np.testing.assert_allclose(blocks["QV"], blocks["VQ"].T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(X=jnp.ones(3)), "X must be 2-D"),
        (dict(W_Q=jnp.ones((2, 2))), "W_Q must have shape"),
        (dict(W_K=jnp.ones((3, 3))), "W_K must have shape"),
        (dict(W_V=jnp.ones((3, 2))), "W_V must have shape"),
        (dict(Y=jnp.ones((3, 3))), "Y must have the shape"),
        (dict(X=jnp.ones((4, 3), dtype=jnp.int32)), "X must be a floating-point"),
    ],
)
def test_bad_input_names_the_argument(change, match):
    X, Y, W_Q, W_K, W_V = random_layer(3, 4, 3, 2)
    args = dict(X=X, Y=Y, W_Q=W_Q, W_K=W_K, W_V=W_V) | change
    with pytest.raises((ValueError, TypeError), match=match):
        attention.loss(**args)


def test_unflatten_rejects_wrong_length():
    with pytest.raises(ValueError, match="w must have shape"):
        attention.unflatten_weights(jnp.ones(5), 3, 2)
