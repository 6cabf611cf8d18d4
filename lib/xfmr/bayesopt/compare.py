"""Paired comparisons over seeds: the interval a verdict of Part IV rests on.

Two methods run on the same seeds (the same functions, the same initial points) give paired
results; their per-seed differences ``d_1, ..., d_n`` are compared through the mean difference
and its Student-t interval,

    mean(d) +- t_{n-1, (1 + level)/2} * sd(d) / sqrt(n)      (sd with n - 1 degrees of freedom),

which :func:`paired_interval` returns as ``{"value", "low", "high"}``, the entry that
``bookkit.ledger.decide`` reads. Numpy and scipy only: it runs on results already computed.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["paired_interval"]


def paired_interval(a, b, level: float = 0.95) -> dict[str, float]:
    """Mean of ``a - b`` over seeds and its two-sided ``level`` Student-t interval.

    ``a`` and ``b`` are 1-D, of the same length n >= 2 (one value per seed, paired by seed).
    Returns ``{"value": mean, "low": ..., "high": ...}`` as floats; a zero spread gives a
    zero-width interval.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"need two 1-D arrays of the same length >= 2, got shapes {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("the paired values must be finite")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d = a - b
    mean = float(d.mean())
    half = float(stats.t.ppf((1 + level) / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
    return {"value": mean, "low": mean - half, "high": mean + half}
