"""Tests for xfmr.cross_entropy.divergences: identities (Gibbs, CE = H + KL), edge cases, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import distributions
from xfmr.cross_entropy.divergences import (
    check_distribution, cross_entropy, entropy, histogram, kl_divergence, total_variation,
)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(k=st.integers(2, 9), zeros=st.integers(0, 1), data=st.data())
def test_ce_equals_entropy_plus_kl_and_gibbs(k, zeros, data):
    p, q = jnp.asarray(data.draw(distributions(k, zeros))), jnp.asarray(data.draw(distributions(k)))
    np.testing.assert_allclose(cross_entropy(p, q), entropy(p) + kl_divergence(p, q), rtol=1e-12, atol=1e-12)
    assert kl_divergence(p, q) >= 0
    assert 0 <= total_variation(p, q) <= 1
    # reference implementation with numpy
    pn, qn = np.asarray(p), np.asarray(q)
    m = pn > 0
    np.testing.assert_allclose(kl_divergence(p, q), np.sum(pn[m] * np.log(pn[m] / qn[m])), rtol=1e-12)
    # Pinsker: TV <= sqrt(KL / 2)
    assert total_variation(p, q) <= np.sqrt(kl_divergence(p, q) / 2) + 1e-12


def test_zero_cases():
    p = jnp.array([0.5, 0.5, 0.0])
    np.testing.assert_allclose(kl_divergence(p, p), 0.0, atol=1e-15)
    np.testing.assert_allclose(entropy(p), np.log(2), rtol=1e-14)
    assert np.isinf(kl_divergence(p, jnp.array([1.0, 0.0, 0.0])))
    assert np.isfinite(kl_divergence(jnp.array([1.0, 0.0, 0.0]), p))
    np.testing.assert_allclose(total_variation(jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])), 1.0)


def test_batched_and_gradient_finite_at_zero():
    p = jnp.array([[0.2, 0.8, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    q = jnp.array([0.3, 0.3, 0.4])
    assert kl_divergence(p, q).shape == (2,)
    g = jax.grad(lambda q: kl_divergence(p[0], q))(q)
    assert np.all(np.isfinite(g)) and g[2] == 0.0


def test_histogram():
    np.testing.assert_allclose(histogram([5, 3, 2, 0]), [0.5, 0.3, 0.2, 0.0])
    np.testing.assert_allclose(histogram([[1, 1], [0, 4]]), [[0.5, 0.5], [0.0, 1.0]])


def test_float32_preserved():
    p = jnp.array([0.25, 0.75], jnp.float32)
    assert kl_divergence(p, p).dtype == jnp.float32
    assert histogram(jnp.array([1.0, 3.0], jnp.float32)).dtype == jnp.float32


@pytest.mark.parametrize(
    "fn, args, match",
    [
        (histogram, ([3, -1, 2],), "counts must be non-negative"),
        (histogram, ([0, 0],), "counts must have a positive total"),
        (check_distribution, ([0.5, 0.6], "probs"), "probs must sum to 1"),
        (check_distribution, ([1.2, -0.2], "probs"), "probs must be non-negative"),
        (check_distribution, (0.5, "probs"), "probs must have at least 1 dimension"),
        (kl_divergence, ([0.5, 0.5], [0.2, 0.2, 0.6]), "p and q must have the same number"),
        (kl_divergence, ([[0.5, 0.5]] * 2, [[0.5, 0.5]] * 3), "p and q must have broadcastable"),
        (kl_divergence, ([0.5, 0.6], [0.5, 0.5]), "p must sum to 1"),
        (cross_entropy, ([0.5, 0.5], [0.9, 0.2]), "q must sum to 1"),
        (entropy, ([np.nan, 1.0],), "p must be finite"),
    ],
)
def test_bad_input_raises_clear_error(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_no_checks_under_jit():
    # traced inputs are not validated (no host sync); results still computed
    out = jax.jit(total_variation)(jnp.array([0.5, 0.5]), jnp.array([1.0, 0.0]))
    np.testing.assert_allclose(out, 0.5)
