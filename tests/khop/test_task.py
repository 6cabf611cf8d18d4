"""Tests for xfmr.khop.task: the K-hop task (reference implementation, data) and the explicit
log-depth transformer that computes it."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xfmr.khop import task, construction
from xfmr.khop.task import BOTTOM, NULL


def brute_find(x):
    """find(p) = 1 + max{j < p : x_j = x_p}, straight from the definition."""
    out = []
    for p in range(len(x)):
        js = [j for j in range(p) if x[j] == x[p]]
        out.append(js[-1] + 1 if js else NULL)
    return out


def brute_hop(x, k):
    f = brute_find(x)
    out = []
    for i in range(len(x)):
        p = i
        for _ in range(k):
            p = f[p] if p != NULL else NULL
        out.append(x[p] if p != NULL else BOTTOM)
    return out


EXAMPLE = "baebcabebdea"


def encode(s):
    return jnp.array(["abcde".index(c) for c in s], dtype=jnp.int32)


# ----------------------------------------------------------------------------- the task
def test_reference_example_and_trap():
    x = encode(EXAMPLE)
    assert task.find(x).tolist() == [-1, -1, -1, 1, -1, 2, 4, 3, 7, -1, 8, 6]
    last = [int(task.hop(x, k)[-1]) for k in range(5)]
    assert last == [0, 1, 2, BOTTOM, BOTTOM]  # a, b, c, bottom, bottom
    # the "search before i" reading gives d at k = 2: a different function
    assert int(task.hop_before_i(x, 2)[-1]) == 3
    assert int(task.hop_before_i(x, 1)[-1]) == last[1]


def brute_find_power(x, e):
    f = brute_find(x)
    out = []
    for p in range(len(x)):
        for _ in range(e):
            p = f[p] if p != NULL else NULL
        out.append(p)
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.integers(0, 7))
def test_hop_matches_definition(xs, k):
    x = jnp.array(xs, dtype=jnp.int32)
    assert task.find(x).tolist() == brute_find(xs)
    assert task.find_power(x, k).tolist() == brute_find_power(xs, k)
    assert task.hop(x, k).tolist() == brute_hop(xs, k)


def test_hop_zero_is_identity_and_batch_is_rowwise():
    x = task.sample_khop_sequences(jax.random.PRNGKey(3), 5, 40, 3)
    assert (task.hop(x, 0) == x).all()
    for k in (1, 2, 5):
        batched = task.hop(x, k)
        assert batched.shape == x.shape and batched.dtype == x.dtype
        for b in range(5):
            assert batched[b].tolist() == brute_hop(x[b].tolist(), k)


def test_hop_all_stacks_hops_and_works_under_jit():
    x = task.sample_khop_sequences(jax.random.PRNGKey(4), 6, 30, 3)
    stacked = task.hop_all(x, 5)
    traced = jax.jit(lambda t: task.hop_all(t, 5))(x[:1])  # traced tokens pass the checks
    assert stacked.shape == (6,) + x.shape
    for k in range(6):
        assert (stacked[k] == task.hop(x, k)).all()
        assert traced[k, 0].tolist() == brute_hop(x[0].tolist(), k)
    with pytest.raises(ValueError, match="k_max"):
        task.hop_all(x, -2)


def test_sample_sequences_distribution():
    S = 4
    x = np.asarray(task.sample_khop_sequences(jax.random.PRNGKey(1), 400, 50, S))
    assert x.shape == (400, 50) and x.dtype == np.int32
    assert x.min() >= 0 and x.max() < S
    assert not (x[:, 1:] == x[:, :-1]).any()
    freq = np.bincount(x.ravel(), minlength=S) / x.size
    assert np.abs(freq - 1 / S).max() < 0.01
    # next token uniform over the S - 1 others
    step = (x[:, 1:] - x[:, :-1]) % S
    fstep = np.bincount(step.ravel(), minlength=S)[1:] / step.size
    assert np.abs(fstep - 1 / (S - 1)).max() < 0.01


def test_bad_input_raises_clear_errors():
    x = encode(EXAMPLE)
    with pytest.raises(ValueError, match="k must be"):
        task.hop(x, -1)
    with pytest.raises(TypeError, match="k must be"):
        task.hop(x, 1.5)
    with pytest.raises(TypeError, match="x must be an integer array"):
        task.hop(jnp.ones(4), 1)
    with pytest.raises(ValueError, match="x must be 1-D"):
        task.find(jnp.zeros((2, 2, 2), jnp.int32))
    with pytest.raises(ValueError, match="x must hold tokens >= 0"):
        task.find(jnp.array([0, -1, 2]))
    with pytest.raises(ValueError, match="alphabet_size"):
        task.sample_khop_sequences(jax.random.PRNGKey(0), 2, 5, 1)
    with pytest.raises(ValueError, match="k must be"):
        construction.build_construction(-1, 4, 10)
    model = construction.build_construction(2, 4, 10)
    with pytest.raises(ValueError, match=r"x must hold tokens in \[0, 4\)"):
        model(jnp.array([0, 1, 4]))
    with pytest.raises(ValueError, match="max_len"):
        model(jnp.zeros(11, jnp.int32))
    with pytest.raises(ValueError, match="max_len"):
        construction.build_construction(2, 4, 10_000, dtype=jnp.float32)
    with pytest.raises(ValueError, match="dtype"):
        construction.build_construction(2, 4, 10, dtype=jnp.int32)
    with pytest.raises(ValueError, match="margin"):
        construction.build_construction(2, 4, 10, margin=0.0)
    with pytest.raises(TypeError, match="margin"):
        construction.build_construction(2, 4, 10, margin="wide")
    with pytest.raises(ValueError, match="e must be"):
        task.find_power(x, -1)
    with pytest.raises(TypeError, match="max_len"):
        construction.build_construction(2, 4, 10.0)


# ----------------------------------------------------------------------------- construction
def test_layer_count_and_shapes():
    for k in range(0, 40):
        model = construction.build_construction(k, 4, 20)
        expected = 0 if k == 0 else 2 + int(math.floor(math.log2(k)))
        assert model.n_layers == expected
        assert model.strict == ((True,) + (False,) * (expected - 1) if k else ())
        for layer in model.layers:  # one head, constant width
            assert layer["wq"].shape[0] == layer["wk"].shape[0] == construction.WIDTH
            assert layer["wq"].shape[1] == layer["wk"].shape[1]
            assert layer["wo"].shape[1] == layer["w2"].shape[1] == construction.WIDTH
            assert layer["w1"].shape == (construction.WIDTH, 24)


@pytest.mark.parametrize("alphabet_size", [2, 4, 7])
def test_construction_exact_on_random_sequences(alphabet_size):
    key = jax.random.PRNGKey(alphabet_size)
    k1, k2 = jax.random.split(key)
    # paper's data (no equal neighbours) and unconstrained uniform tokens (fixed points of find)
    xs = jnp.concatenate([
        task.sample_khop_sequences(k1, 32, 48, alphabet_size),
        jax.random.randint(k2, (32, 48), 0, alphabet_size, dtype=jnp.int32),
    ])
    for k in (0, 1, 2, 3, 5, 6, 8, 11, 16):
        dtypes = (jnp.float32, jnp.float64) if alphabet_size == 4 else (jnp.float64,)
        for dtype in dtypes:
            model = construction.build_construction(k, alphabet_size, 48, dtype=dtype)
            assert (model(xs) == task.hop(xs, k)).all(), (k, dtype)


def test_construction_on_example_and_prefixes():
    x = encode(EXAMPLE)
    for k in range(0, 9):
        model = construction.build_construction(k, 5, 12)
        y = model(x)
        assert (y == task.hop(x, k)).all()
        if k in (1, 3, 6):  # causal: a prefix's output is the prefix of the output
            assert (model(x[:7]) == y[:7]).all()


def test_pointer_doubling_invariant_and_attention():
    x = task.sample_khop_sequences(jax.random.PRNGKey(7), 1, 64, 4)[0]
    k = 13
    model = construction.build_construction(k, 4, 64)
    logits, attn, states = model.forward(x, return_attention=True, return_states=True)
    assert attn.shape == (model.n_layers, 65, 65) and states.shape == (model.n_layers + 1, 65, construction.WIDTH)
    assert np.allclose(attn.sum(-1), 1.0)
    f = np.asarray(task.find(x))

    def find_pow(e):
        p = np.arange(64)
        for _ in range(e):
            p = np.where(p >= 0, f[np.maximum(p, 0)], NULL)
        return p

    for layer in range(1, model.n_layers + 1):
        assert (np.asarray(model.decode_pointer(states[layer])) == find_pow(2 ** (layer - 1))).all()
    # layer 1 attends (one-hot) to the previous occurrence, or the start token if none
    a1 = np.asarray(attn[0, 1:])
    target = np.where(f >= 0, f - 1 + 1, 0)  # model position of j* = find - 1 is find; sink is 0
    assert (a1.argmax(-1) == target).all() and a1.max(-1).min() > 0.999


def test_construction_does_not_call_the_reference(monkeypatch):
    x = task.sample_khop_sequences(jax.random.PRNGKey(9), 8, 30, 4)
    expected = task.hop(x, 6)
    model = construction.build_construction(6, 4, 30)

    def boom(*args, **kwargs):
        raise AssertionError("the construction must not call the reference")

    monkeypatch.setattr(task, "_hop", boom)
    monkeypatch.setattr(task, "_find", boom)
    monkeypatch.setattr(task, "hop", boom)
    monkeypatch.setattr(task, "find", boom)
    monkeypatch.setattr(task, "_find_power", boom)
    monkeypatch.setattr(task, "find_power", boom)
    assert (model(x) == expected).all()
