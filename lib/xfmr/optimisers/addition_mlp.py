"""An MLP on the addition task, the attention-free contrast of Part I's optimiser chapters.

The question ``XXXXX+YYYYY=`` (the first ``2n+2`` tokens) is embedded like the GPT's input
(token plus position embedding, ``(2n+2, d)``), flattened to one vector ``x_0`` of size
``(2n+2) d``, and mapped by a ReLU MLP to the ``n+1`` answer digits at once:

.. math::

    x_{k} = \\mathrm{relu}(x_{k-1} W_k + b_k)\\ (k < D),\\qquad
    z = x_{D-1} W_D + b_D \\in \\mathbb R^{(n+1) V}\\ \\text{reshaped to}\\ (n+1, V),

with cross-entropy on the answer digits. Initialisation as the GPT's
(:mod:`xfmr.experiments.gpt`): weights ``N(0, (0.8/sqrt(d))^2)``, biases zero. Parameters::

    {"embed": {"W_E": (V, d), "W_pos": (2n+2, d)},
     "layers": [{"W": (in, out), "b": (out,)}, ...]}      # D layers
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from xfmr.experiments.addition import VOCAB_SIZE
from xfmr.core.validate import check_int

__all__ = ["init_mlp", "mlp_logits", "mlp_loss"]


def init_mlp(key: jax.Array, d_model: int, width: int, depth: int = 3, n_digits: int = 5,
             dtype=jnp.float32, init_std: float | None = None) -> dict:
    """Parameters of the MLP: ``depth`` weight layers, hidden ``width``, embedding ``d_model``."""
    d = check_int(d_model, "d_model", minimum=1)
    width = check_int(width, "width", minimum=1)
    depth = check_int(depth, "depth", minimum=1)
    n = check_int(n_digits, "n_digits", minimum=1)
    std = 0.8 / math.sqrt(d) if init_std is None else init_std
    n_in, n_out = 2 * n + 2, n + 1
    sizes = [n_in * d] + [width] * (depth - 1) + [n_out * VOCAB_SIZE]
    keys = jax.random.split(key, depth + 2)
    params = {"embed": {"W_E": std * jax.random.normal(keys[0], (VOCAB_SIZE, d), dtype),
                        "W_pos": std * jax.random.normal(keys[1], (n_in, d), dtype)},
              "layers": []}
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        params["layers"].append({"W": std * jax.random.normal(keys[k + 2], (a, b), dtype),
                                 "b": jnp.zeros((b,), dtype)})
    return params


def mlp_logits(params: dict, tokens: jax.Array, n_digits: int = 5) -> jax.Array:
    """Logits ``(B, n+1, V)`` of the answer digits from the question ``tokens[:, :2n+2]``."""
    n_in = 2 * n_digits + 2
    E = params["embed"]
    x = E["W_E"][tokens[:, :n_in]] + E["W_pos"][:n_in]
    x = x.reshape(x.shape[0], -1)
    layers = params["layers"]
    for layer in layers[:-1]:
        x = jax.nn.relu(x @ layer["W"] + layer["b"])
    z = x @ layers[-1]["W"] + layers[-1]["b"]
    return z.reshape(z.shape[0], n_digits + 1, VOCAB_SIZE)


def mlp_loss(params: dict, tokens: jax.Array, n_digits: int = 5) -> jax.Array:
    """Mean cross-entropy of the ``n+1`` answer digits ``tokens[:, 2n+2:]``."""
    logits = mlp_logits(params, tokens, n_digits)
    logp = jax.nn.log_softmax(logits, axis=-1)
    tgt = tokens[:, 2 * n_digits + 2:]
    return -jnp.mean(jnp.take_along_axis(logp, tgt[..., None], axis=-1))
