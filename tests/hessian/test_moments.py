"""Attention moments: definitions, matrix forms and Z_1."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import matrices

from xfmr.hessian import moments
from xfmr.hessian.softmax import softmax_jacobian


def _instance(seed, L, d, scale):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    X = jax.random.normal(k1, (L, d))
    A = jax.nn.softmax(scale * jax.random.normal(k2, (L, L)), axis=-1)
    return X, A


@st.composite
def moment_instances(draw):
    """X (L, d), V (L, d) and attention A = softmax(scale * logits): near-uniform (1e-3),
    generic (1) or near one-hot (6) rows."""
    L, d = draw(st.sampled_from([(1, 2), (3, 1), (5, 3)]))  # few shapes: each one compiles
    scale = draw(st.sampled_from([1e-3, 1.0, 6.0]))
    X, V = jnp.asarray(draw(matrices((L, d)))), jnp.asarray(draw(matrices((L, d))))
    A = jax.nn.softmax(scale * jnp.asarray(draw(matrices((L, L)))), axis=-1)
    return X, A, V


@settings(max_examples=10, deadline=None)
@given(instance=moment_instances())
def test_moments_match_definitions(instance):
    X, A, V = instance
    L = X.shape[0]
    mu = moments.attention_mean(X, A)
    Sigma = moments.attention_covariance(X, A)
    M3 = moments.attention_third_moment(X, A, V)
    T3 = moments.attention_third_moment_tensor(X, A)
    for i in range(L):
        m = sum(A[i, j] * X[j] for j in range(L))
        S = sum(A[i, j] * jnp.outer(X[j] - m, X[j] - m) for j in range(L))
        M = sum(A[i, j] * jnp.outer(X[j] - m, X[j] - m) * jnp.dot(X[j] - m, V[i]) for j in range(L))
        assert jnp.allclose(mu[i], m, atol=1e-13)
        assert jnp.allclose(Sigma[i], S, atol=1e-13)
        assert jnp.allclose(Sigma[i], X.T @ softmax_jacobian(A[i]) @ X, atol=1e-13)
        assert jnp.allclose(M3[i], M, atol=1e-13)
        assert jnp.allclose(jnp.einsum("pqr,r->pq", T3[i], V[i]), M, atol=1e-13)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(instance=moment_instances())
def test_z1_moment_form(instance):
    X, A, _ = instance
    L, d = X.shape
    Z = moments.data_attention_matrix(X, A)
    assert Z.shape == (L * d, d * d)
    assert jnp.allclose(Z, moments.data_attention_matrix_moments(X, A), atol=1e-12)


def test_moments_shrink_as_attention_sharpens():
    X = jax.random.normal(jax.random.PRNGKey(0), (6, 3))
    scores = jax.random.normal(jax.random.PRNGKey(1), (6, 6))
    norms = [float(jnp.linalg.norm(moments.attention_covariance(X, jax.nn.softmax(b * scores, axis=-1)))) for b in (1.0, 10.0, 100.0)]
    assert norms[0] > norms[1] > norms[2] and norms[2] < 1e-3 * norms[0]


def test_bad_input_names_the_argument():
    X, A = _instance(0, 3, 2, 1.0)
    with pytest.raises(ValueError, match="X must be 2-D"):
        moments.attention_mean(X[0], A)
    with pytest.raises(ValueError, match="A must have shape"):
        moments.attention_covariance(X, A[:, :2])
    with pytest.raises(ValueError, match="V must have shape"):
        moments.attention_third_moment(X, A, jnp.ones((3, 5)))
