"""Hypothesis strategies shared by the tests: random attention-layer instances drawn as arrays.

Values, not only seeds, come from hypothesis (so that it can shrink a failure to a small
array), over the shapes that matter, three attention regimes (near-uniform, generic, near
one-hot: the scale of ``W_Q``) and input scales.
"""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xfmr.hessian.attention import LayerInstance

# query-weight scale per attention regime: tiny scores (near uniform), O(1), large scores (near one-hot)
REGIMES = {"uniform": 1e-4, "generic": 0.7, "one_hot": 6.0}


def matrices(shape, dtype=np.float64):
    """Arrays of ``shape`` with entries in [-2, 2] (|entries| < 1e-3 set to 0)."""
    # bounded, and away from subnormals: the closed forms are compared with autodiff to ~1e-9
    elements = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False, width=64).map(
        lambda v: 0.0 if abs(v) < 1e-3 else v)
    return hnp.arrays(np.float64, shape, elements=elements).map(lambda a: a.astype(dtype))


@st.composite
def layer_instances(draw, shapes, regimes=tuple(REGIMES), input_scales=(1.0,), dtypes=(np.float64,)):
    """A :class:`LayerInstance` ``(X, Y, W_Q, W_K, W_V)`` of one of ``shapes`` ``(L, d_V, d_K)``;
    ``W_Q`` scaled by the drawn regime's factor, ``X`` by the drawn input scale.
    Returns ``(instance, regime)``."""
    L, d_V, d_K = draw(st.sampled_from(shapes))
    dtype = draw(st.sampled_from(dtypes))
    regime = draw(st.sampled_from(regimes))
    scale = draw(st.sampled_from(input_scales))
    X = draw(matrices((L, d_V), dtype)) * dtype(scale)
    Y = draw(matrices((L, d_V), dtype))
    W_Q = draw(matrices((d_V, d_K), dtype)) * dtype(REGIMES[regime])
    W_K = draw(matrices((d_V, d_K), dtype))
    W_V = draw(matrices((d_V, d_V), dtype))
    return LayerInstance(X, Y, W_Q, W_K, W_V), regime


@st.composite
def distributions(draw, k, n_zeros=0, floor=1e-3):
    """A probability vector of length ``k`` (float64): drawn weights in [floor, 1], the first
    ``n_zeros`` set to exactly 0, normalised. Covers near-uniform and peaked vectors."""
    w = draw(hnp.arrays(np.float64, (k,), elements=st.floats(floor, 1.0, allow_nan=False)))
    peak = draw(st.sampled_from([1.0, 8.0]))  # 8: one entry dominates after the power
    w = w ** peak
    w[:n_zeros] = 0.0
    return w / w.sum()


def logits(shape, scale=6.0):
    """Logit arrays of ``shape`` with entries in [-scale, scale] (saturated softmax included)."""
    return hnp.arrays(np.float64, shape, elements=st.floats(-scale, scale, allow_nan=False, width=64))
