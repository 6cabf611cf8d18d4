"""Tests for xfmr.cross_entropy.losses: closed forms against autodiff and references, properness, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.strategies import distributions, logits
from xfmr.cross_entropy.losses import (
    brier, brier_from_logits, brier_logit_grad, one_hot, softmax_cross_entropy,
    softmax_cross_entropy_grad, squared_error,
)


def _case(seed, k, batch=(3,)):
    rng = np.random.default_rng(seed)
    z = jnp.asarray(3.0 * rng.standard_normal(batch + (k,)))
    y = jnp.asarray(rng.integers(0, k, batch))
    return z, y


@st.composite
def logit_cases(draw, batch=3):
    """Logits z (batch, k), scale up to 6 (saturated rows included), and labels y (batch,)."""
    k = draw(st.integers(2, 7))
    z = jnp.asarray(draw(logits((batch, k))))
    y = jnp.asarray(draw(st.lists(st.integers(0, k - 1), min_size=batch, max_size=batch)))
    return z, y


@settings(max_examples=6, deadline=None, derandomize=True)
@given(case=logit_cases())
def test_cross_entropy_matches_reference_and_autodiff(case):
    z, y = case
    q = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    np.testing.assert_allclose(softmax_cross_entropy(z, y), -np.log(q[np.arange(3), y]), rtol=1e-12)
    g = jax.grad(lambda z: softmax_cross_entropy(z, y).sum())(z)
    np.testing.assert_allclose(softmax_cross_entropy_grad(z, y), g, rtol=1e-10, atol=1e-14)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(case=logit_cases())
def test_brier_matches_reference_and_autodiff(case):
    z, y = case
    k = z.shape[-1]
    q = jax.nn.softmax(z)
    ref = np.sum((np.asarray(q) - np.eye(k)[np.asarray(y)]) ** 2, -1)
    np.testing.assert_allclose(brier(q, y), ref, rtol=1e-12)
    np.testing.assert_allclose(brier_from_logits(z, y), ref, rtol=1e-12)
    g = jax.grad(lambda z: brier_from_logits(z, y).sum())(z)
    np.testing.assert_allclose(brier_logit_grad(z, y), g, rtol=1e-9, atol=1e-14)


@settings(max_examples=5, deadline=None, derandomize=True)
@given(k=st.integers(2, 6), data=st.data())
def test_both_scores_strictly_proper(k, data):
    """Expected score under p is minimised at q = p (checked against drawn q), vectorised."""
    p = jnp.asarray(data.draw(distributions(k)))
    others = [data.draw(distributions(k)) for _ in range(20)]
    others = [q for q in others if np.max(np.abs(q - np.asarray(p))) > 1e-6]  # q = p ties
    assume(others)
    qs = jnp.concatenate([p[None], jnp.asarray(np.array(others))])  # (n, k), qs[0] = p
    n = qs.shape[0]
    labels = jnp.broadcast_to(jnp.arange(k), (n, k))
    q_rows = jnp.broadcast_to(qs[:, None, :], (n, k, k))  # prediction q for every label y
    expected_ce = jnp.sum(p * softmax_cross_entropy(jnp.log(q_rows), labels), -1)
    expected_brier = jnp.sum(p * brier(q_rows, labels), -1)
    assert np.all(expected_ce[1:] > expected_ce[0])
    assert np.all(expected_brier[1:] > expected_brier[0])
    # Brier decomposition: E||q - e_y||^2 = ||q - p||^2 + 1 - ||p||^2; both sides are sums of
    # O(1) terms, so near q = p (a value ~1e-6 when p is nearly one-hot) only an absolute
    # float64 error bound holds
    np.testing.assert_allclose(expected_brier, jnp.sum((qs - p) ** 2, -1) + 1 - jnp.sum(p**2),
                               rtol=1e-12, atol=1e-14)


def test_brier_gradient_vanishes_when_saturated_and_wrong():
    z = jnp.array([0.0, 20.0, 0.0])
    y = jnp.array(0)
    assert np.linalg.norm(brier_logit_grad(z, y)) < 1e-7
    assert np.linalg.norm(softmax_cross_entropy_grad(z, y)) > 1.4


def test_squared_error_and_one_hot():
    np.testing.assert_allclose(squared_error(jnp.array([1.5, 2.0]), jnp.array([0, 4])), [2.25, 4.0])
    np.testing.assert_array_equal(one_hot(jnp.array([2, 0]), 3), [[0, 0, 1], [1, 0, 0]])


def test_float32_preserved():
    z, y = _case(0, 4)
    z = z.astype(jnp.float32)
    assert softmax_cross_entropy(z, y).dtype == jnp.float32
    assert brier_logit_grad(z, y).dtype == jnp.float32


def test_works_under_jit():
    """Traced labels pass the checks; the value is -log softmax(z)_y, computed here in NumPy."""
    z, y = _case(1, 5)
    zn, yn = np.asarray(z), np.asarray(y)
    m = zn.max(-1, keepdims=True)
    log_q = zn - m - np.log(np.exp(zn - m).sum(-1, keepdims=True))
    ref = -np.take_along_axis(log_q, yn[..., None], -1)[..., 0]
    np.testing.assert_allclose(jax.jit(softmax_cross_entropy)(z, y), ref, rtol=1e-12)


@pytest.mark.parametrize(
    "fn, args, error, match",
    [
        (softmax_cross_entropy, (jnp.zeros((3, 4)), jnp.array([0, 1])), ValueError, "labels must have shape"),
        (softmax_cross_entropy, (jnp.zeros((2, 4)), jnp.array([0, 4])), ValueError, "labels must lie in"),
        (softmax_cross_entropy, (jnp.zeros((2, 4)), jnp.array([0.0, 1.0])), TypeError, "labels must be an integer"),
        (softmax_cross_entropy, (jnp.zeros((2, 4), jnp.int32), jnp.array([0, 1])), TypeError, "logits must be a float"),
        (softmax_cross_entropy, (jnp.array(1.0), jnp.array(0)), ValueError, "logits must have at least 1"),
        (brier, (jnp.array([0.7, 0.7]), jnp.array(0)), ValueError, "probs must sum to 1"),
        (brier, (jnp.array([1.5, -0.5]), jnp.array(0)), ValueError, "probs must be non-negative"),
        (brier, (jnp.array([0.5, 0.5]), jnp.array(-1)), ValueError, "labels must lie in"),
        (brier_logit_grad, (jnp.zeros(3), jnp.array([0])), ValueError, "labels must have shape"),
        (squared_error, (jnp.zeros(3), jnp.zeros(2)), ValueError, "prediction and target must have the same shape"),
        (one_hot, (jnp.array([0, 3]), 3), ValueError, "labels must lie in"),
        (one_hot, (jnp.array([0]), 0), ValueError, "n_classes"),
    ],
)
def test_bad_input_raises_clear_error(fn, args, error, match):
    with pytest.raises(error, match=match):
        fn(*args)
