"""Tests of xfmr.curvature: products against dense autodiff, Hutchinson against exact norms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.addition import answer_positions, make_batch
from xfmr.curvature import (cross_entropy, dense_matrices, exact_block_norms, gpt_problem,
                            hutchinson_block_norms, hutchinson_samples, mean_squared_error,
                            products, set_path, get_path, sigma_sweep)
from xfmr.gpt import GPTConfig, embed, init_params

PATHS = [("blocks", 0, "attn", n) for n in ("W_Q", "W_K", "W_V")]


def _problem(layer_norm="none", softmax=True, d=4, loss="ce"):
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=d, layer_norm=layer_norm,
                    softmax=softmax, init_std=0.8)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), 2)
    x = embed(params, tokens, 1.0)
    tgt = tokens[:, 12:]
    loss_fn = cross_entropy(tgt) if loss == "ce" else mean_squared_error(
        jax.nn.one_hot(tgt, 12, dtype=jnp.float64))
    return gpt_problem(params, cfg, x, PATHS, loss_fn, positions=answer_positions())


@pytest.mark.parametrize("layer_norm,softmax,loss", [("none", True, "ce"), ("pre", True, "ce"),
                                                     ("none", False, "mse")])
def test_products_match_dense(layer_norm, softmax, loss):
    out_fn, loss_fn, theta = _problem(layer_norm, softmax, loss=loss)
    products_j = jax.jit(lambda th, b, v: products(out_fn, loss_fn, th, b, v), static_argnums=1)
    H, G, sl = dense_matrices(out_fn, loss_fn, theta)
    scale = float(jnp.abs(H).max())
    assert float(jnp.abs(H - H.T).max()) < 1e-12 * scale
    assert float(jnp.abs(G - G.T).max()) < 1e-12 * scale
    ev = jnp.linalg.eigvalsh(G)
    assert float(ev.min()) > -1e-12 * float(ev.max())  # the GGN is PSD for a convex L
    for b in range(3):
        v = jax.random.normal(jax.random.key(b), theta[b].shape, jnp.float64)
        Gv, Hf_v = products_j(theta, b, v)
        for a in range(3):
            np.testing.assert_allclose(np.asarray(Gv[a]).ravel(),
                                       np.asarray(G[sl[a], sl[b]] @ v.ravel()), atol=1e-12 * scale)
            np.testing.assert_allclose(np.asarray(Hf_v[a]).ravel(),
                                       np.asarray((H - G)[sl[a], sl[b]] @ v.ravel()),
                                       atol=1e-12 * scale)


def test_hessian_matches_definition():
    out_fn, loss_fn, theta = _problem()
    H, _, _ = dense_matrices(out_fn, loss_fn, theta)
    w = jnp.concatenate([t.ravel() for t in theta])
    f = lambda w_: loss_fn(out_fn(tuple(w_[16 * i:16 * (i + 1)].reshape(4, 4)  # noqa
                                        for i in range(3))))
    np.testing.assert_allclose(np.asarray(H), np.asarray(jax.jit(jax.hessian(f))(w)), atol=1e-13)


def test_hutchinson_converges_to_exact_norms():
    out_fn, loss_fn, theta = _problem(d=4)
    exact = exact_block_norms(out_fn, loss_fn, theta)
    samples = jax.jit(lambda th, k: hutchinson_samples(out_fn, loss_fn, th, k, 4000))(
        theta, jax.random.key(7))
    est = hutchinson_block_norms(samples)
    for k in ("H", "G", "Hf"):
        norm, se = est[k]
        assert norm.shape == (3, 3)
        # within 5 standard errors and 3% relative, for every block
        floor = 1e-12 * exact[k].max()  # round-off of the dense H - G
        assert np.all(np.abs(norm - exact[k]) <= 5 * se + floor), (k, norm, exact[k], se)
        assert np.all(np.abs(norm - exact[k]) <= 0.04 * exact[k] + floor)
    # the value block of H_f is exactly zero (F is linear in W_V)
    assert exact["Hf"][2, 2] < 1e-12 * exact["Hf"].max() and est["Hf"][0][2, 2] < 1e-14
    # a single Rademacher probe of a P x P block gives at most P ||M||_F^2 (P = 16 here)
    q = np.asarray(samples["G"])
    assert q.shape == (3, 3, 4000) and np.all(q <= 16 * exact["G"][:, :, None] ** 2 + 1e-9)


def test_paths_helpers():
    tree = {"a": [{"b": 1}, {"b": 2}]}
    new = set_path(tree, ("a", 1, "b"), 5)
    assert get_path(new, ("a", 1, "b")) == 5 and get_path(tree, ("a", 1, "b")) == 2


def test_bad_input_raises():
    out_fn, loss_fn, theta = _problem()
    with pytest.raises(ValueError, match="n_probes"):
        hutchinson_samples(out_fn, loss_fn, theta, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="probe_blocks"):
        hutchinson_samples(out_fn, loss_fn, theta, jax.random.key(0), 2, probe_blocks=[5])
    with pytest.raises(TypeError, match="theta"):
        hutchinson_samples(out_fn, loss_fn, list(theta), jax.random.key(0), 2)
    with pytest.raises(ValueError, match="paths"):
        gpt_problem({}, None, None, [], loss_fn)


def test_linear_head_is_equivalent():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, init_std=0.8)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), 3)
    x = embed(params, tokens, 2.0)
    args = (params, cfg, x, PATHS, cross_entropy(tokens[:, 12:]))
    full = gpt_problem(*args, positions=answer_positions())
    lin = gpt_problem(*args, positions=answer_positions(), linear_head=True)
    assert abs(float(full[1](full[0](full[2]))) - float(lin[1](lin[0](lin[2])))) < 1e-13
    f = jax.jit(lambda th, k: hutchinson_samples(full[0], full[1], th, k, 3))
    g = jax.jit(lambda th, k: hutchinson_samples(lin[0], lin[1], th, k, 3))
    a, b = f(full[2], jax.random.key(2)), g(lin[2], jax.random.key(2))
    for k in ("H", "G", "Hf"):
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="linear_head"):
        gpt_problem(*args[:1], GPTConfig(12, 18, 4, layer_norm="pre"), *args[2:],
                    linear_head=True)


def test_linear_head_in_earlier_layers_is_equivalent():
    """The head after the last attention is piecewise linear whatever attention block is
    differentiated: linear_head gives the same products for blocks of layer 0 of 2."""
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, n_layers=2, init_std=0.8)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), 3)
    paths = [("blocks", 0, "attn", "W_Q"), ("blocks", 1, "attn", "W_V")]
    args = (params, cfg, embed(params, tokens, 2.0), paths, cross_entropy(tokens[:, 12:]))
    full = gpt_problem(*args, positions=answer_positions())
    lin = gpt_problem(*args, positions=answer_positions(), linear_head=True)
    a = hutchinson_samples(*full, jax.random.key(2), 3)
    b = hutchinson_samples(*lin, jax.random.key(2), 3)
    for k in ("H", "G", "Hf"):
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="linear_head"):
        gpt_problem(*args[:3], [("blocks", 1, "mlp", "W_in")], args[4], linear_head=True)


@pytest.mark.parametrize("layer_norm,softmax,loss", [("none", True, "ce"), ("pre", True, "ce"),
                                                     ("none", False, "mse")])
def test_diagonal_sweep_is_the_diagonal_of_the_full_sweep(layer_norm, softmax, loss):
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, n_layers=2, layer_norm=layer_norm,
                    softmax=softmax)
    paths = [("blocks", l, "attn", n) for l in range(2) for n in ("W_Q", "W_V")]
    kw = dict(n_seeds=1, batch_size=3, n_probes=2, loss=loss)
    full = sigma_sweep(cfg, [0.1, 2.0], paths, **kw)
    diag = sigma_sweep(cfg, [0.1, 2.0], paths, blocks="diagonal", **kw)
    off = ~np.eye(len(paths), dtype=bool)
    for k in ("H", "G", "Hf"):
        np.testing.assert_allclose(np.diagonal(diag[k], axis1=2, axis2=3),
                                   np.diagonal(full[k], axis1=2, axis2=3), rtol=1e-12, atol=0)
        assert np.all(np.isnan(diag[k][:, :, off]))
    with pytest.raises(ValueError, match="blocks"):
        sigma_sweep(cfg, [0.1], paths, blocks="upper", **kw)
