"""xfmr.bayesopt.pfn_model: the forward pass against a per-token loop; predictions invariant to
the order of the context and independent of the other queries (drawn data); the key-bound path
equals the full masked attention; float32 under x64; errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xfmr.bayesopt import pfn_model
from xfmr.bayesopt.pfn_model import Datasets

CFG = pfn_model.PFNConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32, n_buckets=20, max_context=8, n_points=12)


def random_params():
    params = pfn_model.init_params(jax.random.key(0), CFG)
    # zero-initialised projections would hide attention: perturb every leaf
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    return jax.tree_util.tree_unflatten(tree, [l + 0.3 * jax.random.normal(k, l.shape, l.dtype)
                                               for l, k in zip(leaves, keys)])


PARAMS = random_params()
N_CTX, N_QUERY = 5, 4


@settings(max_examples=15, deadline=None, derandomize=True)
@given(xy=hnp.arrays(np.float32, (N_CTX + N_QUERY, 2), elements=st.floats(-1.0, 1.0, width=32)),
       perm=st.permutations(range(N_CTX)), j=st.integers(0, N_QUERY - 1))
def test_predictions_ignore_the_context_order_and_the_other_queries(xy, perm, j):
    xc, yc, xq = xy[:N_CTX, :1], xy[:N_CTX, 1], xy[N_CTX:, :1]
    out = pfn_model.predictive_logits(PARAMS, xc, yc, xq, CFG)
    perm = np.array(perm)
    permuted = pfn_model.predictive_logits(PARAMS, xc[perm], yc[perm], xq, CFG)
    alone = pfn_model.predictive_logits(PARAMS, xc, yc, xq[j:j + 1], CFG)
    scale = 1e-5 * max(1.0, float(jnp.max(jnp.abs(out))))
    assert float(jnp.max(jnp.abs(permuted - out))) <= scale
    assert float(jnp.max(jnp.abs(alone[0] - out[j]))) <= scale


def test_the_context_is_read():
    xy = np.asarray(jax.random.uniform(jax.random.key(2), (N_CTX + N_QUERY, 2)))
    xc, yc, xq = xy[:N_CTX, :1], xy[:N_CTX, 1], xy[N_CTX:, :1]
    out = pfn_model.predictive_logits(PARAMS, xc, yc, xq, CFG)
    moved = pfn_model.predictive_logits(PARAMS, xc, yc + np.eye(N_CTX)[0], xq, CFG)
    assert float(jnp.max(jnp.abs(moved - out))) > 1e-3


@pytest.mark.parametrize("n_keys", [8, 10])
def test_forward_with_a_key_bound_equals_the_full_masked_attention(n_keys):
    # n_keys: (N, n_keys + 1) scores per layer instead of (N, N); same outputs to float32 rounding,
    # for every context size n_ctx <= n_keys (padded context rows included)
    k = jax.random.split(jax.random.key(4), 2)
    x, y = jax.random.uniform(k[0], (CFG.n_points, 1)), jax.random.normal(k[1], (CFG.n_points,))
    full = jax.jit(lambda n: pfn_model.forward(PARAMS, Datasets(x, y, n), CFG))
    bounded = jax.jit(lambda n: pfn_model.forward(PARAMS, Datasets(x, y, n), CFG, n_keys=n_keys))
    for n_ctx in range(n_keys + 1):
        a, b = full(n_ctx), bounded(n_ctx)
        scale = float(jnp.max(jnp.abs(a)))
        assert float(jnp.max(jnp.abs(a - b))) <= 1e-5 * scale, (n_ctx, float(jnp.max(jnp.abs(a - b))), scale)


def test_forward_matches_a_per_token_loop():
    # brute force, float64 NumPy: each token's attention a loop over its allowed keys
    c = CFG
    k = jax.random.split(jax.random.key(5), 2)
    x, y = np.asarray(jax.random.uniform(k[0], (7, 1))), np.asarray(jax.random.normal(k[1], (7,)))
    n_ctx, hd = 3, c.d_model // c.n_heads
    P = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), PARAMS)

    def ln(p, h):
        return (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * p["scale"] + p["bias"]

    def gelu(u):
        return 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u**3)))

    def mlp(p, h):
        return gelu(h @ p["W_in"] + p["b_in"]) @ p["W_out"] + p["b_out"]

    E = P["embed"]
    h = x @ E["W_x"] + E["b_x"] + (np.arange(7) < n_ctx)[:, None] * (y[:, None] @ E["W_y"] + E["b_y"])
    for blk in P["blocks"]:
        a, z = blk["attn"], ln(blk["ln1"], h)
        q, kk, v = (z @ a[f"W_{n}"] + a[f"b_{n}"] for n in "QKV")
        o = np.zeros_like(h)
        for i in range(7):
            keys = [j for j in range(7) if j < n_ctx or j == i]
            for hh in range(c.n_heads):
                sl = slice(hh * hd, (hh + 1) * hd)
                s = np.array([q[i, sl] @ kk[j, sl] for j in keys]) / np.sqrt(hd)
                w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                o[i, sl] = sum(wj * v[j, sl] for wj, j in zip(w, keys))
        h = h + o @ a["W_O"] + a["b_O"]
        h = h + mlp(blk["mlp"], ln(blk["ln2"], h))
    ref = mlp(P["decoder"], ln(P["ln_f"], h))
    data = Datasets(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), n_ctx)
    for n_keys in (None, 3, 5):
        out = np.asarray(pfn_model.forward(PARAMS, data, CFG, n_keys=n_keys))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # a batch of datasets is the datasets one by one
    batch = Datasets(jnp.stack([data.x, data.x[::-1]]), jnp.stack([data.y, data.y[::-1]]), n_ctx)
    np.testing.assert_allclose(pfn_model.forward(PARAMS, batch, CFG)[0], out, rtol=1e-5, atol=1e-5)


def test_the_untrained_model_puts_equal_mass_on_every_bucket_and_stays_float32():
    # a NumPy float64 scalar in the attention once promoted the whole model to float64 (2x slower)
    params = pfn_model.init_params(jax.random.key(0), CFG)
    assert {str(l.dtype) for l in jax.tree_util.tree_leaves(params)} == {"float32"}
    x = jax.random.uniform(jax.random.key(1), (CFG.n_points, 1), jnp.float32)
    logits = pfn_model.forward(params, Datasets(x, jnp.ones(CFG.n_points, jnp.float32), 4), CFG)
    assert logits.dtype == jnp.float32 and logits.shape == (CFG.n_points, CFG.n_buckets)
    assert float(jnp.max(jnp.abs(logits))) == 0.0


def test_errors_name_the_problem():
    params = pfn_model.init_params(jax.random.key(0), CFG)
    with pytest.raises(ValueError, match="longer than the model was trained for"):
        pfn_model.predictive_logits(params, jnp.zeros((9, 1)), jnp.zeros(9), jnp.zeros((2, 1)), CFG)
    with pytest.raises(ValueError, match="^x_query must have d = 1 columns"):
        pfn_model.predictive_logits(params, jnp.zeros((2, 1)), jnp.zeros(2), jnp.zeros((2, 2)), CFG)
    with pytest.raises(ValueError, match="^y_ctx must be finite"):
        pfn_model.predictive_logits(params, jnp.zeros((2, 1)), jnp.array([0.0, jnp.inf]), jnp.zeros((2, 1)), CFG)
    with pytest.raises(ValueError, match="must exceed config.max_context"):
        pfn_model.init_params(jax.random.key(0), CFG._replace(n_points=8))
    with pytest.raises(TypeError, match="^config must be a PFNConfig"):
        pfn_model.init_params(jax.random.key(0), dict(CFG._asdict()))
