"""The growth-rate unit timed with PyTorch + curvlinops and with the book's JAX code, in one run.

    python -m bookkit.peers.bench --out book/_data/peers.json [--layers 1 2 3 4 5] [--repeats 5]

The unit (Part I, Figure 3): the GPT of the addition task (d_model 128, no LayerNorm, batch 64,
float32 as in the paper) at one embedding scale sigma; 20-probe Hutchinson estimates of the
Frobenius norms of the diagonal W_Q and W_V blocks of H, the GGN and H - GGN of every layer.

- PyTorch + curvlinops: the decoder of :mod:`bookkit.peers.torch_gpt` with the same weights;
  per block, curvlinops' ``HessianLinearOperator`` and ``GGNLinearOperator`` on that block
  (made anew at every sigma, as the input changes), one product of each with the 20 probes,
  ``H_f v = H v - G v``. The timed call includes building the operators.
- Ours: :func:`xfmr.experiments.curvature.gpt_problem` (linear head) and
  :func:`xfmr.experiments.curvature.hutchinson_samples`, one problem per block, as
  ``sigma_sweep(blocks="diagonal")`` runs them, in one jitted function.

Both use the same Rademacher probes (drawn with JAX; the torch copies are made before the
clock starts) and the same weights, so their estimates agree to float32 rounding (the
"agreement" column). Every repeat times both pipelines back to back, alternating which goes
first, at a new sigma; the row keeps the medians. "First call" is the first call of each
pipeline: for ours it includes the jit compilation, for PyTorch its one-off warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from importlib.metadata import version
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import torch

from bookkit.bench.__main__ import cpu_model
from bookkit.peers.curvature import CURVATURES, diagonal_block_norms
from bookkit.peers.torch_gpt import TorchGPT, parameter, to_torch

__all__ = ["setup", "compare", "main"]

D_MODEL, BATCH, N_PROBES = 128, 64, 20
SIGMAS = (1.0, 0.5, 2.0, 0.7, 1.4, 0.3, 3.0)


def setup(n_layers: int, d_model: int = D_MODEL, batch_size: int = BATCH, n_probes: int = N_PROBES,
          seed: int = 1234):
    """``(ours, theirs)``: two functions ``(sigma, key) -> {kind: (2 n_layers,)}`` of the unit.

    ``theirs(sigma, key)`` returns a function to call (the timed part) so that the probes are
    converted to torch before the clock starts.
    """
    from xfmr.experiments.addition import answer_positions, make_batch
    from xfmr.experiments.curvature import cross_entropy_loss, hutchinson_samples
    from xfmr.experiments.sweeps import gpt_problem
    from xfmr.experiments.gpt import GPTConfig, embed, init_params

    dtype = jnp.float32
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=d_model, n_layers=n_layers)
    kp, ke, kx, kb = jax.random.split(jax.random.key(seed), 4)
    params = init_params(kp, cfg, dtype)
    params["embed"] = {"W_E": jax.random.normal(ke, (12, d_model), dtype),
                       "W_pos": jax.random.normal(kx, (18, d_model), dtype)}
    tokens = make_batch(kb, batch_size)
    x_base = embed(params, tokens)
    targets = tokens[:, 12:]
    paths = [("blocks", l, "attn", n) for l in range(n_layers) for n in ("W_Q", "W_V")]
    shapes = [tuple(params["blocks"][p[1]]["attn"][p[3]].shape) for p in paths]

    @jax.jit
    def ours_jit(sigma, key):
        out = {k: [] for k in CURVATURES}
        for i, path in enumerate(paths):
            problem = gpt_problem(params, cfg, sigma * x_base, [path], cross_entropy_loss(targets),
                                  positions=answer_positions(), linear_head=True)
            q = hutchinson_samples(problem, key, n_probes, key_ids=(i,))
            for k in CURVATURES:
                out[k].append(jnp.sqrt(jnp.mean(q[k][0, 0])))
        return {k: jnp.stack(v) for k, v in out.items()}

    def ours(sigma, key):
        return {k: np.asarray(v) for k, v in
                jax.block_until_ready(ours_jit(jnp.asarray(sigma, dtype), key)).items()}

    model = TorchGPT(params, cfg, positions=answer_positions(), dtype=torch.float32)
    weights = [parameter(model, p) for p in paths]
    x_t = to_torch(x_base, torch.float32)
    y_t = torch.tensor(np.array(targets).reshape(-1), dtype=torch.long)
    loss_func = torch.nn.CrossEntropyLoss()

    def theirs(sigma, key):
        probes = [to_torch(jax.random.rademacher(jax.random.fold_in(key, i), (n_probes,) + s,
                                                 dtype=dtype), torch.float32)
                  for i, s in enumerate(shapes)]
        return lambda: diagonal_block_norms(model, loss_func, weights, sigma * x_t, y_t, probes)

    return ours, theirs


def _timed(f):
    """``((wall seconds, CPU seconds of the process), result)``."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = f()
    return (time.perf_counter() - t0, time.process_time() - c0), out


