"""Tests of xfmr.optimisers.warmup: the factor's values, per-model warmup in an ensemble
against optax's own linear schedule, and error paths."""

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.optimisers.warmup import scale_by_warmup, warmup_factor


def test_factor_values():
    np.testing.assert_allclose(warmup_factor(0, 4), 0.25)
    np.testing.assert_allclose(warmup_factor(3, 4), 1.0)
    np.testing.assert_allclose(warmup_factor(10, 4), 1.0)
    np.testing.assert_allclose(warmup_factor(0, 0), 1.0)
    np.testing.assert_allclose(warmup_factor(1, jnp.array([0, 2, 4])), [1.0, 1.0, 0.5])


def test_per_model_warmup_matches_optax_schedule():
    """Model 0 without warmup, model 1 with 5 steps: each equals its own optax run."""
    lr = 0.1
    opt = optax.chain(optax.sgd(1.0), scale_by_warmup(jnp.array([0, 5])), optax.scale(lr))
    sched = optax.chain(optax.sgd(optax.linear_schedule(lr / 5, lr, 4)))
    p = {"a": jnp.zeros((2, 3))}
    s, s1 = opt.init(p), sched.init({"a": jnp.zeros(3)})
    for t in range(7):
        g = {"a": jnp.ones((2, 3)) * (t + 1)}
        u, s = opt.update(g, s, p)
        u1, s1 = sched.update({"a": g["a"][1]}, s1)
        np.testing.assert_allclose(u["a"][0], -lr * g["a"][0], rtol=1e-6)
        np.testing.assert_allclose(u["a"][1], u1["a"], rtol=1e-6)
    # the warmup changed the first step (the test can fail)
    assert not np.allclose(float(u1["a"][0]), 0) and t == 6


def test_errors():
    with pytest.raises(ValueError, match="warmup_steps"):
        scale_by_warmup(-1)
    with pytest.raises(ValueError, match="warmup_steps"):
        scale_by_warmup(2.5)
    opt = scale_by_warmup(jnp.array([1, 2, 3]))
    with pytest.raises(ValueError, match="3 entries"):
        opt.update({"a": jnp.ones((2, 4))}, opt.init(None))


def test_sharpness_matches_dense_eigvalsh_and_stacks():
    import jax

    from xfmr.core.ensemble import stack
    from xfmr.optimisers.warmup import sharpness

    jax.config.update("jax_enable_x64", True)
    batch = jax.random.normal(jax.random.key(3), (8, 3))

    def loss(p, x):
        return jnp.mean(jnp.tanh(x @ p["w"]) @ p["v"]) ** 2 + jnp.sum(p["v"] ** 4)

    ps = [{"w": jax.random.normal(jax.random.key(s), (3, 2)),
           "v": jax.random.normal(jax.random.key(10 + s), (2,))} for s in range(2)]
    for p in ps:
        flat, unravel = jax.flatten_util.ravel_pytree(p)
        H = jax.hessian(lambda f: loss(unravel(f), batch))(flat.astype(jnp.float64))
        top = np.linalg.eigvalsh(np.asarray(H))[-1]
        np.testing.assert_allclose(float(sharpness(loss, p, batch, jax.random.key(0), 8)),
                                   top, rtol=1e-8)
    both = sharpness(loss, stack(ps), batch, jax.random.key(0), 8, batch_dims=1)
    assert both.shape == (2,) and not np.isclose(both[0], both[1])
