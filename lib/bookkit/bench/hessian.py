"""Benchmarks of the closed-form Hessian kernels (:mod:`xfmr.hessian.blocks`).

Every public function returns a list of rows
``{"benchmark", "size", "seconds", "peak_mib", "goal", "note"}``. Each measurement runs in a
fresh Python subprocess (float64 JAX on the CPU), so that ``peak_mib`` is that process's
peak resident set size (``VmHWM`` of ``/proc/self/status``; ``ru_maxrss`` would inherit the
parent's peak across fork and exec), which includes the JAX runtime itself (about 0.3 GiB) and one measurement's caches cannot help another.

- :func:`dense_vs_autodiff`: all six blocks of ``H = H_o + H_f`` in closed form versus
  ``jax.hessian`` of the loss on the same layer (both jitted, timed after a warm-up call).
- :func:`block_norms_large`: :func:`xfmr.hessian.blocks.block_norms` at GPT-2-small attention sizes,
  timed from a cold start (compilation included).
- :func:`block_norms_agreement`: ``block_norms`` versus norms of the dense autodiff blocks.
"""

from __future__ import annotations


from bookkit.bench import run_isolated

DENSE_SIZES = ((8, 8, 4), (16, 16, 8), (32, 32, 16))  # (L, d_V, d_K)
AGREEMENT_SIZES = ((1, 3, 2), (4, 3, 5), (6, 4, 2), (8, 6, 3))

_PRELUDE = """
import json, resource, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from xfmr.hessian import attention, blocks


def instance(L, d_V, d_K, seed=0):
    return attention.random_instance(jax.random.PRNGKey(seed), L, d_V, d_K, weights="fan_in")


def peak_mib():
    # VmHWM is this process's own peak: ru_maxrss would inherit the parent's across fork + exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)
"""


def _run(body: str) -> dict:
    return run_isolated(_PRELUDE, body)


def _size(L: int, d_V: int, d_K: int) -> str:
    return f"L={L} d_V={d_V} d_K={d_K}"


def dense_vs_autodiff(sizes=DENSE_SIZES, repeats: int = 7) -> list[dict]:
    """Closed-form dense blocks of ``H`` versus ``jax.hessian``, float64, each in its own process."""
    rows = []
    for L, d_V, d_K in sizes:
        closed = _run(f"""
            X, Y, W_Q, W_K, W_V = instance({L}, {d_V}, {d_K})
            @jax.jit
            def closed_jit(X, Y, W_Q, W_K, W_V):
                o = blocks.outer_product_blocks(X, W_Q, W_K, W_V)
                f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V)
                return {{k: o[k] + f[k] for k in blocks.BLOCK_KEYS}}
            closed = lambda: closed_jit(X, Y, W_Q, W_K, W_V)
            t0 = time.perf_counter(); blocks = jax.block_until_ready(closed()); first = time.perf_counter() - t0
            t = best_time(closed, {repeats})
            print(json.dumps({{"seconds": t, "first": first, "peak_mib": peak_mib()}}))
        """)
        auto = _run(f"""
            X, Y, W_Q, W_K, W_V = instance({L}, {d_V}, {d_K})
            w0 = attention.flatten_weights(W_Q, W_K, W_V)
            hess = jax.jit(jax.hessian(lambda w: attention.loss(X, Y, *attention.unflatten_weights(w, {d_V}, {d_K}))))
            t0 = time.perf_counter(); H = jax.block_until_ready(hess(w0)); first = time.perf_counter() - t0
            t = best_time(lambda: hess(w0), {repeats})
            o = blocks.outer_product_blocks(X, W_Q, W_K, W_V)
            f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V)
            ref = attention.split_blocks(H, {d_V}, {d_K})
            err = max(float(jnp.linalg.norm(o[k] + f[k] - ref[k]) / jnp.linalg.norm(ref[k])) for k in blocks.BLOCK_KEYS)
            print(json.dumps({{"seconds": t, "first": first, "peak_mib": peak_mib(), "err": err}}))
        """)
        ratio = auto["seconds"] / closed["seconds"]
        size = _size(L, d_V, d_K)
        P = 2 * d_V * d_K + d_V * d_V
        rows.append({
            "benchmark": "hessian: dense closed-form blocks (H_o + H_f, six blocks)",
            "size": size,
            "seconds": closed["seconds"],
            "peak_mib": closed["peak_mib"],
            "goal": ">= 10x faster than jax.hessian at the largest size",
            "note": f"P={P}; {ratio:.0f}x faster than jax.hessian; first call incl. compile {closed['first']:.2f} s",
        })
        rows.append({
            "benchmark": "hessian: jax.hessian of the loss (reference)",
            "size": size,
            "seconds": auto["seconds"],
            "peak_mib": auto["peak_mib"],
            "goal": "reference",
            "note": f"first call incl. compile {auto['first']:.2f} s; closed form agrees to {auto['err']:.1e} (max rel., six blocks)",
        })
    return rows


def block_norms_large(L: int = 128, d_V: int = 768, d_K: int = 64) -> list[dict]:
    """``block_norms`` at GPT-2-small attention sizes, from a cold process (compile included)."""
    res = _run(f"""
        X, Y, W_Q, W_K, W_V = instance({L}, {d_V}, {d_K})
        X = X / np.sqrt({d_V})
        t0 = time.perf_counter()
        norms = jax.block_until_ready(blocks.block_norms(X, Y, W_Q, W_K, W_V))
        t = time.perf_counter() - t0
        t_warm = best_time(lambda: blocks.block_norms(X, Y, W_Q, W_K, W_V), 1)
        finite = all(bool(jnp.isfinite(v)) for part in norms.values() for v in part.values())
        print(json.dumps({{"seconds": t, "warm": t_warm, "peak_mib": peak_mib(), "finite": finite}}))
    """)
    P = 2 * d_V * d_K + d_V * d_V
    dense_tb = P * P * 8 / 1e12
    return [{
        "benchmark": "hessian: block_norms (no block formed)",
        "size": _size(L, d_V, d_K),
        "seconds": res["seconds"],
        "peak_mib": res["peak_mib"],
        "goal": "< 60 s and < 4096 MiB",
        "note": (f"cold start incl. compile; {res['warm']:.2f} s warm; all norms finite: {res['finite']}; "
                 f"a dense float64 Hessian would need {dense_tb:.1f} TB"),
    }]


def block_norms_agreement(sizes=AGREEMENT_SIZES) -> list[dict]:
    """Relative difference between ``block_norms`` and the norms of the dense autodiff blocks."""
    res = _run(f"""
        errs = []
        for (L, d_V, d_K) in {tuple(sizes)!r}:
            for softmax in (True, False):
                args = instance(L, d_V, d_K, seed=L)
                dense = blocks.dense_block_norms(*blocks.autodiff_blocks(*args, softmax=softmax))
                fast = blocks.block_norms(*args, softmax=softmax)
                for part in dense:
                    for key in dense[part]:
                        b = float(dense[part][key])
                        if b > 0:
                            errs.append(abs(float(fast[part][key]) - b) / b)
                        else:
                            assert float(fast[part][key]) == 0.0
        print(json.dumps({{"err": max(errs), "n": len(errs), "peak_mib": peak_mib()}}))
    """)
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
