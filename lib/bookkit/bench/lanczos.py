"""Benchmark of the block-spectrum estimator (:mod:`xfmr.optimisers.lanczos`, :mod:`xfmr.optimisers.blockwise`).

One Lanczos run (50 steps, full reorthogonalisation) on the ``W_Q`` block of the paper's GPT
(one layer, batch 64, float64) against the dense route (the block assembled from ``P``
Hessian-vector products, then ``numpy.linalg.eigvalsh``), where the dense route is still
feasible: at ``d_model = 128`` the block has ``P = 16384`` rows, a dense float64 block is
2 GiB and its eigendecomposition ``O(P^3)``, so only Lanczos runs there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookkit.bench.timing import measure, measure_once

LANCZOS_STEPS = 50


def _problem(d_model: int):
    from xfmr.experiments.addition import answer_loss, answer_positions, make_batch
    from xfmr.experiments.gpt import GPTConfig, forward, init_params

    config = GPTConfig(vocab_size=12, max_len=18, d_model=d_model)
    params = init_params(jax.random.key(0), config, jnp.float64)
    tokens = make_batch(jax.random.key(1), 64)
    pos = answer_positions()

    def loss(p, batch):
        return answer_loss(forward(p, batch, config, positions=pos), batch)

    return loss, params, tokens


def bench_lanczos_block(sizes=(32, 64, 128), dense_max: int = 64) -> list[dict]:
    """Seconds of one Lanczos run versus the dense eigendecomposition, ``W_Q`` block."""
    from xfmr.optimisers.blockwise import block_hvp, block_top_eigenvalues

    rows = []
    path = ("blocks", 0, "attn", "W_Q")
    with jax.enable_x64(True):
        for d in sizes:
            loss, params, tokens = _problem(d)
            P = d * d
            key = jax.random.key(2)
            timing = measure(lambda i: block_top_eigenvalues(loss, params, [path], key, LANCZOS_STEPS, tokens), 1)
            lam, bound = block_top_eigenvalues(loss, params, [path], key, LANCZOS_STEPS, tokens)
            rows.append({"benchmark": "Lanczos top eigenvalue, W_Q block",
                         "size": f"d_model {d} (P = {P}), {LANCZOS_STEPS} steps, batch 64",
                         **timing.fields(), "goal": "< 10 s at d_model 128",
                         "note": f"first call incl. compile {timing.first_seconds:.2f} s; lambda_max "
                                 f"{lam[0]:.4e} (residual bound {bound[0]:.1e})"})
            if d > dense_max:
                continue
            mv, _ = block_hvp(loss, params, path, tokens)

            def dense_top():
                H = np.asarray(jax.jit(lambda E: jax.lax.map(mv, E))(jnp.eye(P)))
                return np.linalg.eigvalsh((H + H.T) / 2)[-1]

            dense, top = measure_once(dense_top)
            rows.append({"benchmark": "dense block + eigvalsh, W_Q block",
                         "size": f"d_model {d} (P = {P}), batch 64", **dense.fields(),
                         "goal": "reference",
                         "note": f"P HVPs + eigvalsh; lambda_max {top:.4e}, Lanczos relative error "
                                 f"{abs(lam[0] - top) / abs(top):.1e}"})
    return rows


SLQ_PROBES, SLQ_STEPS = 10, 100  # Zhang et al.'s setting (their code: 10 probes, 100 Lanczos steps)


def bench_all_block_slq(d_model: int = 128) -> list[dict]:
    """Seconds of the SLQ spectra of every block of the paper-size GPT (one layer, batch 64,
    float64) in Zhang et al.'s setting, all blocks in one compiled program
    (:func:`xfmr.optimisers.blockwise.block_spectra`), and the JS^0 score from them."""
    from xfmr.optimisers.blockwise import block_spectra
    from xfmr.optimisers.heterogeneity import block_densities, common_grid, heterogeneity_score

    paths = [("embed", "W_E"), ("embed", "W_pos"),
             *[("blocks", 0, "attn", n) for n in ("W_Q", "W_K", "W_V", "W_O")],
             ("blocks", 0, "mlp", "W_in"), ("blocks", 0, "mlp", "W_out"), ("unembed", "W_U")]
    with jax.enable_x64(True):
        loss, params, tokens = _problem(d_model)
        timing, res = measure_once(lambda: block_spectra(
            loss, params, paths, jax.random.key(0), SLQ_PROBES, SLQ_STEPS, tokens))
    score = heterogeneity_score(block_densities(res, common_grid(res)))
    return [{"benchmark": "SLQ spectra of every block (9 blocks), JS^0 setting",
             "size": f"d_model {d_model}, 1 layer, batch 64, {SLQ_PROBES} probes x {SLQ_STEPS} "
                     "Lanczos steps per block, float64",
             **timing.fields(), "goal": "<= 60 s on 2 cores",
             "note": f"JS^0 of these spectra {score:.3f}"}]
