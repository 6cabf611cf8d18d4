"""The Part I models in PyTorch: the GPT-2-style decoder of :mod:`xfmr.experiments.gpt` and the bare
attention layer of :mod:`xfmr.hessian.attention`, each loading the JAX weights.

The decoder is a line-by-line port of :func:`xfmr.experiments.gpt.forward_from_embedding` (same LayerNorm
placements ``"none"``, ``"pre"``, ``"post"``, heads, causal mask, softmax or the masked scores,
ReLU or exact GELU, attention-residual scale, optional MLP, and the last layer restricted to the
output ``positions``). Its input is the embedded sequence ``x`` ``(B, n, d)``, held fixed as in
:func:`xfmr.experiments.curvature.gpt_problem`, and its output the logits at ``positions`` flattened to
``(B m, V)``, the layout of ``torch.nn.CrossEntropyLoss(reduction="mean")``, whose mean over
the ``B m`` answer digits is the book's :func:`xfmr.experiments.curvature.cross_entropy`.

Weights are ``torch.nn.Parameter`` s named like the JAX pytree: the JAX block
``("blocks", l, "attn", "W_Q")`` is ``model.blocks[l].attn["W_Q"]`` (:func:`parameter`), so that
curvlinops' operators address the same blocks in the same row-major order.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

__all__ = ["TorchGPT", "TorchAttentionLayer", "parameter", "to_torch"]

LN_EPS = 1e-5  # as xfmr.core.nn.LN_EPS


def to_torch(a, dtype=torch.float64) -> torch.Tensor:
    """A copy of an array (JAX or NumPy) as a torch tensor of ``dtype``."""
    return torch.tensor(np.array(a), dtype=dtype)


def _params(tree: dict, dtype) -> nn.ParameterDict:
    return nn.ParameterDict({k: nn.Parameter(to_torch(v, dtype)) for k, v in tree.items()})


def _layer_norm(x: torch.Tensor, p: nn.ParameterDict) -> torch.Tensor:
    # written out as xfmr.core.nn.layer_norm: (x - mean) / sqrt(var + eps) * scale + bias
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).square().mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + LN_EPS) * p["scale"] + p["bias"]


class TorchGPT(nn.Module):
    """The decoder of :mod:`xfmr.experiments.gpt` with the weights of a JAX ``params`` pytree.

    Args:
        params: the JAX parameters (:func:`xfmr.experiments.gpt.init_params` layout); copied.
        config: the :class:`xfmr.experiments.gpt.GPTConfig`.
        positions: output positions (int sequence), or ``None`` for all.
        dtype: ``torch.float64`` (the checks) or ``torch.float32`` (the paper's dtype).

    ``forward(x)`` maps the embedded input ``(B, n, d)`` to logits ``(B m, V)``;
    :meth:`logits` keeps them ``(B, m, V)``; :meth:`embed` is :func:`xfmr.experiments.gpt.embed`.
    """

    def __init__(self, params: dict, config, positions: Sequence[int] | None = None,
                 dtype=torch.float64):
        super().__init__()
        self.config = config
        self.positions = None if positions is None else [int(p) for p in np.asarray(positions)]
        self.embed_params = _params(params["embed"], dtype)
        self.blocks = nn.ModuleList()
        for blk in params["blocks"]:
            module = nn.Module()
            for name, tree in blk.items():  # attn, mlp, ln1, ln2
                setattr(module, name, _params(tree, dtype))
            self.blocks.append(module)
        self.ln_f = _params(params["ln_f"], dtype) if "ln_f" in params else None
        self.unembed = _params(params["unembed"], dtype)

    # ------------------------------------------------------------------ pieces
    def embed(self, tokens: torch.Tensor, embed_scale: float = 1.0) -> torch.Tensor:
        """``embed_scale * (W_E[tokens] + W_pos[:n])``, ``(B, n) -> (B, n, d)``."""
        E = self.embed_params
        return (E["W_E"][tokens] + E["W_pos"][: tokens.shape[1]]) * embed_scale

    def _attention(self, p, x: torch.Tensor, q_pos) -> torch.Tensor:
        cfg = self.config
        B, n, d = x.shape
        H, dh = cfg.n_heads, cfg.d_head
        xq = x if q_pos is None else x[:, q_pos]
        pos_q = torch.arange(n) if q_pos is None else torch.tensor(q_pos)
        q = (xq @ p["W_Q"] + p["b_Q"]).reshape(B, -1, H, dh)
        k = (x @ p["W_K"] + p["b_K"]).reshape(B, n, H, dh)
        v = (x @ p["W_V"] + p["b_V"]).reshape(B, n, H, dh)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(dh)
        if cfg.causal:
            allowed = pos_q[:, None] >= torch.arange(n)[None, :]
        else:
            allowed = torch.ones(len(pos_q), n, dtype=torch.bool)
        if cfg.softmax:
            A = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
        else:
            A = scores.masked_fill(~allowed, 0.0)
        z = torch.einsum("bhqk,bkhe->bqhe", A, v).reshape(B, -1, d)
        return z @ p["W_O"] + p["b_O"]

    def _mlp(self, p, x: torch.Tensor) -> torch.Tensor:
        h = x @ p["W_in"] + p["b_in"]
        h = torch.relu(h) if self.config.activation == "relu" else nn.functional.gelu(h)
        return h @ p["W_out"] + p["b_out"]

    # ------------------------------------------------------------------ model
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, m, V)`` of the embedded input ``x`` ``(B, n, d)``."""
        cfg = self.config
        rho = cfg.attn_residual_scale
        for i, blk in enumerate(self.blocks):
            q_pos = self.positions if i == len(self.blocks) - 1 else None
            x_q = x if q_pos is None else x[:, q_pos]
            if cfg.layer_norm == "pre":
                x = rho * x_q + self._attention(blk.attn, _layer_norm(x, blk.ln1), q_pos)
                if cfg.mlp:
                    x = x + self._mlp(blk.mlp, _layer_norm(x, blk.ln2))
            elif cfg.layer_norm == "post":
                x = _layer_norm(rho * x_q + self._attention(blk.attn, x, q_pos), blk.ln1)
                if cfg.mlp:
                    x = _layer_norm(x + self._mlp(blk.mlp, x), blk.ln2)
            else:
                x = rho * x_q + self._attention(blk.attn, x, q_pos)
                if cfg.mlp:
                    x = x + self._mlp(blk.mlp, x)
        if self.ln_f is not None:
            x = _layer_norm(x, self.ln_f)
        return x @ self.unembed["W_U"] + self.unembed["b_U"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits flattened to ``(B m, V)`` (for ``CrossEntropyLoss``)."""
        z = self.logits(x)
        return z.reshape(-1, z.shape[-1])


class TorchAttentionLayer(nn.Module):
    """The bare layer of :mod:`xfmr.hessian.attention`: ``F = softmax(X W_Q W_K^T X^T / sqrt d_K) X W_V``
    (or ``A = T`` with ``softmax=False``); no mask, bias or output projection. ``forward(X)``
    maps ``X`` ``(L, d_V)`` to ``F`` ``(L, d_V)``, so that ``MSELoss(reduction="mean")`` is the
    book's ``||F - Y||_F^2 / (L d_V)``.
    """

    def __init__(self, W_Q, W_K, W_V, softmax: bool = True, dtype=torch.float64):
        super().__init__()
        self.W_Q = nn.Parameter(to_torch(W_Q, dtype))
        self.W_K = nn.Parameter(to_torch(W_K, dtype))
        self.W_V = nn.Parameter(to_torch(W_V, dtype))
        self.softmax = softmax

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        T = (X @ self.W_Q) @ (X @ self.W_K).T / math.sqrt(self.W_Q.shape[1])
        A = torch.softmax(T, dim=-1) if self.softmax else T
        return A @ X @ self.W_V


def parameter(model: TorchGPT, path: Sequence) -> nn.Parameter:
    """The parameter at a JAX path, e.g. ``("blocks", 0, "attn", "W_Q")``."""
    if path[0] == "blocks":
        _, layer, group, name = path
        return getattr(model.blocks[layer], group)[name]
    group, name = path
    return {"embed": model.embed_params, "ln_f": model.ln_f, "unembed": model.unembed}[group][name]
