"""Tests of xfmr.experiments.slopes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr.experiments.slopes import fit_slope, fit_slopes, local_slopes


@settings(max_examples=30, deadline=None, derandomize=True)
@given(p=st.floats(-6, 60), logc=st.floats(-20, 20))
def test_exact_power_law(p, logc):
    s = np.logspace(-2, 1, 20)
    slope, icpt = fit_slope(s, 10.0 ** (logc + p * np.log10(s)))
    assert abs(slope - p) < 1e-8 and abs(icpt - logc) < 1e-8


def test_window_and_uncertainty():
    rng = np.random.default_rng(0)
    s = np.logspace(-2, 1, 20)
    true = np.array([6.0 + 0.05 * rng.standard_normal() for _ in range(40)])
    vals = np.stack([s ** p * np.where(s > 1, s ** -4.0, 1.0) for p in true])
    fit = fit_slopes(s, vals, hi=1.0)
    assert abs(fit.mean - true.mean()) < 1e-8
    assert abs(fit.std - true.std(ddof=1)) < 1e-8
    assert abs(fit.se - true.std(ddof=1) / np.sqrt(40)) < 1e-8
    assert fit.within(6.0, 0.1) and not fit.within(5.0, 0.5)
    assert fit.hi <= 1.0 and fit.lo == s[0]
    # the whole range mixes the two regimes
    assert fit_slopes(s, vals).mean < 5.0


def test_local_slopes():
    s = np.logspace(-1, 1, 5)
    mid, sl = local_slopes(s, np.stack([s ** 2, s ** 3]))
    assert mid.shape == (4,) and np.allclose(sl, [[2] * 4, [3] * 4])


def test_bad_input_raises():
    with pytest.raises(ValueError, match="values"):
        fit_slope([1, 2], [1, -1])
    with pytest.raises(ValueError, match="values"):
        fit_slopes([1, 2, 3], np.ones(3))
    with pytest.raises(ValueError, match="lo, hi"):
        fit_slopes([1, 2, 3], np.ones((2, 3)), lo=5)
    with pytest.raises(ValueError, match="sigmas"):
        fit_slope([0, 1], [1, 1])
