"""Curvature from curvlinops' linear operators, in the layout of :mod:`xfmr.experiments.curvature`.

curvlinops' ``HessianLinearOperator`` and ``GGNLinearOperator`` act on a list of parameters
(here the blocks ``theta``, in that order, each flattened row-major like the JAX side) and
multiply a matrix in *list format*: one tensor ``(*shape_a, K)`` per block. The data is one
batch ``[(X, y)]``, so that the operators' normalisation (batch size over data size) is 1 and
the loss is exactly the module's ``reduction="mean"`` loss of that batch.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from curvlinops import GGNLinearOperator, HessianLinearOperator

__all__ = ["operators", "dense_matrices", "hutchinson_samples", "diagonal_block_norms"]

CURVATURES = ("H", "H_o", "H_f")  # as xfmr.experiments.curvature.CURVATURES: H, the GGN, H - GGN


def operators(model: torch.nn.Module, loss_func: torch.nn.Module, params: Sequence[torch.nn.Parameter],
              X: torch.Tensor, y: torch.Tensor):
    """``(H, G)``: curvlinops' Hessian and GGN operators of ``loss_func(model(X), y)`` in ``params``.

    The determinism check is skipped (the models here are deterministic; it costs extra
    passes), and the data size is given (no extra pass to count it).
    """
    data = [(X, y)]
    kw = {"check_deterministic": False, "num_data": X.shape[0]}
    return (HessianLinearOperator(model, loss_func, list(params), data, **kw),
            GGNLinearOperator(model, loss_func, list(params), data, **kw))


def dense_matrices(H_op, G_op) -> tuple[np.ndarray, np.ndarray]:
    """The dense ``(P, P)`` matrices of two operators, by multiplying the identity."""
    P = H_op.shape[1]
    eye = torch.eye(P, dtype=H_op.dtype)
    return (H_op @ eye).numpy(), (G_op @ eye).numpy()


def hutchinson_samples(H_op, G_op, shapes: Sequence[tuple], probes: dict[int, torch.Tensor]
                       ) -> dict[str, np.ndarray]:
    """Per-probe squared norms ``||(M v_s)_a||^2`` for ``M`` in ``H``, the GGN ``H_o`` and
    ``H_f = H - H_o``.

    ``probes[b]`` holds ``S`` probes on block ``b``, shape ``(S, *shapes[b])`` (the layout of
    the JAX probes). Returns ``{kind: (n_blocks, len(probes), S)}``, entry ``[a, j, s]`` for
    probe ``s`` on the ``j``-th probed block, as :func:`xfmr.experiments.curvature.hutchinson_samples`.
    ``H_f v`` is ``H v - H_o v`` from the same two products.
    """
    res = {k: [] for k in CURVATURES}
    for b, V in probes.items():
        S = V.shape[0]
        M = [torch.zeros(*shape, S, dtype=V.dtype) for shape in shapes]
        M[b] = V.movedim(0, -1).contiguous()
        HM, GM = H_op @ M, G_op @ M
        for kind, out in (("H", HM), ("H_o", GM), ("H_f", [h - g for h, g in zip(HM, GM)])):
            res[kind].append(torch.stack([o.reshape(-1, S).square().sum(0) for o in out]))
    return {k: torch.stack(v, 1).numpy() for k, v in res.items()}


def diagonal_block_norms(model, loss_func, params: Sequence[torch.nn.Parameter], X, y,
                         probes: Sequence[torch.Tensor]) -> dict[str, np.ndarray]:
    """Hutchinson estimates of ``||M_bb||_F`` for each block ``b`` alone (the growth-rate unit).

    One operator pair per block (its diagonal block only), ``probes[b]`` of shape
    ``(S, *params[b].shape)``; ``sqrt(mean_s ||M_bb v_s||^2)``. Returns ``{kind: (n_blocks,)}``.
    """
    out = {k: [] for k in CURVATURES}
    for p, V in zip(params, probes):
        H_op, G_op = operators(model, loss_func, [p], X, y)
        q = hutchinson_samples(H_op, G_op, [tuple(p.shape)], {0: V})
        for k in CURVATURES:
            out[k].append(float(np.sqrt(q[k][0, 0].mean())))
    return {k: np.array(v) for k, v in out.items()}
