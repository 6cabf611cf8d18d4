"""Keep a long run's results (a trained model's parameters and losses, or any arrays) on
disk, so that a page whose later assertion fails can be rerun without training again.

A run is named by the settings that determine it (``settings``: a flat mapping of
JSON-serialisable values, e.g. the page's sizes, seed and budget); its file is
``directory / f"{name}-{digest}.pkl"`` with ``digest`` the SHA-256 of the sorted settings.
The settings are stored beside the results and compared on load, so a changed setting
trains again. The cache knows nothing about the code: after changing the model or the
training loop, use a fresh directory (``make clean`` removes ``_build/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.core.train import TrainResult
from xfmr.core.validate import check_instance


def cache_path(directory: str | os.PathLike, name: str, settings: Mapping[str, Any]) -> Path:
    """The file that holds the run ``name`` with these ``settings``."""
    check_instance(name, "name", str)
    if not name or any(c in name for c in "/\\"):
        raise ValueError(f"name must be a non-empty file-name part without slashes, got {name!r}")
    check_instance(settings, "settings", Mapping)
    try:
        text = json.dumps(dict(settings), sort_keys=True)
    except TypeError as e:
        raise TypeError(f"settings must hold JSON-serialisable values only: {e}") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Path(directory) / f"{name}-{digest}.pkl"


def cached_arrays(
    directory: str | os.PathLike | None,
    name: str,
    settings: Mapping[str, Any],
    compute: Callable[[], Any],
) -> Any:
    """``compute()`` (a pytree of arrays), or its value as stored by an earlier call.

    With ``directory`` None this is ``compute()``. Otherwise a stored value with equal
    ``settings`` is loaded (numpy arrays of the stored dtypes); else ``compute()`` runs and its
    value, converted to numpy, is written atomically and returned.
    """
    if directory is None:
        return compute()
    path = cache_path(directory, name, settings)
    wanted = json.loads(json.dumps(dict(settings)))
    if path.exists():
        with path.open("rb") as f:
            stored = pickle.load(f)
        if stored["settings"] != wanted:
            raise ValueError(f"{path} holds a run with other settings: {stored['settings']} (wanted {wanted})")
        print(f"loaded {name} from {path}")
        return stored["value"]
    value = jax.tree.map(np.asarray, compute())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump({"settings": wanted, "value": value}, f)
    tmp.replace(path)
    return value


def cached_training(
    directory: str | os.PathLike | None,
    name: str,
    settings: Mapping[str, Any],
    train: Callable[[], TrainResult],
) -> TrainResult:
    """``train()``, or its parameters and losses as stored by an earlier call
    (:func:`cached_arrays`; parameters come back as jax arrays of the stored dtypes).

    A loaded or stored run has ``opt_state`` None and no snapshots: only what a finished run
    is evaluated on. With ``directory`` None this is ``train()`` itself.
    """
    if directory is None:
        return train()
    stored = cached_arrays(directory, name, settings, lambda: train()[:2])
    params, losses = stored
    return TrainResult(params=jax.tree.map(jnp.asarray, params), losses=losses)
