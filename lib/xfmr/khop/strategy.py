"""Which strategy does a trained K-hop model use? Attention against pointer maps.

Two ways to compute :math:`\\mathrm{hop}_k` with attention layers that look up one pointer
each (see ``xfmr.khop.task``, where :math:`\\mathrm{find}(p) = 1 + \\max\\{j < p : x_j = x_p\\}`):

- *composition*: every lookup layer attends along :math:`\\mathrm{find}` (each layer adds one
  hop), so :math:`k` hops cost about :math:`k + 1` layers (one more layer to build
  :math:`\\mathrm{find}` from the previous token);
- *doubling*: lookup layer :math:`j = 0, 1, \\dots` attends along
  :math:`\\mathrm{find}^{2^j}` (pointers are squared), so :math:`k` hops cost
  :math:`2 + \\lfloor \\log_2 k \\rfloor` layers (the construction's count).

A head's attention matrix :math:`A` (rows: queries) is compared with the 0/1 matrix
:math:`P_\\pi` of a pointer map :math:`\\pi` (:math:`P_{i,\\pi(i)} = 1` where
:math:`\\pi(i)` is defined) by the normalised inner product
:math:`\\langle A, P\\rangle_F / (\\lVert A\\rVert_F \\lVert P\\rVert_F) \\in [0, 1]`
(0 for an all-zero :math:`P`), averaged over sequences.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xfmr.khop.task import NULL, find
from xfmr.core.validate import check_int

__all__ = ["layer_counts", "counts_table", "pointer_targets", "pointer_matrices", "normalised_inner_product",
           "pointer_similarity", "best_maps", "strategy_of"]


def layer_counts(k: int) -> tuple[int, int]:
    """Layers needed for ``k >= 1`` hops by doubling and by composition:
    ``(2 + floor(log2 k), k + 1)``. They agree for ``k <= 2`` and differ from ``k = 3`` on."""
    k = check_int(k, "k", minimum=1)
    return 2 + int(np.floor(np.log2(k))), k + 1


def counts_table(errors: dict[int, Any]) -> str:
    """The error per depth and hop count beside the two layer counts, one line per ``k >= 1``.

    ``errors`` maps a depth ``L`` to its errors for ``k = 0 .. k_max`` (mean over seeds), the
    same ``k_max`` for every depth. Each cell is marked ``D`` when ``L`` reaches doubling's
    count and ``C`` when it reaches composition's (:func:`layer_counts`), ``-`` otherwise.
    """
    if not errors:
        raise ValueError("errors must name at least one depth")
    rows = {int(L): np.asarray(e, dtype=float) for L, e in errors.items()}
    shape = next(iter(rows.values())).shape
    if any(r.shape != shape for r in rows.values()) or len(shape) != 1 or shape[0] < 2:
        raise ValueError(f"errors must hold one 1-D row of k = 0 .. k_max (k_max >= 1) per depth, "
                         f"got shapes {sorted({r.shape for r in rows.values()})}")
    lines = [f"{'k':>2s} {'doubling':>9s} {'k + 1':>6s}" + "".join(f"  {f'L = {L}':>11s}" for L in rows)]
    for k in range(1, shape[0]):
        dbl, comp = layer_counts(k)
        cells = "".join(f"  {e[k]:6.3f} ({'D' if L >= dbl else '-'}{'C' if L >= comp else '-'})" for L, e in rows.items())
        lines.append(f"{k:2d} {dbl:9d} {comp:6d}{cells}")
    lines.append("D: depth >= doubling count; C: depth >= composition count")
    return "\n".join(lines)


def pointer_targets(x: Any, powers: Any = (1, 2, 3, 4)) -> dict[str, np.ndarray]:
    """Target positions of the pointer maps for sequences ``x`` (``(n,)`` or ``(B, n)`` tokens).

    Returns a dict ``name -> int array of x's shape`` (``NULL`` = -1 where undefined):
    ``"i-1"`` (previous token), ``"find-1"`` (previous occurrence of the same token) and
    ``"find^j"`` for every ``j`` in ``powers`` (``find`` applied ``j`` times, null absorbing).
    """
    f = np.asarray(find(x))
    powers = [check_int(j, "powers", minimum=1) for j in powers]
    n = f.shape[-1]
    i = np.broadcast_to(np.arange(n), f.shape)
    out = {"i-1": np.where(i >= 1, i - 1, NULL), "find-1": np.where(f >= 1, f - 1, NULL)}
    p = i.copy()
    for j in range(1, max(powers, default=0) + 1):
        p = np.where(p >= 0, np.take_along_axis(f, np.maximum(p, 0), axis=-1), NULL)
        if j in powers:
            out[f"find^{j}"] = p.copy()
    return out


def pointer_matrices(targets: np.ndarray) -> np.ndarray:
    """0/1 matrices ``(..., n, n)`` with ``P[..., i, targets[..., i]] = 1`` where defined."""
    t = np.asarray(targets)
    if t.ndim < 1:
        raise ValueError(f"targets must have at least 1 dimension, got shape {t.shape}")
    n = t.shape[-1]
    if np.any((t < NULL) | (t >= n)):
        raise ValueError(f"targets must lie in [-1, {n}), got min {t.min()}, max {t.max()}")
    P = (t[..., :, None] == np.arange(n)).astype(float)
    return P


def normalised_inner_product(A: Any, P: Any) -> np.ndarray:
    """``<A, P>_F / (||A||_F ||P||_F)`` over the last two axes (0 where either norm is 0)."""
    A, P = np.asarray(A, float), np.asarray(P, float)
    if A.shape[-2:] != P.shape[-2:] or A.ndim < 2:
        raise ValueError(f"A and P must end in the same (n, n) shape, got {A.shape} and {P.shape}")
    num = np.sum(A * P, axis=(-2, -1))
    den = np.linalg.norm(A, axis=(-2, -1)) * np.linalg.norm(P, axis=(-2, -1))
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def pointer_similarity(
    attn: Any, x: Any, powers: Any = (1, 2, 3, 4)
) -> tuple[list[str], np.ndarray]:
    """Similarity of every head with every pointer map, averaged over
    the sequences.

    Args:
        attn: attention weights ``(B, L, H, n, n)`` (sequences, layers,
            heads, queries, keys),
            restricted to the ``n`` positions of ``x``.
        x: tokens ``(B, n)``.
        powers: the ``j`` of the maps ``find^j``.

    Returns:
        (names of the maps, array ``(L, H, n_maps)`` of mean normalised
        inner products).
    """
    attn = np.asarray(attn, float)
    x = np.asarray(x)
    if (
        attn.ndim != 5
        or x.ndim != 2
        or attn.shape[0] != x.shape[0]
        or attn.shape[-1] != x.shape[1]
        or attn.shape[-2] != x.shape[1]
    ):
        raise ValueError(
            "attn must be (B, L, H, n, n) and x (B, n) with matching "
            "B and n, "
            f"got {attn.shape} and {x.shape}"
        )
    targets = pointer_targets(x, powers)
    names = list(targets)
    sims = np.stack(
        [
            normalised_inner_product(
                attn, pointer_matrices(targets[m])[:, None, None]
            ).mean(0)
            for m in names
        ],
        axis=-1,
    )
    return names, sims


def best_maps(sim: Any, names: list[str]) -> list[str]:
    """The map each layer fits best: ``argmax`` over maps of the best head's similarity.

    ``sim`` is ``(L, H, n_maps)`` as returned by :func:`pointer_similarity` with ``names``.
    """
    sim = np.asarray(sim, float)
    if sim.ndim != 3 or sim.shape[-1] != len(names):
        raise ValueError(f"sim must be (layers, heads, {len(names)}) for the {len(names)} names, got {sim.shape}")
    return [names[m] for m in sim.max(1).argmax(-1)]


def strategy_of(sim: Any, names: list[str], threshold: float) -> str:
    """Name the strategy of one model at one ``k`` from its heads'
    similarities.

    ``sim`` is ``(L, H, n_maps)`` as returned by
    :func:`pointer_similarity` with ``names``.
    The first layer builds the lookup and is not counted.
    ``"multi-hop"`` when a head of a
    later layer follows a multi-hop pointer ``find^j`` (``j >= 2``,
    similarity above
    ``threshold``), as doubling's layers do; else ``"composition"`` when
    every later layer
    fits ``find^1`` best (:func:`best_maps`); ``"other"`` otherwise, and
    for one layer.
    """
    maps = best_maps(sim, names)  # checks the shape
    multi = [
        i
        for i, name in enumerate(names)
        if name.startswith("find^") and name != "find^1"
    ]
    later = np.asarray(sim, float)[1:]
    if len(later) and (later[..., multi] > threshold).any():
        return "multi-hop"
    if len(later) and all(m == "find^1" for m in maps[1:]):
        return "composition"
    return "other"
