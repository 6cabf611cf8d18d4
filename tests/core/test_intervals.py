"""xfmr.core.intervals: the t-interval against scipy's, its coverage on simulated pairs, and
its argument checks."""

import numpy as np
import pytest
from scipy import stats

from xfmr.core.intervals import paired_interval, t_interval


def test_matches_scipy_one_sample_interval_of_the_differences():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12)
    out = paired_interval(a, b, level=0.9)
    d = a - b
    low, high = stats.t.interval(0.9, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    assert out["value"] == pytest.approx(d.mean())
    assert (out["low"], out["high"]) == pytest.approx((low, high))


def test_covers_the_true_mean_difference_at_its_level():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(2000):
        shared = rng.normal(size=8)             # what the pairing cancels
        a = shared + 0.3 + rng.normal(scale=0.5, size=8)
        b = shared + rng.normal(scale=0.5, size=8)
        out = paired_interval(a, b)
        hits += out["low"] <= 0.3 <= out["high"]
    assert abs(hits / 2000 - 0.95) < 0.015


def test_zero_spread_and_checks():
    out = paired_interval([1.0, 2.0, 3.0], [0.5, 1.5, 2.5])
    assert out == {"value": 0.5, "low": 0.5, "high": 0.5}
    for bad in (([1.0], [2.0]), ([1.0, 2.0], [1.0]), ([1.0, np.nan], [1.0, 2.0])):
        with pytest.raises(ValueError):
            paired_interval(*bad)
    with pytest.raises(ValueError):
        paired_interval([1.0, 2.0], [0.0, 0.0], level=1.0)


def test_t_interval_of_three_values():
    entry = t_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, t_{0.975, 2} = 4.302653
    assert entry["value"] == 2.0
    np.testing.assert_allclose(entry["high"] - 2.0, 4.302653 / np.sqrt(3), rtol=1e-6)
    np.testing.assert_allclose(entry["low"], 4.0 - entry["high"], rtol=1e-12)
    assert t_interval([1.0, 2.0, 3.0], level=0.5)["high"] < entry["high"]
    for bad, match in (([1.0], "at least two"), ([1.0, np.inf], "finite"), ([[1.0, 2.0]], "1-D")):
        with pytest.raises(ValueError, match=match):
            t_interval(bad)
    with pytest.raises(ValueError, match="level"):
        t_interval([1.0, 2.0], level=0.0)
