"""Row-major matrix calculus identities, on random matrices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import matrices
from xfmr.hessian import matrix_calculus as mc

# Few fixed shapes, because every new shape costs XLA compilations; hypothesis varies values.
# Each set has a 1 (vector or scalar factor), non-square and square factors.
dims = st.sampled_from([1, 2, 4])


def _rand(key, *shape):
    return jax.random.normal(jax.random.PRNGKey(key), shape)


def test_vec_r_is_row_major_and_invertible():
    A = jnp.arange(6.0).reshape(2, 3)
    assert mc.vec_r(A).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert jnp.array_equal(mc.unvec_r(mc.vec_r(A), (2, 3)), A)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(pmnq=st.sampled_from([(1, 2, 4, 2), (2, 4, 1, 4), (4, 2, 2, 1), (2, 2, 2, 2)]), data=st.data())
def test_kronecker_rule(pmnq, data):
    p, m, n, q = pmnq
    A, B, C = (jnp.asarray(data.draw(matrices(s))) for s in ((p, m), (m, n), (n, q)))
    lhs = mc.vec_r(A @ B @ C)
    rhs = jnp.kron(A, C.T) @ mc.vec_r(B)
    assert jnp.allclose(lhs, rhs, rtol=1e-12, atol=1e-12)
    assert jnp.allclose(mc.kron_matvec(A, C, B), rhs, rtol=1e-12, atol=1e-12)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(m=dims, n=dims, data=st.data())
def test_commutation_matrix(m, n, data):
    B = jnp.asarray(data.draw(matrices((n, m))))
    K = mc.commutation_matrix(m, n, dtype=jnp.float64)
    assert jnp.array_equal(K @ mc.vec_r(B), mc.vec_r(B.T))
    assert jnp.array_equal(K.T, mc.commutation_matrix(n, m, dtype=jnp.float64))
    assert jnp.array_equal(K @ K.T, jnp.eye(m * n))
    # Magnus-Neudecker: K_{m,n} vec(A) = vec(A^T) for A (m, n), column-major vec
    A = B.T
    assert jnp.array_equal(K @ A.T.reshape(-1), A.reshape(-1))


def test_commutation_swaps_kronecker_factors():
    A, B = _rand(0, 2, 3), _rand(1, 4, 5)
    K_left = mc.commutation_matrix(4, 2, dtype=jnp.float64)  # K_{p,m} (A kron B) K_{n,q} = B kron A
    K_right = mc.commutation_matrix(3, 5, dtype=jnp.float64)
    assert jnp.allclose(K_left @ jnp.kron(A, B) @ K_right, jnp.kron(B, A), atol=1e-14)


def test_matrix_jacobian_of_products():
    A, B, C = _rand(0, 3, 2), _rand(1, 2, 4), _rand(2, 4, 3)
    J = mc.matrix_jacobian(lambda M: A @ M @ C, B)
    assert jnp.allclose(J, jnp.kron(A, C.T), atol=1e-13)
    J_t = mc.matrix_jacobian(lambda M: M.T, B)
    assert jnp.array_equal(J_t, mc.commutation_matrix(4, 2, dtype=jnp.float64))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(shapes=st.sampled_from([(1, (2, 4), (1, 2)), (3, (2, 2), (4, 1)), (4, (1, 2), (2, 2))]), data=st.data())
def test_kron_sum_and_its_norm(shapes, data):
    n, (a1, a2), (b1, b2) = shapes
    As, Bs = jnp.asarray(data.draw(matrices((n, a1, a2)))), jnp.asarray(data.draw(matrices((n, b1, b2))))
    dense = sum(jnp.kron(As[i], Bs[i]) for i in range(n))
    assert jnp.allclose(mc.kron_sum(As, Bs), dense, atol=1e-12)
    norm_sq = mc.kron_sum_frobenius_sq(mc.gram(As), mc.gram(Bs))
    np.testing.assert_allclose(float(norm_sq), float(jnp.sum(dense**2)), rtol=1e-12)


def test_float32_is_preserved():
    A = jnp.ones((2, 2), dtype=jnp.float32)
    assert mc.kron_sum(A[None], A[None]).dtype == jnp.float32
    assert mc.commutation_matrix(2, 3).dtype == jnp.float32


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="A must be 2-D"):
        mc.vec_r(jnp.ones(3))
    with pytest.raises(ValueError, match="v must have shape"):
        mc.unvec_r(jnp.ones(5), (2, 3))
    with pytest.raises(ValueError, match="m must be an integer >= 1"):
        mc.commutation_matrix(0, 2)
    with pytest.raises(ValueError, match="C must have"):
        mc.kron_matvec(jnp.ones((2, 2)), jnp.ones((3, 2)), jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="As and Bs"):
        mc.kron_sum(jnp.ones((2, 1, 1)), jnp.ones((3, 1, 1)))
    with pytest.raises(ValueError, match="gram_B"):
        mc.kron_sum_frobenius_sq(jnp.ones((2, 2)), jnp.ones((3, 3)))
