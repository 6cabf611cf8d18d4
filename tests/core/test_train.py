"""Tests for xfmr.core.train: convergence on a known problem, determinism, chunk invariance, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr.core.train import TrainResult, progress_disabled, train


def _quadratic_problem(dim=3):
    """Stochastic least squares: E_x[(w.x - w*.x)^2] with x ~ N(0, I) is minimised at w*."""
    w_star = jnp.arange(1.0, dim + 1.0)

    def sample_batch(key):
        x = jax.random.normal(key, (16, dim))
        return x, x @ w_star

    def loss_fn(w, batch):
        w = w["w"] if isinstance(w, dict) else w
        x, y = batch
        return jnp.mean((x @ w - y) ** 2)

    return loss_fn, sample_batch, w_star


def test_converges_to_known_minimiser():
    loss_fn, sample_batch, w_star = _quadratic_problem()
    result = train(loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.05), 300, jax.random.key(0))
    assert isinstance(result, TrainResult)
    assert result.losses.shape == (300,)
    assert isinstance(result.losses, np.ndarray)
    np.testing.assert_allclose(result.params, w_star, atol=1e-6)
    assert result.losses[-1] < 1e-10 < result.losses[0]


def test_losses_are_pre_update_losses():
    """losses[t] is the loss at the parameters before step t: losses[0] = L(params0, batch_0)."""
    loss_fn, sample_batch, _ = _quadratic_problem()
    key = jax.random.key(3)
    result = train(loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.05), 2, key)
    first = loss_fn(jnp.zeros(3), sample_batch(jax.random.fold_in(key, 0)))
    np.testing.assert_allclose(result.losses[0], first, rtol=1e-12)


def test_matches_handwritten_sgd_loop():
    loss_fn, sample_batch, _ = _quadratic_problem()
    key = jax.random.PRNGKey(1)  # raw uint32 keys are accepted too
    result = train(loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.1), 7, key)
    w = jnp.zeros(3)
    for t in range(7):
        w = w - 0.1 * jax.grad(loss_fn)(w, sample_batch(jax.random.fold_in(key, t)))
    np.testing.assert_allclose(result.params, w, rtol=1e-12)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(n_steps=st.integers(1, 13), chunk=st.integers(1, 6))
def test_result_independent_of_chunk(n_steps, chunk):
    loss_fn, sample_batch, _ = _quadratic_problem()
    args = (loss_fn, {"w": jnp.zeros(3)}, sample_batch, optax.adam(0.1), n_steps, jax.random.key(2))
    a = train(*args, chunk=chunk)
    b = train(*args, chunk=100)
    assert a.losses.shape == (n_steps,)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-12)
    np.testing.assert_allclose(a.params["w"], b.params["w"], rtol=1e-12)


def test_key_dependent():
    """Another key, other batches: the losses differ (the run's values are checked against a
    hand-written loop in test_matches_handwritten_sgd_loop)."""
    loss_fn, sample_batch, _ = _quadratic_problem()
    run = lambda seed: train(loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.01), 5, jax.random.key(seed))
    assert not np.allclose(run(0).losses, run(1).losses)


def test_preserves_float32():
    loss_fn, sample_batch, _ = _quadratic_problem()
    params = {"w": jnp.zeros(3, jnp.float32)}
    f32_batch = lambda k: jax.tree.map(lambda a: a.astype(jnp.float32), sample_batch(k))
    result = train(loss_fn, params, f32_batch, optax.adam(0.1), 4, jax.random.key(0))
    assert result.params["w"].dtype == jnp.float32
    assert result.losses.dtype == np.float32


def test_progress_disabled_reads_env(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress_disabled()
    monkeypatch.setenv("TQDM_DISABLE", "0")
    assert not progress_disabled()
    monkeypatch.delenv("TQDM_DISABLE")
    assert not progress_disabled()


def test_progress_bar_silent_when_disabled(monkeypatch, capsys):
    loss_fn, sample_batch, _ = _quadratic_problem()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    train(loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.01), 3, jax.random.key(0), desc="quiet")
    captured = capsys.readouterr()
    assert "quiet" not in captured.err + captured.out
    monkeypatch.setenv("TQDM_DISABLE", "0")
    train(loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.01), 3, jax.random.key(0), desc="loud")
    assert "loud" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_steps": 0}, ValueError, "n_steps"),
        ({"n_steps": -3}, ValueError, "n_steps"),
        ({"n_steps": 2.0}, TypeError, "n_steps"),
        ({"chunk": 0}, ValueError, "chunk"),
        ({"key": 0}, ValueError, "key"),
        ({"key": jnp.zeros(3, jnp.uint32)}, ValueError, "key"),
        ({"optimizer": "adam"}, TypeError, "optimizer"),
        ({"loss_fn": 1.0}, TypeError, "loss_fn"),
        ({"sample_batch": None}, TypeError, "sample_batch"),
        ({"loss_fn": lambda w, b: (b[0] @ w - b[1]) ** 2}, ValueError, "loss_fn must return a scalar"),
    ],
)
def test_bad_input_raises_clear_error(kwargs, error, match):
    loss_fn, sample_batch, _ = _quadratic_problem()
    args = dict(
        loss_fn=loss_fn, params=jnp.zeros(3), sample_batch=sample_batch,
        optimizer=optax.sgd(0.1), n_steps=3, key=jax.random.key(0),
    )
    args.update(kwargs)
    chunk = args.pop("chunk", 100)
    with pytest.raises(error, match=match):
        train(**args, chunk=chunk)


def test_checkpoints_are_the_states_of_shorter_runs():
    """Snapshot at step t = (params, opt_state) of a t-step run; chunk-independent; the
    final opt_state is returned."""
    loss_fn, sample_batch, _ = _quadratic_problem()
    opt = optax.adam(0.05)
    key = jax.random.key(5)
    res = train(loss_fn, {"w": jnp.zeros(3)}, sample_batch, opt, 9, key, chunk=4,
                checkpoints=[9, 0, 3, 3])
    assert [s.step for s in res.snapshots] == [0, 3, 9]
    np.testing.assert_array_equal(res.snapshots[0].params["w"], jnp.zeros(3))
    assert int(res.snapshots[0].opt_state[0].count) == 0
    short = train(loss_fn, {"w": jnp.zeros(3)}, sample_batch, opt, 3, key, chunk=100)
    np.testing.assert_allclose(res.snapshots[1].params["w"], short.params["w"], rtol=1e-12)
    np.testing.assert_allclose(res.snapshots[1].opt_state[0].nu["w"], short.opt_state[0].nu["w"],
                               rtol=1e-12)
    np.testing.assert_allclose(res.snapshots[2].params["w"], res.params["w"], rtol=0)
    assert int(res.opt_state[0].count) == 9
    plain = train(loss_fn, {"w": jnp.zeros(3)}, sample_batch, opt, 9, key, chunk=2)
    np.testing.assert_allclose(plain.losses, res.losses, rtol=1e-12)
    assert plain.snapshots == ()


def test_checkpoint_errors():
    loss_fn, sample_batch, _ = _quadratic_problem()
    args = (loss_fn, jnp.zeros(3), sample_batch, optax.sgd(0.1), 4, jax.random.key(0))
    with pytest.raises(ValueError, match="checkpoints"):
        train(*args, checkpoints=[5])
    with pytest.raises(TypeError, match="checkpoints"):
        train(*args, checkpoints=[1.5])
    with pytest.raises(TypeError, match="checkpoints"):
        train(*args, checkpoints=3)
