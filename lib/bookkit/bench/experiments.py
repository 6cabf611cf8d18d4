"""Benchmarks of the units of the growth-rate experiments (Part I, Figure 3).

The unit: a one-layer GPT (d_model 128, no LayerNorm, addition task, batch 64) at one
embedding scale sigma; 20-probe Hutchinson estimates of the Frobenius norms of the W_Q and W_V
blocks of H, the GGN (= H_o) and H - GGN (= H_f), all three from the same probes. The
official PyTorch + curvlinops pipeline takes a median 3.26 s for it on the book's 2-core
machine; the goal is <= 0.33 s. We time the jitted unit with the compilation amortised
(median of repeated calls at new sigmas and probe keys; the compilation is reported on its
own row), in float32 (the official dtype) and in float64 (the book's dtype).

The unit is the exact code path of the book's sweeps (``xfmr.experiments.sweeps.addition_problem`` with
``linear_head=True``, as ``sigma_sweep`` uses it for this model): every probe stops at the
residual after the attention, and the ReLU MLP and unembedding enter through their per-token
Jacobian, which is exact for this piecewise-linear head (tested against the plain path in
``tests/experiments/test_sweeps.py``).

The deep unit: the same at one sigma for 5 layers, W_Q and W_V of every layer (the paper
profile's 5-layer sweep, 400 such units), timed as ``xfmr.experiments.sweeps.sigma_sweep`` runs it,
with all blocks estimated together or only the diagonal blocks, each from its own problem.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookkit.bench.timing import Timing, measure, measure_once

__all__ = ["bench_growth_unit", "bench_deep_growth_unit", "OFFICIAL_SECONDS", "GOAL_SECONDS"]

OFFICIAL_SECONDS = 3.26
GOAL_SECONDS = 0.33


def _unit(dtype, d_model: int = 128, batch_size: int = 64, n_probes: int = 20):
    from xfmr.experiments.curvature import hutchinson_samples
    from xfmr.experiments.gpt import GPTConfig
    from xfmr.experiments.sweeps import addition_problem, sweep_instance

    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=d_model)
    params, tokens, _ = sweep_instance(cfg, 0, batch_size=batch_size, dtype=dtype)
    paths = [("blocks", 0, "attn", "W_Q"), ("blocks", 0, "attn", "W_V")]

    @jax.jit
    def unit(params, sigma, key):
        problem = addition_problem(params, cfg, tokens, paths, embed_scale=sigma, linear_head=True)
        q = hutchinson_samples(problem, key, n_probes)
        # diagonal blocks only: ||H_QQ||, ||H_VV|| (and H_o, H_f)
        return {k: jnp.sqrt(jnp.diagonal(jnp.mean(v, -1))) for k, v in q.items()}

    return lambda sigma, key: unit(params, jnp.asarray(sigma, dtype), key)


def bench_growth_unit(repeats: int = 7) -> list[dict]:
    """Time the growth-rate unit; rows ``{"benchmark", "size", "seconds", "goal", "note"}``."""
    rows = []
    size = "d_model 128, 1 layer, batch 64, 20 probes, W_Q and W_V blocks of H, GGN, H - GGN"
    for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
        # float64 inside a local context manager: the global JAX config is left alone
        with jax.enable_x64(dtype == jnp.float64):
            f = _unit(dtype)
            # a new sigma and probe key for every call; the first call (sigma 0.5) compiles
            timing = measure(lambda i: f(0.1 * i if i else 0.5, jax.random.key(i)), repeats)
        rows.append({
            "benchmark": f"Part I growth-rate unit ({name}, jit amortised)",
            "size": size, **timing.fields(), "goal": GOAL_SECONDS,
            "note": (f"official PyTorch pipeline {OFFICIAL_SECONDS} s "
                     f"({OFFICIAL_SECONDS / timing.seconds:.1f}x faster)")})
        rows.append({
            "benchmark": f"Part I growth-rate unit ({name}, first call incl. jit)",
            "size": size, "seconds": timing.first_seconds, "statistic": "one call (compilation included)",
            "goal": None, "note": "one-off compilation + first call; paid once per sweep configuration"})
    return rows


def bench_deep_growth_unit(n_layers: int = 5, n_sigma: int = 3) -> list[dict]:
    """Seconds per sigma of the 5-layer sweep, ``blocks="all"`` against ``"diagonal"``.

    Each ``sigma_sweep`` call compiles its unit once, so the time of one unit is the
    difference between a sweep over ``1 + n_sigma`` points and a sweep over 1 point,
    divided by ``n_sigma`` (float64, one seed, compilation excluded by the difference).
    """
    from xfmr.experiments.gpt import GPTConfig
    from xfmr.experiments.sweeps import sigma_sweep

    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=128, n_layers=n_layers)
    paths = [("blocks", l, "attn", n) for l in range(n_layers) for n in ("W_Q", "W_V")]
    size = f"d_model 128, {n_layers} layers, batch 64, 20 probes, W_Q and W_V of every layer"
    rows, unit = [], {}
    with jax.enable_x64(True):
        for blocks in ("all", "diagonal"):
            def sweep(n_points: int) -> Timing:
                return measure_once(lambda: sigma_sweep(cfg, np.geomspace(0.01, 1.0, n_points), paths, n_seeds=1,
                                                        batch_size=64, n_probes=20, blocks=blocks))[0]

            one, longer = sweep(1), sweep(1 + n_sigma)
            unit[blocks] = Timing((longer.seconds - one.seconds) / n_sigma,
                                  (longer.cpu_seconds - one.cpu_seconds) / n_sigma,
                                  f"(sweep over {1 + n_sigma} sigmas - sweep over 1) / {n_sigma}, one call each "
                                  "(compilation, paid once per sweep, cancels)")
    for blocks, timing in unit.items():
        note = ("every block from one problem (rows of all 10 blocks per probe)" if blocks == "all"
                else f"diagonal blocks only, each its own problem: "
                     f"{unit['all'].seconds / timing.seconds:.1f}x faster than all blocks")
        rows.append({"benchmark": f"Part I 5-layer growth unit (float64, blocks={blocks!r})",
                     "size": size, **timing.fields(), "goal": None, "note": note})
    return rows
