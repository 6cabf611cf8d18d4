"""Tests of xfmr.experiments.sweeps: the GPT + addition problem, its linear-head shortcut, the sweep."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.experiments.addition import answer_loss, make_batch
from xfmr.experiments.curvature import CURVATURES, Problem, cross_entropy_loss, dense_matrices, hutchinson_samples, products
from xfmr.experiments.gpt import GPTConfig, embed, forward, init_params
from xfmr.experiments.sweeps import addition_problem, gpt_problem, sigma_sweep, sweep_instance

PATHS = [("blocks", 0, "attn", n) for n in ("W_Q", "W_K", "W_V")]


def _problem(layer_norm="none", softmax=True, d=4, loss="ce"):
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=d, layer_norm=layer_norm,
                    softmax=softmax, init_std=0.8)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    return addition_problem(params, cfg, make_batch(jax.random.key(1), 2), PATHS, loss=loss)


def test_addition_problem_is_the_answer_loss():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, n_layers=2, layer_norm="pre")
    params = init_params(jax.random.key(3), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(4), 5)
    problem = addition_problem(params, cfg, tokens, PATHS, embed_scale=0.7)
    assert isinstance(problem, Problem)
    ref = jax.jit(lambda p, t: answer_loss(forward(p, t, cfg, embed_scale=0.7), t))(params, tokens)
    np.testing.assert_allclose(float(_jit_loss(problem)), float(ref), rtol=1e-13)


def _jit_loss(problem):
    """The problem's loss at its theta, compiled as one program (eager dispatch compiles every
    primitive separately: seconds per call on a GPT)."""
    return jax.jit(lambda th: problem.loss_fn(problem.out_fn(th)))(problem.theta)


def _jit_samples(problem, key, n_probes):
    """hutchinson_samples compiled as one program."""
    return jax.jit(lambda k: hutchinson_samples(problem, k, n_probes))(key)


def _jit_loss_and_samples(problem, key, n_probes):
    """The loss and hutchinson_samples, compiled together (one compilation)."""
    return jax.jit(lambda th, k: (problem.loss_fn(problem.out_fn(th)), hutchinson_samples(problem, k, n_probes)))(
        problem.theta, key)


@pytest.mark.parametrize("layer_norm,softmax,loss", [("none", True, "ce"), ("pre", True, "ce"),
                                                     ("none", False, "mse")])
def test_products_match_dense(layer_norm, softmax, loss):
    problem = _problem(layer_norm, softmax, loss=loss)
    dense = dense_matrices(problem)
    H, H_o, sl = dense.H, dense.H_o, dense.slices
    scale = float(jnp.abs(H).max())
    assert float(jnp.abs(H - H.T).max()) < 1e-12 * scale
    ev = jnp.linalg.eigvalsh(H_o)
    assert float(ev.min()) > -1e-12 * float(ev.max())  # H_o is PSD for a convex L
    vs = [jax.random.normal(jax.random.key(b), problem.theta[b].shape, jnp.float64) for b in range(3)]
    # the three blocks' products in one compiled program
    prods = jax.jit(lambda vs: [products(problem, b, v) for b, v in enumerate(vs)])(vs)
    for b, v in enumerate(vs):
        H_o_v, H_f_v = prods[b]
        for a in range(3):
            np.testing.assert_allclose(np.asarray(H_o_v[a]).ravel(),
                                       np.asarray(H_o[sl[a], sl[b]] @ v.ravel()), atol=1e-12 * scale)
            np.testing.assert_allclose(np.asarray(H_f_v[a]).ravel(),
                                       np.asarray(dense.H_f[sl[a], sl[b]] @ v.ravel()),
                                       atol=1e-12 * scale)


def _full_and_linear(cfg, paths, n_batch=3):
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), n_batch)
    full = addition_problem(params, cfg, tokens, paths, embed_scale=2.0)
    lin = addition_problem(params, cfg, tokens, paths, embed_scale=2.0, linear_head=True)
    return full, lin


@pytest.mark.parametrize("n_layers,paths", [
    (1, PATHS), (2, [("blocks", 0, "attn", "W_Q"), ("blocks", 1, "attn", "W_V")])])
def test_linear_head_is_equivalent(n_layers, paths):
    """The head after the last attention is piecewise linear whatever attention block is
    differentiated: linear_head gives the same loss and products (to 1e-7: the two programs
    round differently, and the cross-entropy curvature of confident predictions cancels digits;
    a wrong head is off by O(1))."""
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, n_layers=n_layers, init_std=0.8)
    full, lin = _full_and_linear(cfg, paths)
    loss_full, a = _jit_loss_and_samples(full, jax.random.key(2), 3)
    loss_lin, b = _jit_loss_and_samples(lin, jax.random.key(2), 3)
    assert abs(float(loss_full) - float(loss_lin)) < 1e-13
    for k in CURVATURES:
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-7, atol=1e-14)


@pytest.mark.parametrize("layer_norm,softmax,loss", [("pre", True, "ce"), ("none", False, "mse")])
def test_diagonal_sweep_is_the_diagonal_of_the_full_sweep(layer_norm, softmax, loss):
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, n_layers=2, layer_norm=layer_norm,
                    softmax=softmax)
    paths = [("blocks", 0, "attn", "W_Q"), ("blocks", 1, "attn", "W_V")]  # one block per layer
    kw = dict(n_seeds=1, batch_size=3, n_probes=2, loss=loss)
    full = sigma_sweep(cfg, [0.1, 2.0], paths, **kw)
    diag = sigma_sweep(cfg, [0.1, 2.0], paths, blocks="diagonal", **kw)
    off = ~np.eye(len(paths), dtype=bool)
    for k in CURVATURES:
        np.testing.assert_allclose(np.diagonal(diag[k], axis1=2, axis2=3),
                                   np.diagonal(full[k], axis1=2, axis2=3), rtol=1e-12, atol=0)
        assert np.all(np.isnan(diag[k][:, :, off]))


def test_sweep_measures_the_instances_it_exposes():
    """Seed r of the sweep is the Hutchinson estimate on sweep_instance(config, r)."""
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4, layer_norm="pre")
    sweep = sigma_sweep(cfg, [0.5], PATHS, n_seeds=2, batch_size=3, n_probes=2)
    inst = sweep_instance(cfg, 1, batch_size=3)
    problem = addition_problem(inst.params, cfg, inst.tokens, PATHS, embed_scale=0.5)
    q = _jit_samples(problem, inst.probe_key, 2)
    for k in CURVATURES:
        np.testing.assert_allclose(sweep[k][1, 0], np.sqrt(np.asarray(q[k]).mean(-1)), rtol=1e-10)
    assert np.array_equal(sweep["sigmas"], [0.5])
    emb = inst.params["embed"]["W_E"]
    assert abs(float(jnp.std(emb)) - 1.0) < 0.5  # the base embedding is N(0, 1), not GPT's init


def test_bad_arguments_raise():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=4)
    kw = dict(n_seeds=1, batch_size=2, n_probes=2)
    with pytest.raises(ValueError, match="blocks"):
        sigma_sweep(cfg, [0.1], PATHS, blocks="upper", **kw)
    with pytest.raises(ValueError, match="loss"):
        sigma_sweep(cfg, [0.1], PATHS, loss="hinge", **kw)
    with pytest.raises(ValueError, match="sigmas"):
        sigma_sweep(cfg, [0.1, -1.0], PATHS, **kw)
    with pytest.raises(ValueError, match="sigmas"):
        sigma_sweep(cfg, [[0.1]], PATHS, **kw)
    with pytest.raises(ValueError, match="sigmas"):
        sigma_sweep(cfg, [], PATHS, **kw)
    with pytest.raises(ValueError, match="n_seeds"):
        sigma_sweep(cfg, [0.1], PATHS, n_seeds=0, batch_size=2, n_probes=2)
    with pytest.raises(TypeError, match="n_probes"):
        sigma_sweep(cfg, [0.1], PATHS, n_seeds=1, batch_size=2, n_probes=2.0)
    with pytest.raises(ValueError, match="max_len"):
        sigma_sweep(GPTConfig(vocab_size=12, max_len=10, d_model=4), [0.1], PATHS, **kw)
    with pytest.raises(ValueError, match="paths"):
        sigma_sweep(cfg, [0.1], [], **kw)
    with pytest.raises(TypeError, match="config"):
        sigma_sweep("cfg", [0.1], PATHS, **kw)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), 2)
    x = embed(params, tokens)
    with pytest.raises(ValueError, match="paths"):
        gpt_problem(params, cfg, x, [], cross_entropy_loss(tokens[:, 12:]))
    with pytest.raises(TypeError, match="loss_fn"):
        gpt_problem(params, cfg, x, PATHS, None)
    with pytest.raises(ValueError, match="linear_head"):
        gpt_problem(params, GPTConfig(12, 18, 4, layer_norm="pre"), x, PATHS,
                    cross_entropy_loss(tokens[:, 12:]), linear_head=True)
    with pytest.raises(ValueError, match="linear_head"):
        gpt_problem(params, cfg, x, [("blocks", 0, "mlp", "W_in")],
                    cross_entropy_loss(tokens[:, 12:]), linear_head=True)
    with pytest.raises(ValueError, match="tokens"):
        addition_problem(params, cfg, tokens[:, :10], PATHS)
    with pytest.raises(ValueError, match="seed_index"):
        sweep_instance(cfg, -1, batch_size=2)
