"""Pieces shared by the book's neural networks.

- :func:`softmax_cross_entropy`: cross-entropy from logits, the training loss of every
  classifier in the book (Part I's GPT, Part III's K-hop models); Part II derives it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.core.validate import check_labels, check_logits

__all__ = ["softmax_cross_entropy"]


def softmax_cross_entropy(logits, labels) -> jax.Array:
    """Cross-entropy from logits, $-\\log \\mathrm{softmax}(z)_y$: ``(..., K), (...) -> (...)``.

    Computed stably as $\\operatorname{logsumexp}(z) - z_y$.
    """
    logits = check_logits(logits, "logits")
    labels = check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jax.nn.logsumexp(logits, axis=-1) - z_y
