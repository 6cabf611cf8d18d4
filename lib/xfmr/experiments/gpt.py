"""A GPT-2-style decoder in JAX, written for this book (the model of the paper's experiments).

The model maps tokens ``(B, n)`` to logits ``(B, n, V)``:

.. math::

    x^{(0)}_t = \\sigma\\,(W_E[\\text{tok}_t] + W_{pos}[t]),\\qquad
    x \\leftarrow \\rho\\, x + \\mathrm{Attn}(\\mathrm{LN}_1 x),\\qquad
    x \\leftarrow x + \\mathrm{MLP}(\\mathrm{LN}_2 x),\\qquad
    \\text{logits} = \\mathrm{LN}_f(x)\\, W_U + b_U,

with :math:`\\sigma` = ``embed_scale`` (the paper's embedding scale), :math:`\\rho` =
``attn_residual_scale``, and one attention + MLP pair per layer. Attention of one head ``h``
with ``d_head = d_model / n_heads`` (columns ``h*d_head:(h+1)*d_head`` of ``W_Q, W_K, W_V``
and rows of ``W_O``):

.. math::

    T = \\frac{(x W_Q + b_Q)(x W_K + b_K)^\\top}{\\sqrt{d_{head}}},\\quad
    A = \\mathrm{softmax}_{\\text{row}}(T + \\text{causal mask}),\\quad
    \\mathrm{Attn}(x) = \\big[A (x W_V + b_V)\\big]_{\\text{heads}} W_O + b_O .

``softmax=False`` uses the masked scores directly (``A = T`` below the diagonal, ``0``
above), the paper's "softmax removed" ablation. The MLP is
``act(x W_in + b_in) W_out + b_out`` with ``act`` ReLU or GELU.

LayerNorm placement: ``"none"``; ``"pre"`` (GPT-2: ``LN_1`` before attention, ``LN_2``
before the MLP, and a final ``LN_f``); ``"post"`` (original Transformer:
``x <- LN_1(rho x + Attn(x))``, ``x <- LN_2(x + MLP(x))``, no final LN).

Parameters are a pytree with named blocks so that any Hessian block can be addressed by a
path such as ``("blocks", 0, "attn", "W_Q")``::

    {"embed":   {"W_E": (V, d), "W_pos": (max_len, d)},
     "blocks":  [{"attn": {"W_Q": (d, d), "W_K": (d, d), "W_V": (d, d), "W_O": (d, d),
                           "b_Q": (d,), "b_K": (d,), "b_V": (d,), "b_O": (d,)},
                  "mlp":  {"W_in": (d, d_mlp), "b_in": (d_mlp,), "W_out": (d_mlp, d), "b_out": (d,)},
                  "ln1":  {"scale": (d,), "bias": (d,)},   # only if layer_norm != "none"
                  "ln2":  {...}},                          # only if layer_norm != "none" and mlp
                 ...],
     "ln_f":    {"scale": (d,), "bias": (d,)},             # only if layer_norm == "pre"
     "unembed": {"W_U": (d, V), "b_U": (V,)}}

Initialisation (GPT-2 / TransformerLens style, as in the paper): every weight matrix,
embeddings included, is drawn ``N(0, init_std^2)`` with ``init_std = 0.8 / sqrt(d_model)``
by default; biases are zero; LayerNorm scales one, biases zero. The computation preserves
the dtype of the parameters (float32 or float64); ``init_params`` takes a ``dtype``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from xfmr.core.nn import dense, init_attention, init_layer_norm, layer_norm, multi_head_attention
from xfmr.core.validate import (check_array, check_choice, check_dtype_enabled, check_float_dtype, check_instance,
                                check_int, check_real)

__all__ = ["GPTConfig", "init_params", "forward", "forward_from_embedding", "head", "embed", "mlp"]
_ACTIVATIONS = ("relu", "gelu")
_LAYER_NORMS = ("none", "pre", "post")


@dataclass(frozen=True)
class GPTConfig:
    """Hyper-parameters of the decoder (immutable, hashable: usable as a jit static arg).

    ``d_mlp`` defaults to ``4 * d_model``; ``init_std`` to ``0.8 / sqrt(d_model)``.
    """

    vocab_size: int
    max_len: int
    d_model: int
    n_layers: int = 1
    n_heads: int = 1
    d_mlp: int | None = None
    activation: str = "relu"
    layer_norm: str = "none"
    softmax: bool = True
    attn_residual_scale: float = 1.0
    mlp: bool = True
    causal: bool = True
    init_std: float | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, minimum=1))
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={self.d_model}, "
                f"n_heads={self.n_heads}"
            )
        if self.d_mlp is not None:
            object.__setattr__(self, "d_mlp", check_int(self.d_mlp, "d_mlp", minimum=1))
        check_choice(self.activation, "activation", _ACTIVATIONS)
        check_choice(self.layer_norm, "layer_norm", _LAYER_NORMS)
        check_real(self.attn_residual_scale, "attn_residual_scale")
        if self.init_std is not None:
            check_real(self.init_std, "init_std", minimum=0.0, strict_minimum=True)
        for name in ("softmax", "mlp", "causal"):
            check_instance(getattr(self, name), name, bool)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def mlp_width(self) -> int:
        return 4 * self.d_model if self.d_mlp is None else self.d_mlp

    @property
    def std(self) -> float:
        return 0.8 / math.sqrt(self.d_model) if self.init_std is None else self.init_std


def init_params(key: jax.Array, config: GPTConfig, dtype=jnp.float32) -> dict:
    """Draw the parameters at initialisation (see module docstring for the pytree layout).

    Args:
        key: a JAX PRNG key.
        config: the :class:`GPTConfig`.
        dtype: float32 or float64 (float64 needs ``jax_enable_x64``).
    """
    check_instance(config, "config", GPTConfig)
    dtype = check_dtype_enabled(check_float_dtype(dtype))
    d, V, m, std = config.d_model, config.vocab_size, config.mlp_width, config.std
    keys = iter(jax.random.split(key, 3 + 6 * config.n_layers))

    def normal(shape):
        return std * jax.random.normal(next(keys), shape, dtype)

    def zeros(shape):
        return jnp.zeros(shape, dtype)

    params: dict = {"embed": {"W_E": normal((V, d)), "W_pos": normal((config.max_len, d))}}
    blocks = []
    for _ in range(config.n_layers):
        block: dict = {"attn": init_attention(keys, d, std, dtype)}
        if config.mlp:
            block["mlp"] = {"W_in": normal((d, m)), "b_in": zeros((m,)),
                            "W_out": normal((m, d)), "b_out": zeros((d,))}
        else:
            next(keys), next(keys)
        if config.layer_norm != "none":
            block["ln1"] = init_layer_norm(d, dtype)
            if config.mlp:
                block["ln2"] = init_layer_norm(d, dtype)
        blocks.append(block)
    params["blocks"] = blocks
    if config.layer_norm == "pre":
        params["ln_f"] = init_layer_norm(d, dtype)
    params["unembed"] = {"W_U": normal((d, V)), "b_U": zeros((V,))}
    return params


def _attention(p: dict, x: jax.Array, config: GPTConfig, q_pos: jax.Array | None = None):
    """The block's attention (:func:`xfmr.core.nn.multi_head_attention`) with the causal mask when
    ``config.causal``. ``x`` is ``(B, n, d)``; returns ``(out (B, m, d), A (B, H, m, n))``.

    ``q_pos`` (optional, int ``(m,)``) restricts the queries to those positions (keys and
    values use all ``n``); by default ``m = n``.
    """
    n = x.shape[1]
    pos_q = jnp.arange(n) if q_pos is None else q_pos
    mask = pos_q[:, None] >= jnp.arange(n)[None, :] if config.causal else None
    return multi_head_attention(p, x, config.n_heads, mask=mask, x_q=None if q_pos is None else x[:, q_pos],
                                softmax=config.softmax)


def mlp(p: dict, x: jax.Array, config: GPTConfig) -> jax.Array:
    """Token-wise MLP ``act(x W_in + b_in) W_out + b_out``."""
    h = dense(x, p["W_in"], p["b_in"])
    h = jax.nn.relu(h) if config.activation == "relu" else jax.nn.gelu(h, approximate=False)
    return dense(h, p["W_out"], p["b_out"])


def embed(params: dict, tokens: jax.Array, embed_scale=1.0) -> jax.Array:
    """Token + position embedding times ``embed_scale``: ``(B, n) -> (B, n, d)``."""
    E = params["embed"]
    x = E["W_E"][tokens] + E["W_pos"][: tokens.shape[1]]
    return x * jnp.asarray(embed_scale, x.dtype)


def forward_from_embedding(params: dict, x: jax.Array, config: GPTConfig, *,
                           positions=None, return_attention: bool = False,
                           stop_after_last_attention: bool = False):
    """Run the blocks and the unembedding on an embedded input ``x`` of shape ``(B, n, d)``.

    ``positions`` (optional int sequence) computes the logits only at those positions:
    the last layer then uses only those queries (exact, since each position's output in
    the last layer depends on the others only through keys and values).
    ``stop_after_last_attention=True`` (only for ``layer_norm="none"``) returns the residual
    stream right after the last attention, ``rho x + Attn(x)``; :func:`head` maps it to the
    logits token by token.
    """
    if stop_after_last_attention and config.layer_norm != "none":
        raise ValueError("stop_after_last_attention needs config.layer_norm='none', "
                         f"got {config.layer_norm!r}")
    rho = jnp.asarray(config.attn_residual_scale, x.dtype)
    q_last = None if positions is None else jnp.asarray(positions, dtype=jnp.int32)
    attns = []
    n_blocks = len(params["blocks"])
    for i, blk in enumerate(params["blocks"]):
        q_pos = q_last if i == n_blocks - 1 else None
        x_q = x if q_pos is None else x[:, q_pos]
        if config.layer_norm == "pre":
            a, A = _attention(blk["attn"], layer_norm(x, blk["ln1"]), config, q_pos)
            x = rho * x_q + a
            if config.mlp:
                x = x + mlp(blk["mlp"], layer_norm(x, blk["ln2"]), config)
        elif config.layer_norm == "post":
            a, A = _attention(blk["attn"], x, config, q_pos)
            x = layer_norm(rho * x_q + a, blk["ln1"])
            if config.mlp:
                x = layer_norm(x + mlp(blk["mlp"], x, config), blk["ln2"])
        else:
            a, A = _attention(blk["attn"], x, config, q_pos)
            x = rho * x_q + a
            if stop_after_last_attention and i == n_blocks - 1:
                return x
            if config.mlp:
                x = x + mlp(blk["mlp"], x, config)
        attns.append(A)
    if config.layer_norm == "pre":
        x = layer_norm(x, params["ln_f"])
    logits = x @ params["unembed"]["W_U"] + params["unembed"]["b_U"]
    return (logits, attns) if return_attention else logits


def head(params: dict, r: jax.Array, config: GPTConfig) -> jax.Array:
    """Token-wise map from the residual after the last attention to the logits (no LN):
    ``r + MLP(r)`` (if the model has an MLP) times ``W_U`` plus ``b_U``; ``(..., d) -> (..., V)``.
    """
    if config.layer_norm != "none":
        raise ValueError(f"head needs config.layer_norm='none', got {config.layer_norm!r}")
    if config.mlp:
        r = r + mlp(params["blocks"][-1]["mlp"], r, config)
    return r @ params["unembed"]["W_U"] + params["unembed"]["b_U"]


def forward(params: dict, tokens: jax.Array, config: GPTConfig, *,
            return_attention: bool = False, embed_scale=1.0, positions=None):
    """Logits of the decoder.

    Args:
        params: pytree from :func:`init_params`.
        tokens: int array ``(B, n)`` with ``n <= max_len`` and entries in ``[0, vocab_size)``.
        config: the :class:`GPTConfig`.
        return_attention: also return the list over layers of attention ``(B, H, n, n)``.
        embed_scale: the scale ``sigma`` multiplying the embedding (token + position).
        positions: optional int sequence; logits only at those positions ``(B, m, V)``.

    Returns:
        logits ``(B, n, V)`` (or ``(B, m, V)``), and the attention list if requested
        (with ``positions``, the last layer's attention is ``(B, H, m, n)``).
    """
    check_instance(config, "config", GPTConfig)
    tokens = check_array(tokens, "tokens", ndim=2, kind="int")
    if tokens.shape[1] > config.max_len:
        raise ValueError(f"tokens must have n <= max_len={config.max_len}, got n={tokens.shape[1]}")
    if len(params["blocks"]) != config.n_layers:
        raise ValueError(f"params must have n_layers={config.n_layers} blocks, "
                         f"got {len(params['blocks'])}")
    x = embed(params, tokens, embed_scale)
    return forward_from_embedding(params, x, config, positions=positions,
                                  return_attention=return_attention)
