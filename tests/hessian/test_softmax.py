"""Softmax derivatives against JAX autodiff."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import matrices

from xfmr.hessian import softmax as sm


def _scores(seed, n, scale):
    return scale * jax.random.normal(jax.random.PRNGKey(seed), (n,))


@settings(max_examples=10, deadline=None)
@given(n=st.sampled_from([1, 3, 6]), scale=st.sampled_from([1e-3, 1.0, 8.0]), data=st.data())
def test_jacobian_and_second_derivative_match_autodiff(n, scale, data):
    """Scores drawn as arrays; scale 1e-3: near-uniform, 8: near one-hot probabilities."""
    t = scale * jnp.asarray(data.draw(matrices((n,))))
    u = jnp.asarray(data.draw(matrices((n,))))
    a, J, D, H = _autodiff_references(t, u)
    assert jnp.allclose(sm.softmax_jacobian(a), J, rtol=1e-12, atol=1e-14)
    assert jnp.allclose(sm.softmax_second_derivative(a), D, rtol=1e-12, atol=1e-14)
    assert jnp.allclose(sm.softmax_second_derivative_along(a, u), H, rtol=1e-12, atol=1e-14)
    assert jnp.allclose(jnp.einsum("jkl,j->kl", sm.softmax_second_derivative(a), u), H, atol=1e-13)


@jax.jit
def _autodiff_references(t, u):
    """softmax(t), its Jacobian and second derivative, and the Hessian of <softmax(t), u>, by
    autodiff (one compiled program per length instead of one per primitive)."""
    return (jax.nn.softmax(t), jax.jacfwd(jax.nn.softmax)(t),
            jax.jacfwd(jax.jacfwd(jax.nn.softmax))(t),
            jax.hessian(lambda s: jnp.dot(jax.nn.softmax(s), u))(t))


def test_jacobian_is_psd_with_zero_row_sums():
    a = jax.nn.softmax(_scores(0, 5, 2.0))
    J = sm.softmax_jacobian(a)
    assert jnp.allclose(J.sum(axis=1), 0.0, atol=1e-15)
    assert float(jnp.linalg.eigvalsh(J).min()) > -1e-15


def test_row_softmax_jacobian_is_block_diagonal():
    T = jax.random.normal(jax.random.PRNGKey(3), (3, 4))
    ref = jax.jacfwd(lambda s: jax.nn.softmax(s.reshape(3, 4), axis=-1).reshape(-1))(T.reshape(-1))
    assert jnp.allclose(sm.row_softmax_jacobian(jax.nn.softmax(T, axis=-1)), ref, atol=1e-14)


def test_batched_and_float32():
    A = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(0), (3, 4)).astype(jnp.float32), axis=-1)
    assert sm.softmax_jacobian(A).shape == (3, 4, 4)
    assert sm.softmax_jacobian(A).dtype == jnp.float32
    assert sm.softmax_second_derivative(A).shape == (3, 4, 4, 4)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="u must have"):
        sm.softmax_second_derivative_along(jnp.ones(3) / 3, jnp.ones(4))
    with pytest.raises(TypeError, match="a must be a floating"):
        sm.softmax_jacobian(jnp.ones(3, dtype=jnp.int32))
    with pytest.raises(ValueError, match="A must be 2-D"):
        sm.row_softmax_jacobian(jnp.ones(3))
