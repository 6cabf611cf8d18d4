"""The interval every comparison of the book rests on: a mean and its Student-t interval.

For ``n`` values ``v_1, ..., v_n`` (one per seed, graph or dataset),

    mean(v) +- t_{n-1, (1 + level)/2} * sd(v) / sqrt(n)      (sd with n - 1 degrees of freedom).

Two methods run on the same seeds give paired results ``a_i, b_i``; their comparison is the
interval of the differences ``d_i = a_i - b_i`` (:func:`paired_interval`). Both return
``{"value": mean, "low": ..., "high": ...}``, the entry that ``bookkit.ledger.decide`` reads;
values that are all equal give the degenerate interval ``[mean, mean]``. Numpy and scipy only:
it runs on results already computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from xfmr.core.validate import check_real

__all__ = ["t_interval", "paired_interval"]


def t_interval(values: Any, level: float = 0.95) -> dict[str, float]:
    """The mean of ``values`` (1-D, at least two, finite) and its two-sided Student-t interval at ``level``."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be 1-D, finite and at least two, got shape {v.shape}: {values!r}")
    level = check_real(level, "level", minimum=0.0, maximum=1.0, strict_minimum=True)
    if level >= 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    mean = float(v.mean())
    half = float(stats.t.ppf((1 + level) / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return {"value": mean, "low": mean - half, "high": mean + half}


def paired_interval(
    a: Any, b: Any, level: float = 0.95
) -> dict[str, float]:
    """:func:`t_interval` of the paired differences ``a - b`` (1-D, the
    same length n >= 2)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(
            "a and b must be 1-D of the same length, "
            f"got shapes {a.shape} and {b.shape}"
        )
    return t_interval(a - b, level)
