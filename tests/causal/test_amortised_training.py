"""xfmr.causal.amortised_training: the loss on known logits, training that learns, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.causal import amortised as am
from xfmr.causal import amortised_training as at
from xfmr.causal.amortised_data import sample_graphs_and_data

CFG = am.Config(d_max=4, width=8, n_layers=1, n_heads=2)


def test_loss_is_log_two_for_zero_logits_and_skips_the_diagonal():
    params = am.init_params(jax.random.PRNGKey(0), CFG)
    params = jax.tree_util.tree_map(jnp.zeros_like, params)          # every logit 0
    Xs, As = sample_graphs_and_data(jax.random.PRNGKey(1), 3, 4, 6)
    assert float(at.edge_bce_loss(params, (Xs, As), CFG)) == pytest.approx(np.log(2.0), rel=1e-6)
    params["bias"] = jnp.asarray(3.0, jnp.float32)                   # every logit 3: edges cheap, non-edges dear
    As_np = np.asarray(As)
    share = As_np.sum() / (3 * 4 * 3)                                # edges among the off-diagonal entries
    expected = share * np.log1p(np.exp(-3.0)) + (1 - share) * np.log1p(np.exp(3.0))
    assert float(at.edge_bce_loss(params, (Xs, As), CFG)) == pytest.approx(expected, rel=1e-5)


def test_training_learns_the_edges():
    params, res = at.train_per_kind(jax.random.PRNGKey(0), CFG, ("scm",), n_steps=60, batch_size=8, n=20,
                                    learning_rate=1e-2, chunk=60)
    assert res.losses.shape == (60,) and set(params) == {"scm"}
    assert res.losses[-20:].mean() < res.losses[:10].mean() - 0.03
    # on fresh SCM data the trained model beats its initialisation
    batch = sample_graphs_and_data(jax.random.PRNGKey(9), 64, 4, 20)
    init = am.init_params(jax.random.split(jax.random.split(jax.random.PRNGKey(0))[0], 1)[0], CFG)
    assert float(at.edge_bce_loss(params["scm"], batch, CFG)) < float(at.edge_bce_loss(init, batch, CFG)) - 0.03


def test_errors():
    with pytest.raises(ValueError, match="kinds must be a non-empty tuple of distinct"):
        at.train_per_kind(jax.random.PRNGKey(0), CFG, ("scm", "scm"), n_steps=1, batch_size=1, n=5)
    with pytest.raises(TypeError, match="^kinds must be a tuple"):
        at.train_per_kind(jax.random.PRNGKey(0), CFG, "scm", n_steps=1, batch_size=1, n=5)
    with pytest.raises(ValueError, match="kind"):
        at.train_per_kind(jax.random.PRNGKey(0), CFG, ("gaussian",), n_steps=1, batch_size=1, n=5)
    with pytest.raises(ValueError, match="^n must be"):
        at.train_per_kind(jax.random.PRNGKey(0), CFG, ("scm",), n_steps=1, batch_size=1, n=1)
    with pytest.raises(TypeError, match="^config must be a Config"):
        at.train_per_kind(jax.random.PRNGKey(0), {"d_max": 4}, ("scm",), n_steps=1, batch_size=1, n=5)
