"""Tests for xfmr.cross_entropy.bigram: chain rule, CE training recovers the MLE, value model, validation."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.cross_entropy import bigram
from xfmr.cross_entropy.divergences import histogram
from xfmr.cross_entropy.sources import long_tailed_chain, sample_chain, sequence_log_prob, transition_counts
from xfmr.core.train import train


def test_model_is_a_distribution_over_sequences():
    params = bigram.init_logit_params(jax.random.key(0), 3, scale=1.0)
    seqs = jnp.array(list(itertools.product(range(3), repeat=4)))
    np.testing.assert_allclose(jnp.exp(bigram.log_prob(params, seqs)).sum(), 1.0, rtol=1e-12)
    # chain rule: equals the log-probability of the equivalent Markov chain
    np.testing.assert_allclose(
        bigram.log_prob(params, seqs), sequence_log_prob(bigram.as_markov_chain(params), seqs), rtol=1e-12
    )
    np.testing.assert_allclose(bigram.next_token_loss(params, seqs), -bigram.log_prob(params, seqs).mean() / 4)


def test_logits_shapes():
    params = bigram.init_logit_params(jax.random.key(0), 5)
    tokens = jnp.array([[0, 4, 2], [1, 1, 3]])
    logits = bigram.next_token_logits(params, tokens)
    assert logits.shape == (2, 3, 5)
    np.testing.assert_array_equal(logits[1, 2], params["transition"][1])
    np.testing.assert_array_equal(logits[0, 0], params["initial"])


def test_ce_training_recovers_transition_histogram():
    chain = long_tailed_chain(jax.random.key(1), 4, exponent=1.0)
    data = sample_chain(chain, jax.random.key(2), 200, 16)
    mle = histogram(transition_counts(data, 4))
    result = train(
        bigram.next_token_loss, bigram.init_logit_params(jax.random.key(3), 4), lambda k: data,
        optax.adam(0.1), 1500, jax.random.key(4),
    )
    np.testing.assert_allclose(bigram.as_markov_chain(result.params).transition, mle, atol=1e-4)


def test_value_model_learns_conditional_mean():
    chain = long_tailed_chain(jax.random.key(1), 4, exponent=1.0)
    data = sample_chain(chain, jax.random.key(2), 200, 16)
    counts = np.asarray(transition_counts(data, 4), float)
    empirical_mean = counts @ np.arange(4) / counts.sum(1)

    def loss(params, tokens):
        return jnp.mean((bigram.next_token_values(params, tokens) - tokens) ** 2)

    result = train(loss, bigram.init_value_params(4), lambda k: data, optax.adam(0.1), 1000, jax.random.key(0))
    np.testing.assert_allclose(result.params["transition"], empirical_mean, atol=1e-4)
    np.testing.assert_allclose(result.params["initial"], data[:, 0].mean(), atol=1e-4)


def test_bad_input_raises_clear_error():
    params = bigram.init_logit_params(jax.random.key(0), 3)
    with pytest.raises(ValueError, match="tokens must hold tokens in"):
        bigram.next_token_logits(params, jnp.array([[0, 3]]))
    with pytest.raises(ValueError, match="params must hold"):
        bigram.next_token_logits({"initial": jnp.zeros(3), "transition": jnp.zeros((3, 2))}, jnp.array([[0]]))
    with pytest.raises(ValueError, match="params must be a dict"):
        bigram.log_prob({"w": 1}, jnp.array([[0]]))
    with pytest.raises(ValueError, match="n_states"):
        bigram.init_logit_params(jax.random.key(0), 1)
    with pytest.raises(ValueError, match="value model"):
        bigram.next_token_values(params, jnp.array([[0]]))
