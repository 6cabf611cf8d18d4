"""Closed-form Hessian blocks (Theorems 3.1 and 3.2) against JAX autodiff in float64."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import REGIMES, layer_instances

from xfmr.hessian import attention, blocks

REL_TOL = 1e-9


def _instance(seed, L, d_V, d_K, regime="generic"):
    return attention.random_instance(jax.random.PRNGKey(seed), L, d_V, d_K, query_scale=REGIMES[regime])


def _rel(a, b, scale):
    """Relative error of a block; blocks smaller than 1e-4 of the whole Hessian (``scale``) are
    measured against 1e-4 * scale instead, i.e. an absolute error below 1e-13 * scale.

    Near one-hot attention the query/key blocks are tiny and autodiff's own rounding (the
    softmax derivative ``a (dt - a^T dt)`` cancels to ``1 - a_max``) is ~1e-16 of the whole
    Hessian, so a pure relative comparison of a 1e-12-sized block would test autodiff's noise.
    """
    return float(jnp.linalg.norm(a - b) / jnp.maximum(jnp.linalg.norm(b), 1e-4 * scale + 1e-300))


def _check_all(args, softmax=True):
    H, H_o, H_f = blocks.autodiff_blocks(*args, softmax=softmax)
    X, Y, W_Q, W_K, W_V = args
    o = blocks.outer_product_blocks(X, W_Q, W_K, W_V, softmax=softmax)
    f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V, softmax=softmax)
    scale = float(jnp.linalg.norm(blocks.assemble(H)))
    for key in blocks.BLOCK_KEYS:
        assert o[key].shape == H_o[key].shape and f[key].shape == H_f[key].shape, key
        assert _rel(o[key], H_o[key], scale) < REL_TOL, ("H_o", key)
        assert _rel(f[key], H_f[key], scale) < REL_TOL, ("H_f", key)
        assert _rel(o[key] + f[key], H[key], scale) < REL_TOL, ("H", key)
    return H, H_o, H_f


# (L, d_V, d_K): a single token; d_K > d_V; d_K < d_V. Few shapes, because every new shape
# costs an XLA compilation of the autodiff reference; hypothesis varies values, not shapes.
SHAPES = [(1, 3, 2), (4, 2, 4), (4, 3, 2)]


@pytest.mark.parametrize("softmax", [True, False])
@settings(max_examples=12, deadline=None)
@given(drawn=layer_instances(SHAPES, input_scales=(0.3, 1.0)))
def test_closed_forms_match_autodiff(softmax, drawn):
    instance, _ = drawn
    _check_all(tuple(jnp.asarray(a) for a in instance), softmax=softmax)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("regime", ["uniform", "one_hot"])
def test_named_regimes(shape, regime):
    args = _instance(0, *shape, regime)
    L = shape[0]
    A = attention.attention_matrix(args[0], args[2], args[3])
    if regime == "uniform":
        assert float(jnp.abs(A - 1.0 / L).max()) < 1e-3
    if regime == "one_hot" and L > 1:
        assert float(jnp.median(A.max(axis=1))) > 0.99
    _check_all(args)


def test_single_token_leaves_only_the_value_block():
    H, H_o, H_f = _check_all(_instance(0, 1, 3, 2))
    for key in ("QQ", "QK", "KK", "QV", "KV"):
        assert float(jnp.abs(H[key]).max()) == 0.0


def test_functional_value_block_vanishes_and_query_block_is_indefinite():
    X, Y, W_Q, W_K, W_V = _instance(3, 4, 3, 2)
    f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V)
    assert float(jnp.abs(f["VV"]).max()) == 0.0
    eig = jnp.linalg.eigvalsh(f["QQ"])
    assert float(eig.min()) < 0.0 < float(eig.max())


def test_linear_attention_is_block_hollow():
    X, Y, W_Q, W_K, W_V = _instance(4, 4, 3, 2)
    f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V, softmax=False)
    for key in ("QQ", "KK", "VV"):
        assert float(jnp.abs(f[key]).max()) == 0.0
    assert float(jnp.abs(f["QK"]).max()) > 0.0


def test_qk_gradient_is_gradient_in_product():
    X, Y, W_Q, W_K, W_V = _instance(5, 4, 3, 2)
    d_K = W_Q.shape[1]

    def loss_qk(W_QK):
        A = jax.nn.softmax(X @ W_QK @ X.T / jnp.sqrt(d_K), axis=-1)
        return jnp.sum((A @ X @ W_V - Y) ** 2) / Y.size

    ref = jax.grad(loss_qk)(W_Q @ W_K.T)
    assert jnp.allclose(blocks.qk_gradient(X, Y, W_Q, W_K, W_V), ref, rtol=1e-12, atol=1e-15)


@settings(max_examples=9, deadline=None)
@given(drawn=layer_instances(SHAPES), softmax=st.booleans())
def test_block_norms_match_dense(drawn, softmax):
    args = tuple(jnp.asarray(a) for a in drawn[0])
    dense = blocks.dense_block_norms(*blocks.autodiff_blocks(*args, softmax=softmax))
    fast = blocks.block_norms(*args, softmax=softmax)
    scale = max(float(v) for part in dense.values() for v in part.values())
    for part in ("H", "H_o", "H_f"):
        for key in blocks.DIAGONAL_KEYS:
            a, b = float(fast[part][key]), float(dense[part][key])
            assert abs(a - b) <= REL_TOL * max(b, 1e-4 * scale), (part, key, a, b)


def test_float32_is_preserved():
    args = [a.astype(jnp.float32) for a in _instance(0, 4, 3, 2)]
    X, Y, W_Q, W_K, W_V = args
    assert blocks.outer_product_blocks(X, W_Q, W_K, W_V)["QQ"].dtype == jnp.float32
    assert blocks.functional_blocks(*args)["QK"].dtype == jnp.float32
    assert blocks.block_norms(*args)["H"]["QQ"].dtype == jnp.float32


def test_bad_input_names_the_argument():
    X, Y, W_Q, W_K, W_V = _instance(0, 4, 3, 2)
    with pytest.raises(ValueError, match="X must be 2-D"):
        blocks.outer_product_blocks(X[0], W_Q, W_K, W_V)
    with pytest.raises(ValueError, match="W_K must have shape"):
        blocks.functional_blocks(X, Y, W_Q, W_K[:, :1], W_V)
    with pytest.raises(ValueError, match="W_V must have shape"):
        blocks.block_norms(X, Y, W_Q, W_K, W_V[:1])
    with pytest.raises(ValueError, match="Y must have"):
        blocks.block_norms(X, Y[:2], W_Q, W_K, W_V)
    with pytest.raises(ValueError, match="blocks must contain"):
        blocks.assemble({"QQ": W_Q})