def compare(n_layers: int, repeats: int = 5) -> dict:
    """One row: medians over ``repeats`` alternating calls, first calls, agreement."""
    ours, theirs = setup(n_layers)
    t_ours_first, est = _timed(lambda: ours(SIGMAS[0], jax.random.key(0)))
    t_theirs_first, est_t = _timed(theirs(SIGMAS[0], jax.random.key(0)))
    # largest difference relative to the largest estimate of its kind (some H - GGN blocks are 0)
    agreement = max(float(np.max(np.abs(est_t[k] - est[k])) / np.max(np.abs(est[k])))
                    for k in CURVATURES)
    t_ours, t_theirs = [], []
    for r in range(repeats):
        sigma, key = SIGMAS[(r + 1) % len(SIGMAS)], jax.random.key(r + 1)
        call_theirs = theirs(sigma, key)
        order = ("theirs", "ours") if r % 2 == 0 else ("ours", "theirs")
        for which in order:
            if which == "ours":
                t_ours.append(_timed(lambda: ours(sigma, key))[0])
            else:
                t_theirs.append(_timed(call_theirs)[0])
    (med_ours, cpu_ours), (med_theirs, cpu_theirs) = np.median(t_ours, 0), np.median(t_theirs, 0)
    return {
        "layers": n_layers, "blocks": 2 * n_layers,
        "torch_seconds": float(med_theirs), "ours_seconds": float(med_ours),
        "ratio": float(med_theirs / med_ours),
        "torch_cpu_seconds": float(cpu_theirs), "ours_cpu_seconds": float(cpu_ours),
        "ratio_cpu": float(cpu_theirs / cpu_ours),
        "torch_first": t_theirs_first[0], "ours_first": t_ours_first[0],
        "ratio_first": t_theirs_first[0] / t_ours_first[0],
        "agreement": agreement, "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--conditions", default="",
                        help="how the machine was loaded during the run (stated with the rows)")
    args = parser.parse_args(argv)
    rows = []
    for n_layers in args.layers:
        start = time.perf_counter()
        rows.append(compare(n_layers, args.repeats))
        print(f"bench-peers: {n_layers} layer(s): {rows[-1]} ({time.perf_counter() - start:.0f} s)",
              flush=True)
        _write(args, rows)  # after every depth, so that a cut run keeps its rows
    print(f"bench-peers: wrote {len(rows)} rows to {args.out}")
    return 0


def _write(args, rows) -> None:
    table = {
        "date": date.today().isoformat(),
        "machine": {"cores": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
                    "torch": torch.__version__, "curvlinops": version("curvlinops-for-pytorch"),
                    "jax": jax.__version__, "torch_threads": torch.get_num_threads(),
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "")},
        "conditions": args.conditions,
        "unit": (f"d_model {D_MODEL}, batch {BATCH}, no LayerNorm, float32, one sigma, "
                 f"{N_PROBES}-probe Hutchinson, diagonal W_Q and W_V blocks of H, GGN and "
                 "H - GGN of every layer"),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
