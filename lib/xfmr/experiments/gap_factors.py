"""Why the query block of a Hessian sits below the value block: the gap, factor by factor.

One causal single-head attention sub-layer (biases zero) maps the inputs ``x_j`` (rows of
``X``, shape ``(n, d)``) to ``f_i = W_O^T W_V^T m_i`` with

- softmax:      ``a_i = softmax(t_i)``, ``m_i = sum_{j<=i} a_ij x_j = mu_i``,
                ``da_i/dt_i = diag(a_i) - a_i a_i^T``;
- no softmax:   ``a_i = t_i`` on the visible tokens, ``m_i = sum_{j<=i} t_ij x_j``,
                ``da_i/dt_i = I``;

and ``t_ij = x_i^T W_Q W_K^T x_j / sqrt(d_K)``. The Jacobians of ``f_i`` in the weights are
linear maps whose squared Frobenius norms are, exactly,

    ||df_i/dW_V||^2 = |m_i|^2 ||W_O||_F^2,
    ||df_i/dW_Q||^2 = (1/d_K) |x_i|^2 ||W_O^T W_V^T C_i W_K||_F^2,

with ``C_i = X^T (da_i/dt_i) X``: the attention covariance ``Sigma_i`` with softmax, the raw
second moment ``sum_{j<=i} x_j x_j^T`` without. The outer-product Hessian blocks are built
from these Jacobians (``G = J^T M J`` with the same downstream ``M`` for both blocks), so the
ratio ``R = sum_i ||df_i/dW_Q||^2 / sum_i ||df_i/dW_V||^2`` over the query positions is the
first-order prediction of the query-value gap. :func:`gap_factors` splits ``log10 R`` into
four factors that multiply exactly:

    R = (1/d_K) * w * s * c,
    w = sum_i |x_i|^2 ||W_O^T W_V^T C_i W_K||^2 / (||W_O||^2 sum_i |x_i|^2 ||C_i||^2)   (weights)
    s = rms(|x|)^4                                                                      (token scale)
    c = sum_i |x_i|^2 ||C_i||^2 / (rms(|x|)^4 sum_i |m_i|^2)                         (attention moments)

where ``rms(|x|)^2`` is the mean of ``|x_i|^2`` over the query positions.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.validate import check_array, check_instance

__all__ = ["jacobian_norms", "gap_factors"]


def _checked(x, W_Q, W_K, W_V, W_O):
    x = check_array(x, "x", ndim=3)
    d = x.shape[-1]
    W_Q = check_array(W_Q, "W_Q", ndim=2)
    W_K = check_array(W_K, "W_K", ndim=2)
    W_V = check_array(W_V, "W_V", ndim=2)
    W_O = jnp.eye(W_V.shape[1], dtype=x.dtype) if W_O is None else check_array(W_O, "W_O", ndim=2)
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        if W.shape[0] != d:
            raise ValueError(f"{name} must have {d} rows (the width of x), got shape {W.shape}")
    if W_Q.shape[1] != W_K.shape[1]:
        raise ValueError(f"W_Q and W_K must have the same number of columns, got {W_Q.shape} and {W_K.shape}")
    if W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"W_O must have {W_V.shape[1]} rows (the columns of W_V), got shape {W_O.shape}")
    return x, W_Q, W_K, W_V, W_O


def jacobian_norms(x: Any, W_Q: Any, W_K: Any, W_V: Any, W_O: Any = None, *, softmax: bool = True,
                   positions: Any = None) -> dict[str, jax.Array]:
    """Per-position pieces of the query and value Jacobians of a causal attention sub-layer.

    Args:
        x: inputs ``(B, n, d)``.
        W_Q, W_K: ``(d, d_K)``; W_V: ``(d, d_V)``; W_O: ``(d_V, d_out)`` or None (identity).
        softmax: attention weights ``softmax(t_i)`` (True) or the raw scores ``t_i`` (False).
        positions: query positions (int sequence); default all ``n``.

    Returns:
        dict of arrays of shape ``(B, m)`` (``m`` query positions): ``jq2`` and ``jv2``, the
        squared Frobenius norms of ``df_i/dW_Q`` and ``df_i/dW_V``; ``x2 = |x_i|^2``,
        ``m2 = |m_i|^2``, ``c2 = ||C_i||_F^2``, ``wc2 = ||W_O^T W_V^T C_i W_K||_F^2``; and the
        scalar ``wo2 = ||W_O||_F^2``.
    """
    x, W_Q, W_K, W_V, W_O = _checked(x, W_Q, W_K, W_V, W_O)
    check_instance(softmax, "softmax", bool)
    B, n, d = x.shape
    pos = jnp.arange(n) if positions is None else jnp.asarray(positions, jnp.int32)
    if pos.ndim != 1 or (pos.size and (int(pos.min()) < 0 or int(pos.max()) >= n)):
        raise ValueError(f"positions must be a 1-D sequence of indices in [0, {n}), got {positions!r}")
    return _norms(x, W_Q, W_K, W_V, W_O, pos, softmax)


@functools.partial(jax.jit, static_argnums=6)
def _norms(x, W_Q, W_K, W_V, W_O, pos, softmax):
    n = x.shape[1]
    d_k = W_Q.shape[1]
    t = jnp.einsum("bid,de,fe,bjf->bij", x[:, pos], W_Q, W_K, x) / jnp.sqrt(jnp.asarray(d_k, x.dtype))
    visible = pos[:, None] >= jnp.arange(n)[None, :]                       # (m, n)
    if softmax:
        a = jax.nn.softmax(jnp.where(visible, t, -jnp.inf), axis=-1)      # (B, m, n)
        mean = jnp.einsum("bij,bjd->bid", a, x)
        dev = x[:, None, :, :] - mean[:, :, None, :]                       # (B, m, n, d)
        C = jnp.einsum("bij,bijd,bije->bide", a, dev, dev)
        m = mean
    else:
        a = jnp.where(visible, t, 0.0)
        C = jnp.einsum("ij,bjd,bje->bide", visible.astype(x.dtype), x, x)
        m = jnp.einsum("bij,bjd->bid", a, x)
    xi = x[:, pos]
    x2 = jnp.sum(xi**2, -1)
    m2 = jnp.sum(m**2, -1)
    c2 = jnp.sum(C**2, (-2, -1))
    wc = jnp.einsum("vo,dv,bide,ek->biok", W_O, W_V, C, W_K)
    wc2 = jnp.sum(wc**2, (-2, -1))
    wo2 = jnp.sum(W_O**2)
    return {"jq2": x2 * wc2 / d_k, "jv2": m2 * wo2, "x2": x2, "m2": m2, "c2": c2, "wc2": wc2,
            "wo2": wo2}


def gap_factors(
    x: Any,
    W_Q: Any,
    W_K: Any,
    W_V: Any,
    W_O: Any = None,
    *,
    softmax: bool = True,
    positions: Any = None,
) -> dict[str, float]:
    """``log10`` of the query/value Jacobian ratio ``R`` and of its four
    factors (module doc).

    Returns a dict of floats (decades): ``total = log10 R`` and
    ``scale_1_over_dk``,
    ``weights``, ``token_scale``, ``moments``, which add up to ``total``
    exactly; also
    ``log10_jv2``, ``log10_jq2`` (log10 of the sums over batch and
    positions).
    """
    J = jacobian_norms(
        x, W_Q, W_K, W_V, W_O, softmax=softmax, positions=positions
    )
    x2, m2, c2, wc2, wo2 = (
        np.asarray(J[k], np.float64)
        for k in ("x2", "m2", "c2", "wc2", "wo2")
    )
    d_k = np.shape(W_Q)[1]
    rms4 = np.mean(x2) ** 2
    out = {
        "scale_1_over_dk": -np.log10(d_k),
        "weights": np.log10(np.sum(x2 * wc2) / (wo2 * np.sum(x2 * c2))),
        "token_scale": np.log10(rms4),
        "moments": np.log10(np.sum(x2 * c2) / (rms4 * np.sum(m2))),
        "log10_jq2": np.log10(np.sum(np.asarray(J["jq2"], np.float64))),
        "log10_jv2": np.log10(np.sum(np.asarray(J["jv2"], np.float64))),
    }
    out["total"] = out["log10_jq2"] - out["log10_jv2"]
    return {k: float(v) for k, v in out.items()}
