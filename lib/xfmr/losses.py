"""Per-example losses for classification over $K$ classes, and their closed-form logit gradients.

For logits $z \\in \\mathbb{R}^K$, $q = \\mathrm{softmax}(z)$ and a label $y \\in \\{0, \\dots, K-1\\}$
with one-hot vector $e_y$:

$$
\\mathrm{CE}(z, y) = -\\log q_y, \\qquad \\nabla_z \\mathrm{CE} = q - e_y ;
$$
$$
\\mathrm{Brier}(q, y) = \\|q - e_y\\|_2^2, \\qquad
\\nabla_z \\mathrm{Brier} = 2\\,(\\mathrm{diag}(q) - q q^\\top)(q - e_y) ;
$$

and, on the label's *value* (a number, e.g. the class index), the squared error
$(\\hat y - y)^2$ with minimiser $\\mathbb{E}[y]$.

All functions act on the last axis of ``logits``/``probs`` and broadcast over leading axes;
``labels`` are integer arrays of shape ``logits.shape[:-1]``. They return per-example losses
``(...)``: average them yourself. Concrete inputs are validated (label range, shapes).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.divergences import check_distribution
from xfmr.validate import check_int, is_concrete

__all__ = [
    "one_hot",
    "softmax_cross_entropy",
    "softmax_cross_entropy_grad",
    "brier",
    "brier_from_logits",
    "brier_logit_grad",
    "squared_error",
]


def _check_scores(x, name: str) -> jax.Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name} must be a float array (..., K), got dtype {x.dtype}")
    if x.ndim < 1:
        raise ValueError(f"{name} must have at least 1 dimension (..., K), got shape {x.shape}")
    return x


def _check_labels(labels, batch_shape: tuple[int, ...], n_classes: int, scores_name: str) -> jax.Array:
    labels = jnp.asarray(labels)
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise TypeError(f"labels must be an integer array of class indices, got dtype {labels.dtype}")
    if labels.shape != batch_shape:
        raise ValueError(
            f"labels must have shape {scores_name}.shape[:-1] = {batch_shape}, got {labels.shape}"
        )
    if is_concrete(labels) and labels.size:
        a = np.asarray(labels)
        if a.min() < 0 or a.max() >= n_classes:
            raise ValueError(
                f"labels must lie in [0, {n_classes}) (K = {n_classes} classes), got range "
                f"[{a.min()}, {a.max()}]"
            )
    return labels


def one_hot(labels, n_classes: int, dtype=None) -> jax.Array:
    """One-hot vectors $e_y$: ``(...) -> (..., n_classes)``.

    Raises:
        ValueError: ``n_classes < 1`` or labels outside ``[0, n_classes)`` (concrete inputs).
    """
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    labels = _check_labels(labels, jnp.shape(labels), int(n_classes), "labels")
    return jax.nn.one_hot(labels, n_classes, dtype=dtype or jnp.result_type(float))


def softmax_cross_entropy(logits, labels) -> jax.Array:
    """Cross-entropy from logits, $-\\log \\mathrm{softmax}(z)_y$: ``(..., K), (...) -> (...)``.

    Computed stably as $\\operatorname{logsumexp}(z) - z_y$.
    """
    logits = _check_scores(logits, "logits")
    labels = _check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jax.nn.logsumexp(logits, axis=-1) - z_y


def softmax_cross_entropy_grad(logits, labels) -> jax.Array:
    """Closed-form gradient of :func:`softmax_cross_entropy` in the logits: $q - e_y$, ``(..., K)``."""
    logits = _check_scores(logits, "logits")
    labels = _check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    return jax.nn.softmax(logits, axis=-1) - jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)


def brier(probs, labels) -> jax.Array:
    """Brier score $\\|q - e_y\\|_2^2$ of probabilities $q$ against a label: ``(..., K), (...) -> (...)``.

    Raises:
        ValueError: ``probs`` off the simplex (concrete inputs), or label shape/range errors.
    """
    probs = check_distribution(_check_scores(probs, "probs"), "probs")
    labels = _check_labels(labels, probs.shape[:-1], probs.shape[-1], "probs")
    e_y = jax.nn.one_hot(labels, probs.shape[-1], dtype=probs.dtype)
    return jnp.sum((probs - e_y) ** 2, axis=-1)


def brier_from_logits(logits, labels) -> jax.Array:
    """Brier score of $q = \\mathrm{softmax}(z)$: $\\|\\mathrm{softmax}(z) - e_y\\|_2^2$, ``(...)``."""
    logits = _check_scores(logits, "logits")
    labels = _check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    q = jax.nn.softmax(logits, axis=-1)
    e_y = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return jnp.sum((q - e_y) ** 2, axis=-1)


def brier_logit_grad(logits, labels) -> jax.Array:
    """Closed-form gradient of :func:`brier_from_logits`: $2(\\mathrm{diag}\\,q - q q^\\top)(q - e_y)$.

    With $r = q - e_y$ this is $2\\,(q \\odot r - q\\,(q^\\top r))$, ``(..., K)``.
    """
    logits = _check_scores(logits, "logits")
    labels = _check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    q = jax.nn.softmax(logits, axis=-1)
    r = q - jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return 2.0 * (q * r - q * jnp.sum(q * r, axis=-1, keepdims=True))


def squared_error(prediction, target) -> jax.Array:
    """Squared error on values, $(\\hat y - y)^2$, elementwise; shapes must match exactly.

    Used with the label's *value* as target (e.g. a token index as a number): the minimiser of
    its expectation is the conditional mean $\\mathbb{E}[y \\mid x]$, a single number.
    """
    prediction = jnp.asarray(prediction)
    target = jnp.asarray(target)
    if prediction.shape != target.shape:
        raise ValueError(
            f"prediction and target must have the same shape, got prediction {prediction.shape} "
            f"and target {target.shape}"
        )
    if not jnp.issubdtype(prediction.dtype, jnp.floating):
        raise TypeError(f"prediction must be a float array, got dtype {prediction.dtype}")
    return (prediction - target.astype(prediction.dtype)) ** 2
