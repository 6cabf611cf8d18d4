"""gCastle's linear NOTEARS on one data set, the reference for Part VI's benchmark page.

The book's environment does not hold gCastle (it needs PyTorch); this script runs in a side
environment with ``gcastle==1.0.4`` and a CPU PyTorch::

    /tmp/avici-venv/bin/pip install gcastle==1.0.4
    /tmp/avici-venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    /tmp/avici-venv/bin/python book/_data/recorded/gcastle/notears_gcastle.py DATA.npz

``DATA.npz`` holds ``X`` (n, d), written by the benchmark page's generator (its docstring
cell says which graph and key); the script writes gCastle's weighted estimate to
``notears_gcastle.json`` beside itself.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import castle
import numpy as np
from castle.algorithms import Notears


def main(path: str) -> None:
    X = np.load(path)["X"]
    model = Notears(lambda1=0.1, loss_type="l2", w_threshold=0.3)
    t0 = time.perf_counter()
    model.learn(X)
    seconds = time.perf_counter() - t0
    W = np.asarray(model.weight_causal_matrix, dtype=float)
    out = {"gcastle_version": getattr(castle, "__version__", "1.0.4"), "date": time.strftime("%Y-%m-%d"),
           "lambda1": 0.1, "w_threshold": 0.3, "n": int(X.shape[0]), "d": int(X.shape[1]),
           "seconds": round(seconds, 1), "W": W.round(6).tolist()}
    Path(__file__).with_name("notears_gcastle.json").write_text(json.dumps(out) + "\n")
    print(f"gCastle NOTEARS: {int((W != 0).sum())} edges in {seconds:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1])
