"""Statistics of AVICI's own data generator (the authors' package ``avici``), for Part VI's amortised page.

Runs in a side environment, not the book's (avici pins an older JAX and dm-haiku; see
HISTORY.md beside this file for how it was made)::

    python -m venv /tmp/avici-venv
    /tmp/avici-venv/bin/pip install avici==1.0.7 jax==0.4.35 jaxlib==0.4.35 \
        dm-haiku==0.0.13 CausalDisco==0.2.4
    /tmp/avici-venv/bin/python book/_data/recorded/avici/avici_generator.py

It draws ``COUNT`` observational data sets of ``N`` samples on ER-2 graphs with ``D`` nodes
from avici's ``ErdosRenyi`` and ``LinearAdditive`` (Gaussian noise) in two settings, and writes
per data set the Var- and R^2-sortability (CausalDisco, ties within 1e-9), the number of
edges and the mean log10 variance of the raw columns to ``generator.json`` beside this file:

- ``neurips-linear``: the mechanism of avici's training config ``neurips-linear.yaml``
  (weights +-U[1, 3], biases U[-3, 3], noise scales U[0.2, 2]);
- ``matched``: the book's SCM setting (weights +-U[0.5, 2], no bias, unit noise).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from CausalDisco.analytics import r2_sortability, var_sortability

import avici
from avici.synthetic import ErdosRenyi, Gaussian, LinearAdditive, SignedUniform, Uniform

COUNT, D, N, SEED = 20, 20, 1000, 0
SETTINGS = {
    "neurips-linear": dict(param=SignedUniform(1.0, 3.0), bias=Uniform(-3.0, 3.0),
                           noise=Gaussian(), noise_scale=Uniform(0.2, 2.0)),
    "matched": dict(param=SignedUniform(0.5, 2.0), bias=Uniform(0.0, 0.0),
                    noise=Gaussian(), noise_scale=Uniform(1.0, 1.0)),
}


def stats(rng: np.random.Generator, mechanism: LinearAdditive) -> dict:
    g = ErdosRenyi(2.0)(rng, D)
    x = np.asarray(mechanism(rng, g, N, 0).x_obs)[..., 0]  # (N, D); avici stacks an intervention flag
    return {"var_sortability": float(var_sortability(x, g, tol=1e-9)),
            "r2_sortability": float(r2_sortability(x, g, tol=1e-9)),
            "edges": int(g.sum()), "mean_log10_var": float(np.mean(np.log10(x.var(0))))}


def main() -> None:
    out = {"avici_version": getattr(avici, "__version__", "1.0.7"), "date": time.strftime("%Y-%m-%d"),
           "d": D, "n": N, "count": COUNT, "graph": "ErdosRenyi(edges_per_var=2)", "settings": {}}
    for i, (name, kw) in enumerate(SETTINGS.items()):
        rng = np.random.default_rng(SEED + i)
        rows = [stats(rng, LinearAdditive(**kw)) for _ in range(COUNT)]
        out["settings"][name] = {k: [r[k] for r in rows] for k in rows[0]}
        print(name, {k: round(float(np.mean(v)), 3) for k, v in out["settings"][name].items()})
    Path(__file__).with_name("generator.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
