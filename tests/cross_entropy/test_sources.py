"""Tests for xfmr.cross_entropy.sources: chain construction, exact probabilities, sampling statistics."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.cross_entropy.divergences import histogram, total_variation
from xfmr.cross_entropy.sources import (
    long_tailed_chain, markov_chain, next_token_conditionals, sample_chain, sequence_log_prob,
    stationary_distribution, transition_counts,
)


def test_long_tailed_chain_rows_are_zipf():
    chain = long_tailed_chain(jax.random.key(0), 6, exponent=1.5)
    zipf = np.arange(1, 7) ** -1.5
    zipf /= zipf.sum()
    for row in np.asarray(chain.transition):
        np.testing.assert_allclose(np.sort(row)[::-1], zipf, rtol=1e-12)
    np.testing.assert_allclose(chain.initial, np.full(6, 1 / 6))
    # the dtype is an argument (float64 by default), not the process flag
    assert chain.transition.dtype == jnp.float64
    narrow = long_tailed_chain(jax.random.key(0), 6, exponent=1.5, dtype=jnp.float32)
    assert narrow.transition.dtype == jnp.float32
    np.testing.assert_allclose(narrow.transition, chain.transition, rtol=1e-6)
    with jax.enable_x64(False), pytest.raises(ValueError, match="jax_enable_x64"):
        long_tailed_chain(jax.random.key(0), 6)


def test_stationary_distribution_is_fixed_point():
    chain = long_tailed_chain(jax.random.key(1), 7)
    pi = stationary_distribution(chain)
    np.testing.assert_allclose(pi @ chain.transition, pi, atol=1e-12)
    np.testing.assert_allclose(pi.sum(), 1.0, rtol=1e-12)


def test_joint_sums_to_one_by_enumeration():
    chain = long_tailed_chain(jax.random.key(2), 3)
    seqs = jnp.array(list(itertools.product(range(3), repeat=4)))
    np.testing.assert_allclose(jnp.exp(sequence_log_prob(chain, seqs)).sum(), 1.0, rtol=1e-12)
    cond = next_token_conditionals(chain, seqs)
    assert cond.shape == (81, 4, 3)
    lp = jnp.log(jnp.take_along_axis(cond, seqs[..., None], -1)[..., 0]).sum(-1)
    np.testing.assert_allclose(lp, sequence_log_prob(chain, seqs), rtol=1e-12)


def test_sampling_matches_chain():
    chain = long_tailed_chain(jax.random.key(3), 4, exponent=1.0)
    x = sample_chain(chain, jax.random.key(4), 2000, 20)
    assert x.shape == (2000, 20) and x.dtype == jnp.int32
    counts = transition_counts(x, 4)
    assert int(counts.sum()) == 2000 * 19
    # TV of the estimated rows to the truth: about sqrt(K / n_row) / 2 ~ 0.02
    assert float(total_variation(histogram(counts), chain.transition).max()) < 0.05
    np.testing.assert_allclose(histogram(jnp.bincount(x[:, 0], length=4)), chain.initial, atol=0.04)
    assert sample_chain(chain, jax.random.key(4), 3, 1).shape == (3, 1)


def test_sampling_jits_and_follows_the_chain():
    """Under jit, with a deterministic chain (one successor per state), the sample is the
    chain's only path: traced sampling still follows the transition matrix."""
    cycle = jnp.roll(jnp.eye(4), 1, axis=1)  # state i -> i + 1 mod 4
    chain = markov_chain(jnp.array([0.0, 0.0, 1.0, 0.0]), cycle)
    x = jax.jit(lambda k: sample_chain(chain, k, 5, 6))(jax.random.key(0))
    assert x.shape == (5, 6)
    np.testing.assert_array_equal(x, (2 + np.arange(6))[None, :].repeat(5, 0) % 4)


@pytest.mark.parametrize(
    "fn, args, match",
    [
        (markov_chain, ([0.5, 0.5], [[0.5, 0.5], [0.2, 0.7]]), "transition must sum to 1"),
        (markov_chain, ([0.5, 0.5], [[1.0, 0.0, 0.0]] * 3), "transition must have shape"),
        (markov_chain, ([0.5, 0.6], [[0.5, 0.5], [0.5, 0.5]]), "initial must sum to 1"),
        (markov_chain, ([[0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]), "initial must be 1-D"),
        (markov_chain, ([1.5, -0.5], [[0.5, 0.5], [0.5, 0.5]]), "initial must be non-negative"),
        (long_tailed_chain, (jax.random.key(0), 1), "n_states"),
        (long_tailed_chain, (jax.random.key(0), 3, -1.0), "exponent"),
    ],
)
def test_bad_chain_raises(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_bad_tokens_and_sizes_raise():
    chain = long_tailed_chain(jax.random.key(0), 3)
    with pytest.raises(ValueError, match="tokens must hold tokens in"):
        sequence_log_prob(chain, jnp.array([[0, 3]]))
    with pytest.raises(TypeError, match="tokens must be an integer"):
        sequence_log_prob(chain, jnp.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="n_sequences"):
        sample_chain(chain, jax.random.key(0), 0, 4)
    with pytest.raises(ValueError, match="length"):
        sample_chain(chain, jax.random.key(0), 2, 0)
    with pytest.raises(ValueError, match="tokens must hold tokens in"):
        transition_counts(jnp.array([[0, 5]]), 3)
