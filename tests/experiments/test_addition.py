"""Tests of the digit-addition task."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr.experiments.addition import (EQUALS, PLUS, answer_loss, answer_positions, decode_numbers,
                           make_batch, seq_len)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), n_digits=st.sampled_from([1, 5, 8]),  # few shapes: each compiles
       enrich_prob=st.sampled_from([0.0, 0.2, 1.0]))
def test_answers_are_right(seed, n_digits, enrich_prob):
    t = make_batch(jax.random.key(seed), 16, n_digits, enrich_prob=enrich_prob)
    assert t.shape == (16, seq_len(n_digits)) and t.dtype == jnp.int32
    x, y, z = decode_numbers(t, n_digits)
    np.testing.assert_array_equal(np.asarray(x + y), np.asarray(z))
    assert np.all(np.asarray(t[:, n_digits]) == PLUS)
    assert np.all(np.asarray(t[:, 2 * n_digits + 1]) == EQUALS)
    assert int(t.max()) <= 11 and int(t.min()) >= 0


def test_paper_shape_and_positions():
    t = make_batch(jax.random.key(0), 64)
    assert t.shape == (64, 18)
    np.testing.assert_array_equal(np.asarray(answer_positions()), np.arange(11, 17))
    # the first answer digit (a carry) is 0 or 1
    assert set(np.unique(np.asarray(t[:, 12]))) <= {0, 1}


def test_batch_depends_on_the_key_and_dtype_not_on_the_x64_flag():
    """int32 draws are the same with jax_enable_x64 on (the tests' setting) and off; int64
    draws (the pages') are other batches, and need the flag."""
    on = np.asarray(make_batch(jax.random.key(5), 8))
    with jax.enable_x64(False):
        off = np.asarray(make_batch(jax.random.key(5), 8))
        with pytest.raises(ValueError, match="jax_enable_x64"):
            make_batch(jax.random.key(5), 8, dtype=jnp.int64)
    np.testing.assert_array_equal(on, off)
    wide = np.asarray(make_batch(jax.random.key(5), 8, dtype=jnp.int64))
    assert wide.dtype == np.int32 and (wide != on).any()
    x, y, z = decode_numbers(wide, dtype=jnp.int64)
    assert x.dtype == jnp.int64
    np.testing.assert_array_equal(np.asarray(x + y), np.asarray(z))
    with pytest.raises(ValueError, match="dtype"):
        make_batch(jax.random.key(5), 8, dtype=jnp.float32)
    with pytest.raises(ValueError, match="n_digits must be <= 8 with dtype int32"):
        make_batch(jax.random.key(5), 8, 9)
    nine = np.asarray(make_batch(jax.random.key(5), 8, 9, dtype=jnp.int64))
    x, y, z = decode_numbers(nine, 9, dtype=jnp.int64)
    np.testing.assert_array_equal(np.asarray(x + y), np.asarray(z))


def test_enrichment_rate():
    # Enriched batch: P(x_i + y_i = 9) = f + (1 - f) / 10 = 0.28 for f = 0.2.
    t = make_batch(jax.random.key(1), 20_000, enrich_prob=1.0, enrich_frac=0.2)
    pair9 = np.asarray(t[:, :5] + t[:, 6:11] == 9).mean()
    assert abs(pair9 - 0.28) < 0.005
    t0 = make_batch(jax.random.key(1), 20_000, enrich_prob=0.0)
    assert abs(np.asarray(t0[:, :5] + t0[:, 6:11] == 9).mean() - 0.10) < 0.005
    # about 1 batch in 5 is enriched
    batches = [np.asarray(make_batch(jax.random.key(k), 1000)) for k in range(150)]
    rates = np.array([(t[:, :5] + t[:, 6:11] == 9).mean() for t in batches])
    frac_enriched = np.mean(rates > 0.19)
    assert 0.12 < frac_enriched < 0.28


def test_answer_loss_uniform_and_perfect():
    t = make_batch(jax.random.key(2), 4)
    uniform = jnp.zeros((4, 18, 12))
    assert abs(float(answer_loss(uniform, t)) - np.log(12)) < 1e-12
    perfect = 50.0 * jax.nn.one_hot(jnp.roll(t, -1, axis=1), 12)  # position p predicts p+1
    assert float(answer_loss(perfect, t)) < 1e-15
    assert float(answer_loss(perfect[:, 11:17], t)) < 1e-15


def test_bad_input_raises():
    with pytest.raises(ValueError, match="batch_size"):
        make_batch(jax.random.key(0), 0)
    with pytest.raises(ValueError, match="n_digits"):
        make_batch(jax.random.key(0), 2, 0)
    with pytest.raises(ValueError, match="enrich_frac"):
        make_batch(jax.random.key(0), 2, enrich_frac=1.5)
    with pytest.raises(ValueError, match="logits"):
        answer_loss(jnp.zeros((2, 5, 12)), make_batch(jax.random.key(0), 2))
    with pytest.raises(TypeError, match="batch_size"):
        make_batch(jax.random.key(0), 2.0)
    with pytest.raises(TypeError, match="n_digits"):
        make_batch(jax.random.key(0), 2, True)
    assert make_batch(jax.random.key(0), np.int64(3), np.int32(2)).shape == (3, 9)  # NumPy ints
