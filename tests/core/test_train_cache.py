"""xfmr.core.train_cache: a stored run is loaded instead of trained again, and only for equal settings."""

import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.core.train import TrainResult
from xfmr.core.train_cache import cache_path, cached_arrays, cached_training


def test_cached_training_trains_once_per_settings(tmp_path, capsys):
    calls = []

    def train():
        calls.append(1)
        return TrainResult(params={"w": jnp.arange(3.0), "b": [jnp.ones((2, 2), jnp.float32)]},
                           losses=np.array([2.0, 1.0]))

    settings = {"depth": 2, "lr": 0.001, "depths": [2, 3]}
    first = cached_training(tmp_path, "depth2", settings, train)
    again = cached_training(tmp_path, "depth2", dict(reversed(settings.items())), train)
    assert len(calls) == 1 and "loaded depth2" in capsys.readouterr().out
    assert again.params["b"][0].dtype == jnp.float32 and isinstance(again.params["w"], jnp.ndarray)
    np.testing.assert_array_equal(again.params["w"], first.params["w"])
    np.testing.assert_array_equal(again.losses, first.losses)
    cached_training(tmp_path, "depth2", {**settings, "lr": 0.002}, train)  # another setting: trains
    assert len(calls) == 2
    cached_training(None, "depth2", settings, train)                        # no directory: trains
    assert len(calls) == 3
    assert not list(tmp_path.glob("*.tmp"))


def test_cache_rejects_bad_names_and_settings(tmp_path):
    with pytest.raises(ValueError, match="name"):
        cache_path(tmp_path, "a/b", {})
    with pytest.raises(TypeError, match="settings"):
        cache_path(tmp_path, "run", {"f": object()})
    with pytest.raises(TypeError, match="settings"):
        cache_path(tmp_path, "run", [1, 2])


def test_cached_arrays_keep_any_pytree(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"losses": jnp.array([[0.5, 0.25]]), "best": 3}

    first = cached_arrays(tmp_path, "sweep", {"grid": [0.1, 0.3]}, compute)
    again = cached_arrays(tmp_path, "sweep", {"grid": [0.1, 0.3]}, compute)
    assert len(calls) == 1 and isinstance(first["losses"], np.ndarray)
    np.testing.assert_array_equal(again["losses"], [[0.5, 0.25]])
    assert int(again["best"]) == 3
    path = cache_path(tmp_path, "sweep", {"grid": [0.1, 0.3]})
    other = cache_path(tmp_path, "sweep", {"grid": [0.1, 0.2]})
    path.replace(other)  # a file under another run's name (a digest collision) is refused
    with pytest.raises(ValueError, match="other settings"):
        cached_arrays(tmp_path, "sweep", {"grid": [0.1, 0.2]}, compute)
