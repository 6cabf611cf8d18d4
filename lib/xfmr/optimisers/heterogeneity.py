"""The block-heterogeneity score JS^0 of Zhang et al. (2024, arXiv 2402.16788).

Each block ``b`` has a spectral density estimated by stochastic Lanczos quadrature
(:func:`xfmr.optimisers.blockwise.block_spectra`): probe ``s`` gives nodes ``theta_{s,k}``
and weights ``w_{s,k}``, and the density is

.. math::

    \\phi_b(t) = \\frac{1}{S} \\sum_s \\sum_k w_{s,k}\\, \\mathcal N(t;\\ \\theta_{s,k},\\ \\sigma^2),

with the authors' ``sigma^2 = 1e-5``. :func:`block_densities` evaluates every block's density
on ONE common grid (``n_grid`` points from the smallest node minus 1 to the largest plus 1,
the authors' margins) and normalises it to sum to one on the grid.
:func:`heterogeneity_score` is the mean over the pairs of blocks of the Jensen-Shannon
distance (the square root of the JS divergence, natural logarithm; ``scipy``'s
``jensenshannon``) between their densities: ``0`` for identical spectra, at most
``sqrt(ln 2)``.
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np
from scipy.spatial.distance import jensenshannon

from xfmr.core.validate import check_int, check_real
from xfmr.optimisers.lanczos import SLQResult

__all__ = ["SIGMA2", "common_grid", "block_densities", "dense_density", "js_distance",
           "heterogeneity_score"]

SIGMA2 = 1e-5


def common_grid(results: Sequence[SLQResult], n_grid: int = 50_000,
                eigenvalues: Sequence[np.ndarray] = ()) -> np.ndarray:
    """``n_grid`` points from ``min(nodes) - 1`` to ``max(nodes) + 1`` over every result
    (and every array of ``eigenvalues``)."""
    n_grid = check_int(n_grid, "n_grid", minimum=2)
    parts = [np.asarray(r.nodes, float).ravel() for r in results]
    parts += [np.asarray(e, float).ravel() for e in eigenvalues]
    if not parts:
        raise ValueError("results and eigenvalues must not both be empty")
    allv = np.concatenate(parts)
    return np.linspace(allv.min() - 1.0, allv.max() + 1.0, n_grid)


def _mixture(nodes: np.ndarray, weights: np.ndarray, grid: np.ndarray,
             sigma2: float) -> np.ndarray:
    """``sum_k weights_k N(grid; nodes_k, sigma2)``, normalised to sum to one on the grid;
    evaluated node by node within 10 sigma only."""
    sigma = np.sqrt(sigma2)
    out = np.zeros_like(grid)
    step = grid[1] - grid[0]
    for t, w in zip(nodes.ravel(), weights.ravel()):
        if w <= 0:
            continue
        lo = max(int(np.floor((t - 10 * sigma - grid[0]) / step)), 0)
        hi = min(int(np.ceil((t + 10 * sigma - grid[0]) / step)) + 1, grid.size)
        z = (grid[lo:hi] - t) / sigma
        out[lo:hi] += w * np.exp(-0.5 * z * z)
    total = out.sum()
    if not total > 0:
        raise ValueError("the density is zero on the grid: the grid must cover the nodes "
                         "and be finer than the width sqrt(sigma2)")
    return out / total


def block_densities(results: Sequence[SLQResult], grid: np.ndarray,
                    sigma2: float = SIGMA2) -> np.ndarray:
    """Every block's SLQ density on ``grid``, ``(n_blocks, n_grid)``, rows summing to one."""
    sigma2 = check_real(sigma2, "sigma2", minimum=0.0, strict_minimum=True)
    grid = np.asarray(grid, float)
    if grid.ndim != 1 or grid.size < 2:
        raise ValueError(f"grid must be 1-D with >= 2 points, got shape {grid.shape}")
    return np.stack([_mixture(np.asarray(r.nodes, float), np.asarray(r.weights, float)
                              / r.nodes.shape[0], grid, sigma2) for r in results])


def dense_density(eigenvalues: np.ndarray, grid: np.ndarray,
                  sigma2: float = SIGMA2) -> np.ndarray:
    """The same smoothing of the exact spectrum ``(1/P) sum_i delta(lambda_i)``."""
    sigma2 = check_real(sigma2, "sigma2", minimum=0.0, strict_minimum=True)
    lam = np.asarray(eigenvalues, float).ravel()
    return _mixture(lam, np.full(lam.shape, 1.0 / lam.size), np.asarray(grid, float), sigma2)


def js_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon distance (natural log) between two densities on one grid."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"p and q must be 1-D of one shape, got {p.shape} and {q.shape}")
    return float(jensenshannon(p, q))


def heterogeneity_score(densities: np.ndarray) -> float:
    """JS^0: the mean over pairs of rows of :func:`js_distance`."""
    d = np.asarray(densities, float)
    if d.ndim != 2 or d.shape[0] < 2:
        raise ValueError(
            "densities must be (n_blocks >= 2, n_grid), "
            f"got shape {d.shape}"
        )
    return float(
        np.mean(
            [
                js_distance(d[i], d[j])
                for i, j in combinations(range(d.shape[0]), 2)
            ]
        )
    )
