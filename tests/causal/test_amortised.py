"""xfmr.causal.amortised: the model's symmetries over drawn data, batches, parameters, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xfmr.causal import amortised as am

CFG = {pool: am.Config(d_max=6, width=16, n_layers=2, n_heads=2, pool=pool) for pool in ("max", "mean")}
PARAMS = {pool: am.init_params(jax.random.PRNGKey(0), cfg) for pool, cfg in CFG.items()}
N, D = 7, 5
data = hnp.arrays(np.float32, (N, D), elements=st.floats(-3.0, 3.0, width=32))


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.sampled_from(tuple(CFG)), data, st.permutations(range(D)), st.permutations(range(N)))
def test_equivariant_to_permuting_variables_invariant_to_permuting_samples(pool, X, perm_var, perm_smp):
    params, cfg = PARAMS[pool], CFG[pool]
    pv, ps = np.array(perm_var), np.array(perm_smp)
    L = np.asarray(am.forward(params, X, cfg))
    np.testing.assert_allclose(am.forward(params, X[:, pv], cfg), L[np.ix_(pv, pv)], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(am.forward(params, X[ps], cfg), L, rtol=1e-4, atol=1e-4)


def test_logits_tell_directions_apart_and_respond_to_the_data():
    X = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (N, D)))
    L = np.asarray(am.forward(PARAMS["max"], X, CFG["max"]))
    assert np.abs(L - L.T).max() > 1e-3          # not symmetric: the two directions differ
    L2 = np.asarray(am.forward(PARAMS["max"], X + np.arange(D) * X[:, :1], CFG["max"]))
    assert np.abs(L2 - L).max() > 1e-3           # other dependences, other logits


def test_leading_axes_are_a_batch_of_data_sets():
    Xs = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (2, 3, N, D)), np.float32)
    Ls = np.asarray(am.forward(PARAMS["mean"], Xs, CFG["mean"]))
    assert Ls.shape == (2, 3, D, D)
    np.testing.assert_allclose(Ls[1, 2], am.forward(PARAMS["mean"], Xs[1, 2], CFG["mean"]), rtol=1e-5, atol=1e-5)
    # fewer variables than d_max is fine, and the same model reads them
    assert am.forward(PARAMS["mean"], Xs[0, 0, :, :3], CFG["mean"]).shape == (3, 3)


def test_parameters_follow_the_core_conventions():
    p = am.init_params(jax.random.PRNGKey(0), CFG["max"], dtype=jnp.float64)
    block = p["layers"][0]["variables"]
    assert set(block["attn"]) == {"W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"}
    assert set(block["ln1"]) == {"scale", "bias"} and len(p["layers"]) == 2
    assert all(leaf.dtype == jnp.float64 for leaf in jax.tree_util.tree_leaves(p))
    # weights N(0, 1 / fan-in): the pooled standard deviation of the attention matrices
    W = np.concatenate([np.ravel(layer[ax]["attn"][m]) for layer in p["layers"] for ax in ("variables", "samples")
                        for m in ("W_Q", "W_K", "W_V", "W_O")])
    assert abs(W.std() * np.sqrt(16) - 1.0) < 4 / np.sqrt(2 * W.size)


def test_errors():
    params, cfg = PARAMS["max"], CFG["max"]
    X = np.zeros((10, 4), np.float32)
    with pytest.raises(ValueError, match="^d \\(variables, X.shape\\[-1\\]\\) must be an integer in \\[2, 6\\]"):
        am.forward(params, np.zeros((10, 7), np.float32), cfg)
    with pytest.raises(ValueError, match="X must have shape \\(..., n, d\\)"):
        am.forward(params, X[0], cfg)
    with pytest.raises(ValueError, match="^n \\(samples"):
        am.forward(params, X[:1], cfg)
    with pytest.raises(TypeError, match="floating-point"):
        am.forward(params, np.zeros((5, 3), int), cfg)
    with pytest.raises(ValueError, match="^X must be finite"):
        am.forward(params, np.full((5, 3), np.nan, np.float32), cfg)
    with pytest.raises(TypeError, match="^config must be a Config"):
        am.forward(params, X, {"d_max": 6})
    with pytest.raises(ValueError, match="divisible"):
        am.init_params(jax.random.PRNGKey(0), am.Config(d_max=4, width=10, n_heads=3))
    with pytest.raises(ValueError, match="config.pool"):
        am.init_params(jax.random.PRNGKey(0), am.Config(d_max=4, pool="sum"))
    with pytest.raises(ValueError, match="^dtype must be a floating dtype"):
        am.init_params(jax.random.PRNGKey(0), cfg, dtype=jnp.int32)
