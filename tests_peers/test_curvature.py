"""Exact Hessian and GGN blocks and Hutchinson estimates: curvlinops against the book's JAX code.

The decoder (each LayerNorm placement, two layers) is the JAX model loaded into PyTorch;
the blocks are ``W_Q, W_K, W_V`` of every layer, all pairs (a, b), in the same row-major order.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("curvlinops")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from helpers import N_ANSWER, relative_error, small_model  # noqa: E402

from bookkit.peers import curvature as peers  # noqa: E402
from bookkit.peers.torch_gpt import parameter  # noqa: E402
from xfmr.experiments.addition import answer_positions  # noqa: E402
from xfmr.experiments.curvature import (CURVATURES, Problem, cross_entropy_loss, dense_matrices,  # noqa: E402
                            hutchinson_samples)
from xfmr.experiments.sweeps import gpt_problem  # noqa: E402

N_LAYERS = 2
PATHS = [("blocks", l, "attn", n) for l in range(N_LAYERS) for n in ("W_Q", "W_K", "W_V")]
# The Hutchinson checks at the paper's initialisation (0.8 / sqrt(d)) and sigma = 1: at
# init_std = 0.8 and d = 8 the logits saturate, the GGN is tiny against H and H - GGN, and
# both frameworks (and the dense matrices) agree only to ~1e-9 there.
PAPER_INIT = dict(d_model=8, batch_size=4, init_std=None, sigma=1.0)


def _both(layer_norm, paths=PATHS, linear_head=False, **kw):
    cfg, params, tokens, x, model, X_t, y_t = small_model(layer_norm, n_layers=N_LAYERS, **kw)
    problem = gpt_problem(params, cfg, x, paths, cross_entropy_loss(tokens[:, -N_ANSWER:]),
                          positions=answer_positions(), linear_head=linear_head)
    ops = peers.operators(model, torch.nn.CrossEntropyLoss(), [parameter(model, p) for p in paths],
                          X_t, y_t)
    return problem, ops


@pytest.mark.parametrize("layer_norm", ["none", "pre", "post"])
def test_exact_blocks_agree(layer_norm):
    problem, ops = _both(layer_norm)
    H, G, Hf, sl = dense_matrices(problem)
    H, G, Hf = np.asarray(H), np.asarray(G), np.asarray(Hf)
    H_t, G_t = peers.dense_matrices(*ops)
    assert H_t.shape == H.shape == (6 * 16, 6 * 16)
    for name, ours, theirs in (("H", H, H_t), ("GGN", G, G_t), ("H - GGN", Hf, H_t - G_t)):
        for a in sl:
            for b in sl:
                if np.linalg.norm(ours[a, b]) <= 1e-12 * np.linalg.norm(ours):
                    # a structural zero: without LayerNorm the logits are piecewise linear in
                    # the last layer's W_V, so H - GGN has a zero (V, V) block there; in both
                    assert (layer_norm, name, a, b) == ("none", "H - GGN", sl[-1], sl[-1])
                    assert np.linalg.norm(theirs[a, b]) <= 1e-12 * np.linalg.norm(theirs)
                    continue
                # rounding: 1e-9 of the block, plus 1e-11 of the whole matrix for the blocks
                # that are tiny beside it (the GGN's cross-layer blocks without LayerNorm hold
                # ~1e-6 of its norm; summed in another order they agree to ~1e-14 of the whole)
                err = np.linalg.norm(theirs[a, b] - ours[a, b])
                bound = 1e-9 * np.linalg.norm(ours[a, b]) + 1e-11 * np.linalg.norm(ours)
                assert err <= bound, (name, a, b, relative_error(theirs[a, b], ours[a, b]))


@pytest.mark.parametrize("layer_norm,linear_head", [("none", False), ("none", True), ("pre", False)])
def test_hutchinson_same_probes_agree(layer_norm, linear_head):
    """Per-probe ``||(M v)_a||^2`` for every probed block b and every row block a."""
    problem, ops = _both(layer_norm, linear_head=linear_head, **PAPER_INIT)
    theta = problem.theta
    key, n_probes = jax.random.key(7), 5
    ours = jax.jit(lambda th: hutchinson_samples(problem._replace(theta=th), key, n_probes))(theta)
    # the probes hutchinson_samples draws for block b (its documented key schedule)
    probes = {b: torch.tensor(np.array(jax.random.rademacher(
        jax.random.fold_in(key, b), (n_probes,) + t.shape, dtype=jnp.float64)))
        for b, t in enumerate(theta)}
    theirs = peers.hutchinson_samples(*ops, [t.shape for t in theta], probes)
    for kind in CURVATURES:
        q_ours, q_theirs = np.asarray(ours[kind]), theirs[kind]
        assert q_theirs.shape == q_ours.shape == (6, 6, n_probes)
        # rounding: 1e-10 relative, except the structural zeros (H - GGN rows of the last
        # layer's W_V without LayerNorm), which must be zero to rounding of the largest entry
        np.testing.assert_allclose(q_theirs, q_ours, rtol=1e-10, atol=1e-14 * q_ours.max(),
                                   err_msg=kind)
        assert (q_ours > 1e-14 * q_ours.max()).mean() > 0.9


def test_diagonal_block_norms_match_the_growth_unit():
    """The benchmark's torch pipeline (one operator pair per block) against ours (one problem
    per block, the linear head, as ``sigma_sweep(blocks="diagonal")`` runs it)."""
    paths = [p for p in PATHS if p[3] in ("W_Q", "W_V")]
    cfg, params, tokens, x, model, X_t, y_t = small_model("none", n_layers=N_LAYERS, **PAPER_INIT)
    key, n_probes = jax.random.key(3), 4
    probes = [torch.tensor(np.array(jax.random.rademacher(
        jax.random.fold_in(key, b), (n_probes,) + parameter(model, p).shape, dtype=jnp.float64)))
        for b, p in enumerate(paths)]
    theirs = peers.diagonal_block_norms(model, torch.nn.CrossEntropyLoss(),
                                        [parameter(model, p) for p in paths], X_t, y_t, probes)
    for b, path in enumerate(paths):
        problem = gpt_problem(params, cfg, x, [path], cross_entropy_loss(tokens[:, -N_ANSWER:]),
                              positions=answer_positions(), linear_head=True)
        q = jax.jit(lambda th: hutchinson_samples(Problem(problem.out_fn, problem.loss_fn, th),
                                                  key, n_probes, key_ids=(b,)))(problem.theta)
        for kind in CURVATURES:
            np.testing.assert_allclose(theirs[kind][b], np.sqrt(np.asarray(q[kind]).mean()),
                                       rtol=1e-10, err_msg=f"{kind} block {path}")
