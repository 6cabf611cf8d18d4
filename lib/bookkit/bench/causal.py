"""Benchmarks of Part VI (standardized causal models): :mod:`xfmr.causal.scm`, :mod:`xfmr.causal.sortability`.

Every measurement (a ``measure_*`` function) runs in a fresh Python process
(:func:`bookkit.bench.isolated.run_isolated`, float64 JAX on the CPU); ``peak_mib`` is that
process's peak resident set size (:func:`bookkit.bench.isolated.peak_mib`), JAX runtime included.

- :func:`population_covariance_large`: the iSCM population correlation at d = 1000 (one
  ``fori_loop``), against the authors' package (``iscm``, a Python double loop) on the same graph;
- :func:`sortability_many`: R^2-sortability of 100 ER-2 graphs at d = 220 with n = 1000
  (sampling and metric vmapped), against CausalDisco on the first graphs;
- :func:`sampler_vs_iscm`: our iSCM sampler against ``iscm.data_sampler.sample_linear`` on the
  same graph;
- :func:`amortised_goal`: the amortised learner (:mod:`xfmr.causal.amortised`) trained on SCM
  and on iSCM data at d = 10 (both models at once), its training time and in-distribution edge
  AUROC on fresh graphs; the goal is AUROC >= 0.90 after at most 10 minutes on 2 cores.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookkit.bench.isolated import peak_mib, run_isolated
from bookkit.bench.timing import measure, measure_once


def _touching(W: np.ndarray) -> np.ndarray:
    """``W`` restricted to the nodes on some edge (the ``iscm`` package's Graph drops isolated nodes)."""
    idx = np.flatnonzero((W != 0).any(0) | (W != 0).any(1))
    return W[np.ix_(idx, idx)]


def _graph(seed: int, d: int) -> np.ndarray:
    from xfmr.causal import dags

    W = dags.weighted_graphs(jax.random.PRNGKey(seed), "ER-2", d, 1, dtype=jnp.float64)[0]
    return _touching(np.asarray(W))


def measure_population_covariance(d: int) -> dict:
    """Ours (first call, then one warm call) against the ``iscm`` package's closed form."""
    from iscm.closed_form_data_generator import get_exact_covariance_for_alternate_standardization
    from iscm.graph_utils import Graph

    from xfmr.causal import scm

    with jax.enable_x64(True):
        W = _graph(0, d)
        ours = measure(lambda i: scm.population_covariance(W, 1.0, "iscm"), 1)
        C = np.asarray(scm.population_covariance(W, 1.0, "iscm"))
        variances = {i: 1.0 for i in range(W.shape[0])}
        reference, ref = measure_once(lambda: get_exact_covariance_for_alternate_standardization(
            Graph(weight_matrix=W), variances)[0])
    return {"ours": ours, "reference": reference, "err": float(np.abs(C - ref).max()), "d": W.shape[0],
            "peak_mib": peak_mib()}


def measure_sortability(count: int, d: int, n: int, n_ref: int) -> dict:
    """Sampling and R^2-sortability of ``count`` graphs, each one call with its compilation;
    CausalDisco on the first ``n_ref`` of them."""
    from CausalDisco import analytics

    from xfmr.causal import dags, scm, sortability

    with jax.enable_x64(True):
        graphs, Ws = measure_once(lambda: dags.weighted_graphs(jax.random.PRNGKey(1), "ER-2", d, count,
                                                                         dtype=jnp.float64))
        keys = jax.random.split(jax.random.PRNGKey(2), count)
        sample, Xs = measure_once(lambda: scm.sample_many(keys, Ws, n, "scm"))
        sort, s = measure_once(lambda: sortability.sortability_batch(Xs, Ws, "r2", 1e-9))
        s = np.asarray(s)
        reference = measure(lambda i: analytics.r2_sortability(np.asarray(Xs[i]), np.asarray(Ws[i]), 1e-9),
                            n_ref, first_call=False)
        ref = [analytics.r2_sortability(np.asarray(Xs[b]), np.asarray(Ws[b]), 1e-9) for b in range(n_ref)]
    return {"graphs": graphs, "sample": sample, "sort": sort, "reference": reference,
            "err": float(np.abs(s[:n_ref] - np.array(ref)).max()), "mean": float(np.mean(s)), "peak_mib": peak_mib()}


def measure_sampler(d: int, n: int) -> dict:
    """Our iSCM sampler (first call, then one warm call on a new key) against the ``iscm`` package's;
    both samples' correlations against the population correlation."""
    from iscm import data_sampler
    from iscm.graph_utils import Graph

    from xfmr.causal import scm

    with jax.enable_x64(True):
        W = _graph(3, d)
        ours = measure(lambda i: scm.sample(jax.random.PRNGKey(4 + i), W, n, "iscm"), 1)
        X = np.asarray(scm.sample(jax.random.PRNGKey(5), W, n, "iscm"))
        graph = Graph(weight_matrix=W)
        reference, Y = measure_once(lambda: data_sampler.sample_linear(graph, 1.0, "internal", n,
                                                                       rng=np.random.default_rng(0)))
        C = np.asarray(scm.population_covariance(W, 1.0, "iscm"))
    err = max(float(np.abs(np.corrcoef(X.T) - C).max()), float(np.abs(np.corrcoef(Y.T) - C).max()))
    return {"ours": ours, "reference": reference, "err": err, "d": W.shape[0], "peak_mib": peak_mib()}


def population_covariance_large(d: int = 1000) -> list[dict]:
    """iSCM population correlation at ``d`` nodes (ER-2), ours versus the ``iscm`` package."""
    res = run_isolated(measure_population_covariance, d)
    return [{
        "benchmark": "causal: iSCM population correlation (scm.population_covariance)",
        "size": f"d={res['d']} (ER-2 on {d} nodes, isolated nodes dropped)",
        **res["ours"].fields(),
        "peak_mib": res["peak_mib"],
        "goal": "< 1 s",
        "note": (f"first call incl. compile {res['ours'].first_seconds:.2f} s; iscm package's closed form "
                 f"{res['reference'].seconds:.1f} s, agrees to {res['err']:.1e}"),
    }]


def sortability_many(count: int = 100, d: int = 220, n: int = 1000, n_ref: int = 3) -> list[dict]:
    """R^2-sortability of ``count`` ER-2 graphs (SCM data), vmapped; CausalDisco on ``n_ref`` of them."""
    res = run_isolated(measure_sortability, count, d, n, n_ref)
    return [{
        "benchmark": "causal: R^2-sortability of many graphs (sample_batch + sortability_batch)",
        "size": f"{count} graphs, d={d}, n={n}, ER-2",
        **res["sample"].plus(res["sort"]).fields(),
        "peak_mib": res["peak_mib"],
        "goal": "< 30 s",
        "note": (f"sampling {res['sample'].seconds:.1f} s + sortability {res['sort'].seconds:.1f} s, graph "
                 f"generation {res['graphs'].seconds:.1f} s apart; CausalDisco {res['reference'].seconds:.1f} s "
                 f"per graph ({res['reference'].statistic}), agrees to {res['err']:.1e}; mean R^2-sortability "
                 f"{res['mean']:.3f}"),
    }]


def sampler_vs_iscm(d: int = 100, n: int = 10_000) -> list[dict]:
    """Our iSCM sampler versus ``iscm.data_sampler.sample_linear`` on one ER-2 graph."""
    res = run_isolated(measure_sampler, d, n)
    return [{
        "benchmark": "causal: iSCM sampler (scm.sample) vs iscm package",
        "size": f"d={res['d']}, n={n}, ER-2",
        **res["ours"].fields(),
        "peak_mib": res["peak_mib"],
        "goal": "same order as the iscm package",
        "note": (f"first call incl. compile {res['ours'].first_seconds:.2f} s; iscm package "
                 f"{res['reference'].seconds:.3f} s; both samples' correlations within {res['err']:.3f} of "
                 f"the population values"),
    }]


def measure_amortised(d: int, n: int, n_steps: int, width: int, n_layers: int, batch_size: int,
                      learning_rate: float, n_test: int) -> dict:
    """Train one model on SCM and one on iSCM data (ER-1 graphs, one compilation), then the
    mean edge AUROC of each on ``n_test`` fresh data sets of its own kind."""
    from xfmr.causal import amortised, amortised_data, amortised_training, graph_metrics

    config = amortised.Config(d_max=d, width=width, n_layers=n_layers, n_heads=4, pool="max")

    def train():
        params, _ = amortised_training.train_per_kind(
            jax.random.PRNGKey(0), config, ("scm", "iscm"), n_steps=n_steps, batch_size=batch_size, n=n,
            learning_rate=learning_rate, chunk=min(n_steps, 500))
        return jax.block_until_ready(params)

    timing, params = measure_once(train)
    auroc = {}
    for kind in ("scm", "iscm"):
        Xs, As = amortised_data.sample_graphs_and_data(jax.random.PRNGKey(1), n_test, d, n, kind)
        L = np.asarray(amortised.forward(params[kind], Xs, config))
        auroc[kind] = float(np.nanmean([graph_metrics.edge_metrics(np.asarray(As[g]), L[g])["auroc"]
                                        for g in range(n_test)]))
    return {"train": timing, "auroc": auroc, "peak_mib": peak_mib()}


def amortised_goal(d: int = 10, n: int = 50, n_steps: int = 3000, width: int = 32, n_layers: int = 2,
                   batch_size: int = 8, learning_rate: float = 3e-3, n_test: int = 200) -> list[dict]:
    """The amortised learner at ``d`` variables: training time of the SCM and iSCM models
    together, and each one's in-distribution edge AUROC (goal: >= 0.90 within 600 s)."""
    res = run_isolated(measure_amortised, d, n, n_steps, width, n_layers, batch_size, learning_rate, n_test)
    au = res["auroc"]
    return [{
        "benchmark": "causal: amortised learner, training to an edge AUROC (amortised_training)",
        "size": f"d={d}, n={n}, {n_steps} steps, batch {batch_size}, width {width}, {n_layers} layers, 2 models",
        **res["train"].fields(),
        "peak_mib": res["peak_mib"],
        "goal": "AUROC >= 0.90 in-distribution within 600 s",
        "note": (f"in-distribution edge AUROC on {n_test} fresh ER-1 graphs: SCM-trained on SCM data "
                 f"{au['scm']:.3f}, iSCM-trained on iSCM data {au['iscm']:.3f}; time is both models' "
                 f"training, compilation included"),
    }]


def bench_causal() -> list[dict]:
    """All Part VI benchmarks, in order."""
    return population_covariance_large() + sortability_many() + sampler_vs_iscm() + amortised_goal()
