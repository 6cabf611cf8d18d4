"""The single self-attention layer and its autodiff Hessian reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr import attention


def random_layer(seed, L, d_V, d_K, scale=1.0):
    k = jax.random.split(jax.random.PRNGKey(seed), 5)
    X = scale * jax.random.normal(k[0], (L, d_V))
    Y = jax.random.normal(k[1], (L, d_V))
    W_Q = jax.random.normal(k[2], (d_V, d_K))
    W_K = jax.random.normal(k[3], (d_V, d_K))
    W_V = jax.random.normal(k[4], (d_V, d_V))
    return X, Y, W_Q, W_K, W_V


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


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**16),
    L=st.integers(1, 4),
    d_V=st.integers(1, 3),
    d_K=st.integers(1, 4),
    scale=st.sampled_from([0.05, 1.0, 3.0]),
    softmax=st.booleans(),
)
def test_gauss_newton_split(seed, L, d_V, d_K, scale, softmax):
    X, Y, W_Q, W_K, W_V = random_layer(seed, L, d_V, d_K, scale)
    H, H_o, H_f = attention.autodiff_hessian(X, Y, W_Q, W_K, W_V, softmax=softmax)
    norm = float(jnp.linalg.norm(H)) + 1e-300
    assert float(jnp.linalg.norm(H_o + H_f - H)) <= 1e-10 * norm
    eig = jnp.linalg.eigvalsh(H_o)
    assert float(eig.min()) >= -1e-10 * max(float(jnp.abs(eig).max()), 1e-300)
    assert float(jnp.abs(attention.split_blocks(H_f, d_V, d_K)["VV"]).max()) == 0.0


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
