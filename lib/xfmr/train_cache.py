"""Keep a long training run's parameters and losses on disk, so that a page whose later
assertion fails can be rerun without training again.

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

from xfmr.train import TrainResult


def cache_path(directory: str | os.PathLike, name: str, settings: Mapping[str, Any]) -> Path:
    """The file that holds the run ``name`` with these ``settings``."""
    if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
        raise ValueError(f"name must be a non-empty file-name part without slashes, got {name!r}")
    if not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a mapping of JSON-serialisable values, got {type(settings).__name__}")
    try:
        text = json.dumps(dict(settings), sort_keys=True)
    except TypeError as e:
        raise TypeError(f"settings must hold JSON-serialisable values only: {e}") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Path(directory) / f"{name}-{digest}.pkl"


def cached_training(
    directory: str | os.PathLike | None,
    name: str,
    settings: Mapping[str, Any],
    train: Callable[[], TrainResult],
) -> TrainResult:
    """``train()``, or its parameters and losses as stored by an earlier call.

    With ``directory`` None this is ``train()``. Otherwise a stored run with equal
    ``settings`` is loaded (parameters as jax arrays of the stored dtypes, losses as numpy);
    else ``train()`` runs and its parameters and losses are written atomically. A loaded run
    has ``opt_state`` None and no snapshots: only what a finished run is evaluated on.
    """
    if directory is None:
        return train()
    path = cache_path(directory, name, settings)
    if path.exists():
        with path.open("rb") as f:
            stored = pickle.load(f)
        if stored["settings"] != json.loads(json.dumps(dict(settings))):
            raise ValueError(f"{path} holds a run with other settings: {stored['settings']} (wanted {dict(settings)})")
        print(f"loaded the trained run {name} from {path}")
        return TrainResult(params=jax.tree.map(jnp.asarray, stored["params"]), losses=stored["losses"],
                           opt_state=None, snapshots=())
    result = train()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump({"settings": json.loads(json.dumps(dict(settings))),
                     "params": jax.tree.map(np.asarray, result.params),
                     "losses": np.asarray(result.losses)}, f)
    tmp.replace(path)
    return result
