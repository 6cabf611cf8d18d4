"""Benchmarks of the closed-form Hessian kernels (:mod:`xfmr.hessian.blocks`).

Every public function returns a list of rows
``{"benchmark", "size", "seconds", "cpu_seconds", "statistic", "peak_mib", "goal", "note"}``.
Each measurement (a ``measure_*`` function) runs in a fresh Python process
(:func:`bookkit.bench.isolated.run_isolated`, float64 JAX on the CPU), so that ``peak_mib`` is
that process's peak resident set size (:func:`bookkit.bench.isolated.peak_mib`) and one
measurement's caches cannot help another.

- :func:`dense_vs_autodiff`: all six blocks of ``H = H_o + H_f`` in closed form versus
  ``jax.hessian`` of the loss on the same layer (both jitted, timed after a warm-up call).
- :func:`block_norms_large`: :func:`xfmr.hessian.blocks.block_norms` at GPT-2-small attention sizes,
  timed from a cold start (compilation included).
- :func:`block_norms_agreement`: ``block_norms`` versus norms of the dense autodiff blocks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookkit.bench.isolated import peak_mib, run_isolated
from bookkit.bench.timing import measure, measure_once

DENSE_SIZES = ((8, 8, 4), (16, 16, 8), (32, 32, 16))  # (L, d_V, d_K)
AGREEMENT_SIZES = ((1, 3, 2), (4, 3, 5), (6, 4, 2), (8, 6, 3))


def _instance(L: int, d_V: int, d_K: int, seed: int = 0):
    from xfmr.hessian import attention

    return attention.random_instance(jax.random.PRNGKey(seed), L, d_V, d_K, weights="fan_in")


def measure_closed_form(L: int, d_V: int, d_K: int, repeats: int) -> dict:
    """The six dense blocks of ``H_o + H_f`` in closed form, jitted (in a fresh process)."""
    from xfmr.hessian import blocks

    with jax.enable_x64(True):
        X, Y, W_Q, W_K, W_V = _instance(L, d_V, d_K)

        @jax.jit
        def closed(X, Y, W_Q, W_K, W_V):
            o = blocks.outer_product_blocks(X, W_Q, W_K, W_V)
            f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V)
            return {k: o[k] + f[k] for k in blocks.BLOCK_KEYS}

        timing = measure(lambda i: closed(X, Y, W_Q, W_K, W_V), repeats)
    return {"timing": timing, "peak_mib": peak_mib()}


def measure_autodiff(L: int, d_V: int, d_K: int, repeats: int) -> dict:
    """``jax.hessian`` of the loss, jitted, and the closed form's largest relative error
    against it over the six blocks (in a fresh process)."""
    from xfmr.hessian import attention, blocks

    with jax.enable_x64(True):
        X, Y, W_Q, W_K, W_V = _instance(L, d_V, d_K)
        w0 = attention.flatten_weights(W_Q, W_K, W_V)
        hess = jax.jit(jax.hessian(lambda w: attention.loss(X, Y, *attention.unflatten_weights(w, d_V, d_K))))
        timing = measure(lambda i: hess(w0), repeats)
        o = blocks.outer_product_blocks(X, W_Q, W_K, W_V)
        f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V)
        ref = attention.split_blocks(hess(w0), d_V, d_K)
        err = max(float(jnp.linalg.norm(o[k] + f[k] - ref[k]) / jnp.linalg.norm(ref[k])) for k in blocks.BLOCK_KEYS)
    return {"timing": timing, "peak_mib": peak_mib(), "err": err}


def measure_block_norms(L: int, d_V: int, d_K: int) -> dict:
    """``block_norms`` from a cold process (its first call, compilation included), then warm."""
    from xfmr.hessian import blocks

    with jax.enable_x64(True):
        X, Y, W_Q, W_K, W_V = _instance(L, d_V, d_K)
        X = X / np.sqrt(d_V)
        cold, norms = measure_once(lambda: blocks.block_norms(X, Y, W_Q, W_K, W_V))
        warm = measure(lambda i: blocks.block_norms(X, Y, W_Q, W_K, W_V), 3)
        finite = all(bool(jnp.isfinite(v)) for part in norms.values() for v in part.values())
    return {"cold": cold, "warm": warm, "peak_mib": peak_mib(), "finite": finite}

def measure_agreement(sizes: tuple) -> dict:
    """Largest relative difference between ``block_norms`` and the norms of the dense autodiff
    blocks, softmax and linear attention (in a fresh process)."""
    from xfmr.hessian import blocks

    errs = []
    with jax.enable_x64(True):
        for L, d_V, d_K in sizes:
            for softmax in (True, False):
                args = _instance(L, d_V, d_K, seed=L)
                dense = blocks.dense_block_norms(*blocks.autodiff_blocks(*args, softmax=softmax))
                fast = blocks.block_norms(*args, softmax=softmax)
                for part in dense:
                    for key in dense[part]:
                        b = float(dense[part][key])
                        if b > 0:
                            errs.append(abs(float(fast[part][key]) - b) / b)
                        elif float(fast[part][key]) != 0.0:
                            raise AssertionError(f"block_norms: {part}.{key} is nonzero where the dense block is 0")
    return {"err": max(errs), "n": len(errs), "peak_mib": peak_mib()}


def _size(L: int, d_V: int, d_K: int) -> str:
    return f"L={L} d_V={d_V} d_K={d_K}"


def dense_vs_autodiff(sizes=DENSE_SIZES, repeats: int = 7) -> list[dict]:
    """Closed-form dense blocks of ``H`` versus ``jax.hessian``, float64, each in its own process."""
    rows = []
    for L, d_V, d_K in sizes:
        closed = run_isolated(measure_closed_form, L, d_V, d_K, repeats)
        auto = run_isolated(measure_autodiff, L, d_V, d_K, repeats)
        ratio = auto["timing"].seconds / closed["timing"].seconds
        size = _size(L, d_V, d_K)
        P = 2 * d_V * d_K + d_V * d_V
        rows.append({
            "benchmark": "hessian: dense closed-form blocks (H_o + H_f, six blocks)",
            "size": size,
            **closed["timing"].fields(),
            "peak_mib": closed["peak_mib"],
            "goal": ">= 10x faster than jax.hessian at the largest size",
            "note": (f"P={P}; {ratio:.0f}x faster than jax.hessian; first call incl. compile "
                     f"{closed['timing'].first_seconds:.2f} s"),
        })
        rows.append({
            "benchmark": "hessian: jax.hessian of the loss (reference)",
            "size": size,
            **auto["timing"].fields(),
            "peak_mib": auto["peak_mib"],
            "goal": "reference",
            "note": (f"first call incl. compile {auto['timing'].first_seconds:.2f} s; closed form agrees to "
                     f"{auto['err']:.1e} (max rel., six blocks)"),
        })
    return rows


def block_norms_large(L: int = 128, d_V: int = 768, d_K: int = 64) -> list[dict]:
    """``block_norms`` at GPT-2-small attention sizes, from a cold process (compile included)."""
    res = run_isolated(measure_block_norms, L, d_V, d_K)
    P = 2 * d_V * d_K + d_V * d_V
    dense_tb = P * P * 8 / 1e12
    return [{
        "benchmark": "hessian: block_norms (no block formed)",
        "size": _size(L, d_V, d_K),
        **res["cold"].fields(),
        "peak_mib": res["peak_mib"],
        "goal": "< 60 s and < 4096 MiB",
        "note": (f"cold start incl. compile; {res['warm'].seconds:.2f} s warm ({res['warm'].statistic}); "
                 f"all norms finite: {res['finite']}; a dense float64 Hessian would need {dense_tb:.1f} TB"),
    }]


def block_norms_agreement(sizes=AGREEMENT_SIZES) -> list[dict]:
    """Relative difference between ``block_norms`` and the norms of the dense autodiff blocks."""
    res = run_isolated(measure_agreement, tuple(sizes))
    return [{
        "benchmark": "hessian: block_norms vs dense autodiff norms",
        "size": "; ".join(_size(*s) for s in sizes),
        "seconds": None,
        "peak_mib": res["peak_mib"],
        "goal": "agree to 1e-9 relative",
        "note": f"max relative difference {res['err']:.1e} over {res['n']} nonzero norms (softmax and linear)",
    }]


def bench_hessian_kernels() -> list[dict]:
    """All Hessian benchmarks, in order."""
    return dense_vs_autodiff() + block_norms_large() + block_norms_agreement()
