"""Log-log slopes with an uncertainty over seeds.

A quantity that grows as ``y ~ C sigma^p`` has ``log10 y = log10 C + p log10 sigma``. For each
seed ``r`` we fit ``p_r`` by least squares on the points with ``lo <= sigma <= hi``; the
reported slope is the mean over seeds with its standard error ``std_r(p_r) / sqrt(R)`` and the
spread ``std_r(p_r)`` (the fitted slope of one seed is a random variable through the
initialisation, the batch and the Hutchinson probes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SlopeFit", "fit_slope", "fit_slopes", "local_slopes"]


@dataclass(frozen=True)
class SlopeFit:
    """Slope over seeds: ``mean``, standard error ``se``, spread ``std``, per-seed ``slopes``."""

    mean: float
    se: float
    std: float
    slopes: np.ndarray
    lo: float
    hi: float

    def __str__(self) -> str:
        return f"{self.mean:.2f} +/- {self.se:.2f}"

    def within(self, theory: float, tol: float) -> bool:
        """True if ``|mean - theory| <= tol`` and every seed's slope is within ``2 tol``."""
        return bool(abs(self.mean - theory) <= tol
                    and np.all(np.abs(self.slopes - theory) <= 2 * tol))


def _as_positive(name: str, a) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name} must be finite and positive for a log-log fit")
    return a


def fit_slope(sigmas, values) -> tuple[float, float]:
    """Least-squares ``(slope, intercept)`` of ``log10 values`` against ``log10 sigmas``.

    ``sigmas`` and ``values`` are 1-D of the same length ``>= 2``.
    """
    s, v = np.asarray(sigmas), np.asarray(values)
    if s.ndim != 1 or v.shape != s.shape or s.size < 2:
        raise ValueError(f"sigmas and values must be 1-D of equal length >= 2, "
                         f"got shapes {s.shape} and {v.shape}")
    x, y = np.log10(_as_positive("sigmas", s)), np.log10(_as_positive("values", v))
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def fit_slopes(sigmas, values, lo: float = 0.0, hi: float = np.inf) -> SlopeFit:
    """Fit each seed separately on ``lo <= sigma <= hi``.

    Args:
        sigmas: ``(S,)`` positive scales.
        values: ``(R, S)`` positive values, one row per seed.
        lo, hi: the fitting window (at least two grid points must fall in it).
    """
    s = np.asarray(sigmas, dtype=float)
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or v.shape[1] != s.shape[0]:
        raise ValueError(f"values must be 2-D (seeds, len(sigmas)={s.shape[0]}), "
                         f"got shape {v.shape}")
    mask = (s >= lo) & (s <= hi)
    if mask.sum() < 2:
        raise ValueError(f"lo, hi must keep at least 2 sigmas, got [{lo}, {hi}] "
                         f"with {int(mask.sum())}")
    slopes = np.array([fit_slope(s[mask], row[mask])[0] for row in v])
    R = len(slopes)
    std = float(slopes.std(ddof=1)) if R > 1 else float("nan")
    return SlopeFit(float(slopes.mean()), std / np.sqrt(R) if R > 1 else float("nan"), std,
                    slopes, float(s[mask].min()), float(s[mask].max()))


def local_slopes(sigmas, values) -> tuple[np.ndarray, np.ndarray]:
    """Finite-difference slope ``d log10 y / d log10 sigma`` between neighbouring points.

    ``values`` is ``(..., S)``; returns ``(midpoint sigmas (S-1,), slopes (..., S-1))``.
    """
    x = np.log10(_as_positive("sigmas", sigmas))
    y = np.log10(_as_positive("values", values))
    if y.shape[-1] != x.shape[0]:
        raise ValueError(f"values must end with len(sigmas)={x.shape[0]}, got {y.shape}")
    return 10 ** ((x[1:] + x[:-1]) / 2), np.diff(y, axis=-1) / np.diff(x)
