"""Tests for xfmr.core.ensemble: K stacked models trained at once are K independent runs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xfmr.core.ensemble import init_models, per_model, split_batches, stack, train_models, unstack
from xfmr.core.train import train

W_STAR = jnp.array([1.0, -2.0, 0.5])


def sample_batch(key):
    """One model's batch: 8 inputs x ~ N(0, I) and targets x . w*."""
    x = jax.random.normal(key, (8, 3))
    return x, x @ W_STAR


def loss_fn(params, batch):
    x, y = batch
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def init_params(key):
    return {"w": jax.random.normal(key, (3,)), "b": jnp.zeros(())}


def test_seeded_models_are_independent_runs():
    """Model m starts from init_params(split(k_init, K)[m]) and sees its share
    split(key_t, K)[m] of every step's key (Adam: per-parameter state, so no coupling)."""
    opt, key, K = optax.adam(0.05), jax.random.key(7), 3
    k_init, k_train = jax.random.split(key)
    ens = train_models(loss_fn, init_models(init_params, k_init, K), split_batches(sample_batch, K),
                       opt, 30, k_train, chunk=16)
    assert ens.params["w"].shape == (K, 3) and ens.losses.shape == (30,)
    singles = []
    for m in range(K):
        one = train(loss_fn, init_params(jax.random.split(k_init, K)[m]),
                    lambda k, m=m: sample_batch(jax.random.split(k, K)[m]), opt, 30, k_train)
        for a, b in zip(jax.tree_util.tree_leaves(unstack(ens.params)[m]), jax.tree_util.tree_leaves(one.params)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        singles.append(one.losses)
    np.testing.assert_allclose(ens.losses, np.sum(singles, axis=0), rtol=1e-10)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(arrays=st.lists(hnp.arrays(np.float64, (2, 3), elements=st.floats(-5, 5)), min_size=1, max_size=4),
       scalars=st.lists(st.floats(-5, 5), min_size=4, max_size=4))
def test_stack_unstack_and_per_model_shapes(arrays, scalars):
    trees = [{"a": a, "s": np.float64(c)} for a, c in zip(arrays, scalars)]
    st_ = stack(trees)
    assert st_["a"].shape == (len(trees), 2, 3) and st_["s"].shape == (len(trees),)
    for tree, back in zip(trees, unstack(st_)):
        np.testing.assert_array_equal(back["a"], tree["a"])
        np.testing.assert_array_equal(back["s"], tree["s"])
    c = per_model(np.asarray(scalars[: len(trees)]), st_)
    assert c["a"].shape == (len(trees), 1, 1) and c["s"].shape == (len(trees),)
    np.testing.assert_array_equal(c["a"][:, 0, 0], scalars[: len(trees)])


def test_bad_input_raises_clear_error():
    params = init_models(init_params, jax.random.key(0), 2)
    with pytest.raises(ValueError, match="n_models"):
        init_models(init_params, jax.random.key(0), 0)
    with pytest.raises(TypeError, match="init_params"):
        init_models(None, jax.random.key(0), 2)
    with pytest.raises(TypeError, match="sample_batch"):
        split_batches("batch", 2)
    with pytest.raises(ValueError, match="leading sizes"):   # 3 batches for 2 models
        train_models(loss_fn, params, split_batches(sample_batch, 3), optax.sgd(0.1), 2, jax.random.key(0))
    with pytest.raises(ValueError, match="leading axis"):
        train_models(loss_fn, {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}, split_batches(sample_batch, 2),
                     optax.sgd(0.1), 2, jax.random.key(0))
    with pytest.raises(TypeError, match="loss_fn"):
        train_models(None, params, split_batches(sample_batch, 2), optax.sgd(0.1), 2, jax.random.key(0))
    with pytest.raises(ValueError, match="at least one"):
        stack([])
