"""xfmr.bayesopt.pfn: permutation invariance, query independence, errors; a short training lowers the loss."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.bayesopt import bar, pfn
from xfmr.core.train import train

CFG = pfn.PFNConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32, n_buckets=20, max_context=8, n_points=12)


def random_params():
    params = pfn.init_params(jax.random.key(0), CFG)
    # zero-initialised projections would hide attention: randomise every leaf
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    return jax.tree_util.tree_unflatten(tree, [l + 0.3 * jax.random.normal(k, l.shape) for l, k in zip(leaves, keys)])


def test_context_order_and_other_queries_do_not_matter():
    params = random_params()
    k = jax.random.split(jax.random.key(2), 3)
    xc, yc, xq = jax.random.uniform(k[0], (6, 1)), jax.random.normal(k[1], (6,)), jax.random.uniform(k[2], (5, 1))
    out = pfn.predict(params, CFG, xc, yc, xq)
    perm = jnp.array([3, 0, 5, 1, 4, 2])
    np.testing.assert_allclose(pfn.predict(params, CFG, xc[perm], yc[perm], xq), out, atol=1e-5)
    alone = pfn.predict(params, CFG, xc, yc, xq[2:3])
    np.testing.assert_allclose(alone[0], out[2], atol=1e-5)
    moved = pfn.predict(params, CFG, xc, yc.at[0].add(1.0), xq)
    assert float(jnp.max(jnp.abs(moved - out))) > 1e-3  # the context is read


def test_errors_name_the_problem():
    params = pfn.init_params(jax.random.key(0), CFG)
    with pytest.raises(ValueError, match="longer than the model was trained for"):
        pfn.predict(params, CFG, jnp.zeros((9, 1)), jnp.zeros(9), jnp.zeros((2, 1)))
    with pytest.raises(ValueError, match="^x_query must have d = 1 columns"):
        pfn.predict(params, CFG, jnp.zeros((2, 1)), jnp.zeros(2), jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="^y_ctx must be finite"):
        pfn.predict(params, CFG, jnp.zeros((2, 1)), jnp.array([0.0, jnp.inf]), jnp.zeros((2, 1)))
    with pytest.raises(ValueError, match="must exceed config.max_context"):
        pfn.init_params(jax.random.key(0), CFG._replace(n_points=8))


def test_short_training_lowers_the_loss():
    borders = bar.normal_borders(CFG.n_buckets, 1.0)
    params = pfn.init_params(jax.random.key(0), CFG)
    sampler = pfn.make_sampler(CFG, 16, lengthscale=0.3, outputscale=1.0, noise=0.01)
    res = train(pfn.loss_fn(CFG, borders), params, sampler, optax.adam(3e-3), 150, jax.random.key(3), chunk=150)
    first, last = res.losses[:20].mean(), res.losses[-20:].mean()
    # at initialisation the output is uniform over the buckets: loss = log(B) + mean log width
    assert last < first - 0.2, (first, last)


def test_model_stays_float32_under_x64():
    # a NumPy float64 scalar in the attention once promoted the whole model to float64 (2x slower)
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        params = pfn.init_params(jax.random.key(0), CFG)
        assert {str(l.dtype) for l in jax.tree_util.tree_leaves(params)} == {"float32"}
        x, y, n = pfn.make_sampler(CFG, 2, lengthscale=0.3, outputscale=1.0, noise=0.01)(jax.random.key(1))
        assert x.dtype == y.dtype == jnp.float32
        logits = pfn.forward(params, CFG, x[0], y[0], 4)
        assert logits.dtype == jnp.float32
        assert pfn.seconds_per_step(CFG, bar.normal_borders(CFG.n_buckets, 1.0), 8, repeats=1) > 0
    finally:
        jax.config.update("jax_enable_x64", before)  # the suite runs with x64 on (conftest)


@pytest.mark.parametrize("n_keys", [8, 10, 12])
def test_forward_with_a_key_bound_equals_the_full_masked_attention(n_keys):
    # n_keys: (N, n_keys + 1) scores per layer instead of (N, N); same outputs to float32 rounding,
    # for every context size n_ctx <= n_keys (padded context rows included)
    params = random_params()
    k = jax.random.split(jax.random.key(4), 2)
    x, y = jax.random.uniform(k[0], (CFG.n_points, 1)), jax.random.normal(k[1], (CFG.n_points,))
    full = jax.jit(lambda n: pfn.forward(params, CFG, x, y, n))
    bounded = jax.jit(lambda n: pfn.forward(params, CFG, x, y, n, n_keys=n_keys))
    for n_ctx in range(n_keys + 1):
        a, b = full(n_ctx), bounded(n_ctx)
        scale = float(jnp.max(jnp.abs(a)))
        assert float(jnp.max(jnp.abs(a - b))) <= 1e-5 * scale, (n_ctx, float(jnp.max(jnp.abs(a - b))), scale)


def test_forward_matches_a_per_token_loop():
    # brute force: each token's attention written as a loop over its allowed keys
    params = random_params()
    c = CFG
    k = jax.random.split(jax.random.key(5), 2)
    x, y = np.asarray(jax.random.uniform(k[0], (7, 1))), np.asarray(jax.random.normal(k[1], (7,)))
    n_ctx, hd = 3, c.d_model // c.n_heads
    P = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)

    def ln(p, h):
        return (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * p["g"] + p["b"]

    def gelu(u):
        return 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u**3)))

    h = x @ P["x_enc"]["w"] + P["x_enc"]["b"] + (np.arange(7) < n_ctx)[:, None] * (y[:, None] @ P["y_enc"]["w"] + P["y_enc"]["b"])
    for lp in P["layers"]:
        qkv = ln(lp["ln1"], h) @ lp["qkv"]["w"] + lp["qkv"]["b"]
        q, kk, v = np.split(qkv, 3, axis=-1)
        o = np.zeros_like(h)
        for i in range(7):
            keys = [j for j in range(7) if j < n_ctx or j == i]
            for hh in range(c.n_heads):
                sl = slice(hh * hd, (hh + 1) * hd)
                s = np.array([q[i, sl] @ kk[j, sl] for j in keys]) / np.sqrt(hd)
                w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                o[i, sl] = sum(wj * v[j, sl] for wj, j in zip(w, keys))
        h = h + o @ lp["out"]["w"] + lp["out"]["b"]
        h = h + gelu(ln(lp["ln2"], h) @ lp["ff1"]["w"] + lp["ff1"]["b"]) @ lp["ff2"]["w"] + lp["ff2"]["b"]
    ref = gelu(ln(P["ln_f"], h) @ P["dec1"]["w"] + P["dec1"]["b"]) @ P["dec2"]["w"] + P["dec2"]["b"]
    for n_keys in (None, 3, 5):
        out = np.asarray(pfn.forward(params, CFG, jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), n_ctx, n_keys=n_keys))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_fit_with_hyperprior_is_fit_on_the_hyperprior_sampler():
    hp = pfn.loguniform_lengthscale(0.1, 0.5)
    kw = dict(n_steps=3, learning_rate=1e-3, warmup_steps=1)
    borders, res, cpu = pfn.fit_with_hyperprior(CFG, hp, jax.random.key(7), noise=0.01, batch_size=4, **kw)
    ref_borders = bar.normal_borders(CFG.n_buckets, 1.01**0.5)
    sampler = pfn.make_sampler(CFG, 4, lengthscale=None, outputscale=None, noise=0.01, hyperprior=hp)
    ref = pfn.fit(CFG, ref_borders, sampler, jax.random.key(7), **kw)
    np.testing.assert_array_equal(np.asarray(borders), np.asarray(ref_borders))
    np.testing.assert_array_equal(np.asarray(res.losses), np.asarray(ref.losses))
    assert cpu > 0


def test_paper_config_is_the_pfn_papers_model():
    c = pfn.paper_config(max_context=20, n_points=30)
    assert (c.d_model, c.n_heads, c.n_layers, c.d_ff, c.n_buckets) == (512, 4, 6, 1024, 1000)
    assert (c.max_context, c.n_points) == (20, 30)
    with pytest.raises(ValueError, match="n_layers"):
        pfn.paper_config(0)


def test_paper_probe_times_one_program_and_scales_to_the_callers_points(monkeypatch):
    """Every page times the same paper-size program (40 points, borders an argument), scaled
    linearly to its own points and batch."""
    seen = []

    def fake(config, borders, batch, *, probe_batch, repeats):
        seen.append((config, probe_batch, repeats))
        return float(batch)

    monkeypatch.setattr(pfn, "seconds_per_step", fake)
    a = pfn.paper_seconds_per_step(1, max_context=10, n_points=20, batch=16, scale=1.0)
    b = pfn.paper_seconds_per_step(1, max_context=30, n_points=40, batch=16, scale=1.5)
    assert (a, b) == (8.0, 16.0)
    assert seen[0] == seen[1] and seen[0][0].n_points == pfn.PAPER_PROBE_POINTS == 40
    with pytest.raises(ValueError, match="max_context"):
        pfn.paper_seconds_per_step(1, max_context=20, n_points=20, batch=16, scale=1.0)
    # 2.0 CPU-s per step: 50,000 steps are 100,000 CPU-s, 1.16 CPU-days, printed as 1
    assert pfn.paper_cost_text(2.0, 12, 16, 0.05) == (
        "measured (12 layers): 2.0 CPU-s per step at batch 16 (this page's model: 0.05); "
        "50,000 steps = 1 CPU-days on this machine")
