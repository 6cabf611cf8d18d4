"""Benchmark of the K-hop reference implementation (Part III): ``hop_k`` on a long sequence.

The goal: ``hop(x, 16)`` on one sequence of 100 000 tokens in under one second after
compilation (one stable sort, then 16 gathers of O(n) each).
"""

from __future__ import annotations

import jax

from bookkit.bench.timing import measure

__all__ = ["bench_hop_long_sequence", "GOAL_SECONDS"]

GOAL_SECONDS = 1.0


def bench_hop_long_sequence(n: int = 100_000, k: int = 16, repeats: int = 5) -> list[dict]:
    """Median seconds of ``task.hop(x, k)`` on one sequence of ``n`` tokens (jit amortised)."""
    from xfmr.khop import task

    x = task.sample_khop_sequences(jax.random.PRNGKey(0), 1, n, 4)
    timing = measure(lambda i: task.hop(x, k), repeats)
    return [{"benchmark": "Part III hop_k on a long sequence (jit amortised)",
             "size": f"1 sequence of {n} tokens, alphabet 4, k = {k}",
             **timing.fields(), "goal": GOAL_SECONDS,
             "note": f"first call incl. compile {timing.first_seconds:.2f} s"}]
