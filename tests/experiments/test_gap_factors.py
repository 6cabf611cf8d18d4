"""xfmr.experiments.gap_factors: the closed-form Jacobian norms against autodiff, and the factorisation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.experiments.gap_factors import gap_factors, jacobian_norms

jax.config.update("jax_enable_x64", True)


def _setup(seed=0, B=2, n=5, d=4, d_k=3, d_v=3, d_o=4):
    ks = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(ks[0], (B, n, d), jnp.float64)
    W_Q, W_K = (jax.random.normal(k, (d, d_k), jnp.float64) for k in ks[1:3])
    W_V = jax.random.normal(ks[3], (d, d_v), jnp.float64)
    W_O = jax.random.normal(ks[4], (d_v, d_o), jnp.float64)
    return x, W_Q, W_K, W_V, W_O


def _layer(x, W_Q, W_K, W_V, W_O, softmax):
    n = x.shape[0]
    t = x @ W_Q @ W_K.T @ x.T / jnp.sqrt(W_Q.shape[1])
    mask = jnp.tril(jnp.ones((n, n), bool))
    a = jax.nn.softmax(jnp.where(mask, t, -jnp.inf), -1) if softmax else jnp.where(mask, t, 0.0)
    return a @ x @ W_V @ W_O


@pytest.mark.parametrize("softmax", [True, False])
def test_norms_match_autodiff(softmax):
    x, W_Q, W_K, W_V, W_O = _setup()
    pos = [1, 3, 4]
    J = jacobian_norms(x, W_Q, W_K, W_V, W_O, softmax=softmax, positions=pos)
    jq, jv = jax.jit(jax.vmap(lambda xb: jax.jacobian(
        lambda Wq, Wv: _layer(xb, Wq, W_K, Wv, W_O, softmax), argnums=(0, 1))(W_Q, W_V)))(x)
    p = jnp.array(pos)
    np.testing.assert_allclose(J["jq2"], (jq[:, p] ** 2).sum((2, 3, 4)), rtol=1e-10)
    np.testing.assert_allclose(J["jv2"], (jv[:, p] ** 2).sum((2, 3, 4)), rtol=1e-10)


def test_factors_add_up_and_scale():
    x, W_Q, W_K, W_V, W_O = _setup(1)
    f = gap_factors(x, W_Q, W_K, W_V, W_O)
    parts = f["scale_1_over_dk"] + f["weights"] + f["token_scale"] + f["moments"]
    assert abs(parts - f["total"]) < 1e-10
    assert abs(f["scale_1_over_dk"] + np.log10(3)) < 1e-12
    # x -> 10 x: softmax moments change, but without softmax the ratio is exactly homogeneous:
    # jq2 ~ x^2 * x^4, jv2 ~ x^6 (m_i is cubic): the gap does not move, the token scale does
    g1, g10 = (gap_factors(s * x, W_Q, W_K, W_V, W_O, softmax=False) for s in (1.0, 10.0))
    assert abs(g10["total"] - g1["total"]) < 1e-10
    assert abs(g10["token_scale"] - g1["token_scale"] - 4) < 1e-10


def test_errors():
    x, W_Q, W_K, W_V, W_O = _setup()
    with pytest.raises(ValueError, match="x"):
        jacobian_norms(x[0], W_Q, W_K, W_V)
    with pytest.raises(ValueError, match="W_K"):
        jacobian_norms(x, W_Q, W_K[:, :2], W_V)
    with pytest.raises(ValueError, match="W_O"):
        jacobian_norms(x, W_Q, W_K, W_V, W_O[:2])
    with pytest.raises(ValueError, match="positions"):
        jacobian_norms(x, W_Q, W_K, W_V, positions=[7])
    with pytest.raises(TypeError, match="softmax"):
        jacobian_norms(x, W_Q, W_K, W_V, softmax=1)
