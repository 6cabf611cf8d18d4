"""Tests of xfmr.experiments.gpt against a plain NumPy reference written loop by loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr.core.nn import LN_EPS
from xfmr.experiments.gpt import GPTConfig, forward, forward_from_embedding, head, init_params


def _ln_ref(x, p):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * np.asarray(p["scale"]) + np.asarray(p["bias"])


def _reference(params, tokens, cfg, embed_scale=1.0):
    """Loop-by-loop NumPy reference of the documented model (one sequence at a time)."""
    P = jax.tree_util.tree_map(np.asarray, params)
    out = []
    for seq in np.asarray(tokens):
        n = len(seq)
        x = embed_scale * (P["embed"]["W_E"][seq] + P["embed"]["W_pos"][:n])
        for blk in P["blocks"]:
            a_in = _ln_ref(x, blk["ln1"]) if cfg.layer_norm == "pre" else x
            at = blk["attn"]
            q = a_in @ at["W_Q"] + at["b_Q"]
            k = a_in @ at["W_K"] + at["b_K"]
            v = a_in @ at["W_V"] + at["b_V"]
            z = np.zeros_like(x)
            dh = cfg.d_head
            for h in range(cfg.n_heads):
                sl = slice(h * dh, (h + 1) * dh)
                for i in range(n):
                    js = range(i + 1) if cfg.causal else range(n)
                    s = np.array([q[i, sl] @ k[j, sl] / np.sqrt(dh) for j in js])
                    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum() if cfg.softmax else s
                    z[i, sl] = sum(wj * v[j, sl] for wj, j in zip(w, js))
            a = z @ at["W_O"] + at["b_O"]
            x = cfg.attn_residual_scale * x + a
            if cfg.layer_norm == "post":
                x = _ln_ref(x, blk["ln1"])
            if cfg.mlp:
                m = blk["mlp"]
                m_in = _ln_ref(x, blk["ln2"]) if cfg.layer_norm == "pre" else x
                h_ = m_in @ m["W_in"] + m["b_in"]
                h_ = np.maximum(h_, 0) if cfg.activation == "relu" else np.asarray(
                    jax.nn.gelu(h_, approximate=False))
                x = x + h_ @ m["W_out"] + m["b_out"]
                if cfg.layer_norm == "post":
                    x = _ln_ref(x, blk["ln2"])
        if cfg.layer_norm == "pre":
            x = _ln_ref(x, P["ln_f"])
        out.append(x @ P["unembed"]["W_U"] + P["unembed"]["b_U"])
    return np.stack(out)


def _randomise_biases(params, key):
    """Non-zero biases and LN parameters so that every term is exercised."""
    leaves, tree = jax.tree_util.tree_flatten_with_path(params)
    keys = jax.random.split(key, len(leaves))
    new = []
    for (path, leaf), k in zip(leaves, keys):
        name = str(path[-1])
        if "b_" in name or "bias" in name or "scale" in name:
            leaf = leaf + 0.3 * jax.random.normal(k, leaf.shape, leaf.dtype)
        new.append(leaf)
    return jax.tree_util.tree_unflatten(tree, new)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    n_layers=st.integers(1, 3),
    n_heads=st.sampled_from([1, 2]),
    layer_norm=st.sampled_from(["none", "pre", "post"]),
    softmax=st.booleans(),
    mlp=st.booleans(),
    activation=st.sampled_from(["relu", "gelu"]),
    rho=st.sampled_from([1.0, 0.0, 0.5]),
    causal=st.booleans(),
)
def test_forward_matches_reference(n_layers, n_heads, layer_norm, softmax, mlp, activation,
                                   rho, causal):
    cfg = GPTConfig(vocab_size=7, max_len=6, d_model=4, n_layers=n_layers, n_heads=n_heads,
                    layer_norm=layer_norm, softmax=softmax, mlp=mlp, activation=activation,
                    attn_residual_scale=rho, causal=causal, init_std=0.7)
    params = _randomise_biases(init_params(jax.random.key(1), cfg, jnp.float64),
                               jax.random.key(2))
    tokens = jax.random.randint(jax.random.key(3), (2, 5), 0, 7)
    got = forward(params, tokens, cfg, embed_scale=1.3)
    ref = _reference(params, tokens, cfg, embed_scale=1.3)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-10, atol=1e-10)


def test_shapes_dtype_and_attention():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=8, n_layers=2, n_heads=2)
    for dtype in (jnp.float32, jnp.float64):
        params = init_params(jax.random.key(0), cfg, dtype)
        tokens = jnp.zeros((3, 18), jnp.int32)
        logits, attn = forward(params, tokens, cfg, return_attention=True, embed_scale=2.0)
        assert logits.shape == (3, 18, 12) and logits.dtype == dtype
        assert len(attn) == 2 and attn[0].shape == (3, 2, 18, 18) and attn[0].dtype == dtype
        np.testing.assert_allclose(np.asarray(attn[1].sum(-1)), 1.0, rtol=1e-5)
        assert float(jnp.abs(jnp.triu(attn[0], 1)).max()) == 0.0  # causal


def test_init_statistics_and_layout():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=128, layer_norm="pre")
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    W = params["blocks"][0]["attn"]["W_Q"]
    assert abs(float(W.std()) - 0.8 / np.sqrt(128)) < 0.01 * 0.8 / np.sqrt(128) * 5
    assert params["blocks"][0]["mlp"]["W_in"].shape == (128, 512)
    assert float(jnp.abs(params["blocks"][0]["attn"]["b_Q"]).max()) == 0.0
    assert set(params) == {"embed", "blocks", "ln_f", "unembed"}
    assert set(params["blocks"][0]) == {"attn", "mlp", "ln1", "ln2"}
    assert "ln_f" not in init_params(jax.random.key(0), GPTConfig(12, 18, 8))


def test_causality_and_positions():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=8, n_layers=2, layer_norm="pre")
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    t1 = jax.random.randint(jax.random.key(1), (4, 18), 0, 12)
    t2 = t1.at[:, 12:].set((t1[:, 12:] + 1) % 12)
    l1, l2 = forward(params, t1, cfg), forward(params, t2, cfg)
    np.testing.assert_allclose(np.asarray(l1[:, :12]), np.asarray(l2[:, :12]), rtol=1e-12)
    assert float(jnp.abs(l1[:, 12:] - l2[:, 12:]).max()) > 1e-6
    pos = jnp.arange(11, 17)
    np.testing.assert_allclose(np.asarray(forward(params, t1, cfg, positions=pos)),
                               np.asarray(l1[:, 11:17]), rtol=1e-12, atol=1e-13)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="layer_norm"):
        GPTConfig(12, 18, 8, layer_norm="mid")
    with pytest.raises(ValueError, match="d_model"):
        GPTConfig(12, 18, 6, n_heads=4)
    with pytest.raises(ValueError, match="activation"):
        GPTConfig(12, 18, 8, activation="tanh")
    cfg = GPTConfig(12, 18, 8)
    params = init_params(jax.random.key(0), cfg)
    with pytest.raises(ValueError, match="tokens"):
        forward(params, jnp.zeros((18,), jnp.int32), cfg)
    with pytest.raises(ValueError, match="max_len"):
        forward(params, jnp.zeros((1, 19), jnp.int32), cfg)
    with pytest.raises(TypeError, match="tokens"):
        forward(params, jnp.zeros((1, 4)), cfg)
    with pytest.raises(TypeError, match="config"):
        init_params(jax.random.key(0), {"d_model": 8})
    with pytest.raises(TypeError, match="config"):
        forward(params, jnp.zeros((1, 4), jnp.int32), {"d_model": 8})
    with pytest.raises(ValueError, match="n_layers=2"):
        forward(params, jnp.zeros((1, 4), jnp.int32), GPTConfig(12, 18, 8, n_layers=2))
    with pytest.raises(ValueError, match="dtype"):
        init_params(jax.random.key(0), cfg, jnp.int32)
    x = jnp.zeros((1, 4, 8))
    pre = GPTConfig(12, 18, 8, layer_norm="pre")
    with pytest.raises(ValueError, match="stop_after_last_attention"):
        forward_from_embedding(init_params(jax.random.key(0), pre), x, pre, stop_after_last_attention=True)
    with pytest.raises(ValueError, match="head needs"):
        head(init_params(jax.random.key(0), pre), x, pre)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"d_model": 0}, ValueError, "d_model"), ({"d_model": 8.0}, TypeError, "d_model"),
    ({"n_layers": True}, TypeError, "n_layers"), ({"d_mlp": 0}, ValueError, "d_mlp"),
    ({"init_std": 0.0}, ValueError, "init_std"), ({"init_std": "big"}, TypeError, "init_std"),
    ({"softmax": 1}, TypeError, "softmax"), ({"attn_residual_scale": None}, TypeError, "attn_residual_scale"),
])
def test_config_checks(kwargs, error, match):
    args = dict(vocab_size=12, max_len=18, d_model=8) | kwargs
    with pytest.raises(error, match=match):
        GPTConfig(**args)
    assert GPTConfig(np.int64(12), np.int32(18), np.int64(8)).d_model == 8  # NumPy ints
