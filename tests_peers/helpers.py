"""Shared set-up of the cross-framework tests: one small decoder on the addition task,
built in JAX and loaded into PyTorch."""

import jax
import jax.numpy as jnp
import numpy as np
import torch

from bookkit.peers.torch_gpt import TorchGPT, to_torch
from xfmr.experiments.addition import answer_positions, make_batch
from xfmr.experiments.gpt import GPTConfig, embed, init_params

N_ANSWER = 6  # answer digits of 5-digit addition: tokens[:, 12:]


def small_model(layer_norm="none", *, d_model=4, n_layers=2, batch_size=2, sigma=0.7,
                seed=0, init_std=0.8, **config):
    """``(cfg, params, tokens, x, model, X_t, y_t)``: JAX model and its PyTorch twin.

    ``x`` is the embedded batch ``sigma * (W_E[tok] + W_pos)``; ``X_t, y_t`` the same input
    and the flattened answer targets as torch tensors. ``init_std=0.8`` (not the paper's
    0.8/sqrt(d), ``init_std=None``) so that attention is far from uniform and every block of
    the Hessian is well away from 0 at these tiny sizes.
    """
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=d_model, n_layers=n_layers,
                    layer_norm=layer_norm, init_std=init_std, **config)
    params = init_params(jax.random.key(seed), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(seed + 1), batch_size)
    x = embed(params, tokens, sigma)
    model = TorchGPT(params, cfg, positions=answer_positions())
    y_t = torch.tensor(np.array(tokens[:, -N_ANSWER:]).reshape(-1), dtype=torch.long)
    return cfg, params, tokens, x, model, to_torch(x), y_t


def relative_error(a, b) -> float:
    """``||a - b||_F / ||b||_F``."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))
