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

from xfmr.cross_entropy.divergences import check_distribution
from xfmr.core.nn import softmax_cross_entropy
from xfmr.core.validate import (check_array, check_dtype_enabled, check_float_dtype, check_int, check_labels,
                                check_logits)

__all__ = [
    "one_hot",
    "softmax_cross_entropy",
    "softmax_cross_entropy_grad",
    "brier",
    "brier_from_logits",
    "brier_logit_grad",
    "squared_error",
]


def one_hot(labels, n_classes: int, dtype=jnp.float64) -> jax.Array:
    """One-hot vectors $e_y$ of ``dtype`` (float64, the default, needs ``jax_enable_x64``): ``(...) -> (..., n_classes)``.

    Raises:
        ValueError: ``n_classes < 1`` or labels outside ``[0, n_classes)`` (concrete inputs).
    """
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    labels = check_labels(labels, jnp.shape(labels), int(n_classes), "labels")
    return jax.nn.one_hot(labels, n_classes, dtype=check_dtype_enabled(check_float_dtype(dtype)))


def softmax_cross_entropy_grad(logits, labels) -> jax.Array:
    """Closed-form gradient of :func:`softmax_cross_entropy` in the
    logits: $q - e_y$, ``(..., K)``."""
    logits = check_logits(logits, "logits")
    labels = check_labels(
        labels, logits.shape[:-1], logits.shape[-1], "logits"
    )
    return jax.nn.softmax(logits, axis=-1) - jax.nn.one_hot(
        labels, logits.shape[-1], dtype=logits.dtype
    )


def brier(probs, labels) -> jax.Array:
    """Brier score $\\|q - e_y\\|_2^2$ of probabilities $q$ against a label: ``(..., K), (...) -> (...)``.

    Raises:
        ValueError: ``probs`` off the simplex (concrete inputs), or label shape/range errors.
    """
    probs = check_distribution(check_logits(probs, "probs"), "probs")
    labels = check_labels(labels, probs.shape[:-1], probs.shape[-1], "probs")
    e_y = jax.nn.one_hot(labels, probs.shape[-1], dtype=probs.dtype)
    return jnp.sum((probs - e_y) ** 2, axis=-1)


def brier_from_logits(logits, labels) -> jax.Array:
    """Brier score of $q = \\mathrm{softmax}(z)$: $\\|\\mathrm{softmax}(z) - e_y\\|_2^2$, ``(...)``."""
    logits = check_logits(logits, "logits")
    labels = check_labels(labels, logits.shape[:-1], logits.shape[-1], "logits")
    q = jax.nn.softmax(logits, axis=-1)
    e_y = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return jnp.sum((q - e_y) ** 2, axis=-1)


def brier_logit_grad(logits, labels) -> jax.Array:
    """Closed-form gradient of :func:`brier_from_logits`:
    $2(\\mathrm{diag}\\,q - q q^\\top)(q - e_y)$.

    With $r = q - e_y$ this is $2\\,(q \\odot r - q\\,(q^\\top r))$,
    ``(..., K)``.
    """
    logits = check_logits(logits, "logits")
    labels = check_labels(
        labels, logits.shape[:-1], logits.shape[-1], "logits"
    )
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
    check_array(prediction, "prediction", kind="float")
    return (prediction - target.astype(prediction.dtype)) ** 2
