"""Benchmarks of Part IV (Bayesian optimisation and the PFN).

- :func:`bench_pfn_train_step`: one training step of the page-3 PFN at that page's sizes
  (``bayesopt/pfn``: 4 layers, width 64, 100 buckets, batch 64 datasets of 40 points by
  default), float32, compilation amortised.
- :func:`bench_bayesopt_step`: one BayesOpt step in 1-D through the book's policies: the PFN's
  forward pass (context keys only) + bar-distribution EI against the GP's type-II ML refit +
  solve + EI, at the largest context the timed PFN accepts (its page's ``max_context``: a
  trained PFN refuses a longer one); goal: the PFN at least 10x faster. Timed with the model
  the BayesOpt page trains (its sizes, 20 observations, on its grid), and with the page-3 model
  (30 observations, 500 random candidates).
- :func:`bench_gp_posterior`: exact GP posterior (float64) at 2,000 observations and 2,000
  test points; goal: under 2 s.
- :func:`bench_pfn_kl_goals`: page 3's PFN trained in 1-D and in 3-D with the steps of the
  dimensions page's recorded profile (``bayesopt-dims``: about 5 and 10 minutes on 2 cores),
  timed, then its worst KL(binned GP || PFN) over contexts 1-30 on 512 fresh datasets; goals:
  1-D KL <= 0.05 nats at every context size after <= 5 min; 3-D: the KL reached after
  <= 10 min, stated. About 15 minutes in all.

Every size is read from the pages' parameters cells (:func:`bookkit.book.toc.page_defaults`), so
a page resized is benchmarked at its new size. Each timing is the median of a few calls after a
first call (so compilation is excluded), wall and CPU time (:func:`bookkit.bench.timing.measure`).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp

from bookkit.bench.timing import measure

__all__ = ["bench_pfn_train_step", "bench_bayesopt_step", "bench_gp_posterior", "bench_pfn_kl_goals"]


def _pfn_config(sizes: dict):
    """The PFNConfig of a page's parameters (``sizes`` from :func:`bookkit.book.toc.page_defaults`)."""
    from xfmr.bayesopt import pfn_model

    names = ("d_model", "n_heads", "n_layers", "d_ff", "n_buckets", "max_context", "n_points")
    return pfn_model.PFNConfig(d_in=1, **{k: sizes[k] for k in names})


def bench_pfn_train_step() -> list[dict]:
    """One Adam step of the page-3 PFN (``bayesopt/pfn``) at that page's sizes and prior."""
    import optax

    from bookkit.book.toc import page_defaults
    from xfmr.bayesopt import bar, pfn_model, pfn_prior, pfn_train

    sizes = page_defaults(Path.cwd(), "book/bayesopt/pfn")
    cfg = _pfn_config(sizes)
    with jax.enable_x64(True):  # as on the page: the prior's draws in float64, the model in float32
        borders = bar.normal_borders(cfg.n_buckets, (sizes["outputscale"] + sizes["noise"]) ** 0.5)
        params = pfn_model.init_params(jax.random.key(0), cfg)
        sampler = pfn_prior.gp_dataset_sampler(cfg, sizes["batch_size"], lengthscale=sizes["lengthscale"],
                                               outputscale=sizes["outputscale"], noise=sizes["noise"])
        loss = pfn_train.query_nll(cfg, borders)
        opt = optax.adam(sizes["learning_rate"])
        state = opt.init(params)

        @jax.jit
        def step(params, state, key):
            value, grads = jax.value_and_grad(loss)(params, sampler(key))
            updates, state = opt.update(grads, state, params)
            return optax.apply_updates(params, updates), state, value

        timing = measure(lambda i: step(params, state, jax.random.key(1)))
    n_steps = sizes["n_steps"]
    return [{"benchmark": "PFN training step (page 3 model)",
             "size": f"{cfg.n_layers} layers, width {cfg.d_model}, batch {sizes['batch_size']} x {cfg.n_points} points",
             **timing.fields(), "goal": "page-3 training <= 6 min on 2 cores",
             "note": f"{n_steps} steps (default profile) ~ {n_steps * timing.seconds / 60:.1f} min at this speed"}]


def _bayesopt_step_rows(label: str, model_page: str, m: int, n_restarts: int, n_fit_steps: int) -> list[dict]:
    """One BayesOpt step at ``m`` candidates in 1-D, both through the book's own policies
    (:mod:`xfmr.bayesopt.loop`): GP-EI with a type-II ML refit against PFN-EI with the model that
    ``model_page`` trains (exactly its default sizes, so the same program; untrained weights: the
    cost of a forward pass does not depend on the weights), at ``n`` observations, the largest
    context that model accepts (its ``max_context``)."""
    from bookkit.book.toc import page_defaults
    from xfmr.bayesopt import bar, loop, pfn_model

    sizes = page_defaults(Path.cwd(), f"book/{model_page}")
    cfg = _pfn_config(sizes)
    n = cfg.max_context
    k = jax.random.split(jax.random.key(0), 3)
    X = jax.random.uniform(k[0], (n, 1))
    y = jnp.sin(6 * X[:, 0]) + 0.1 * jax.random.normal(k[1], (n,))
    C = jax.random.uniform(k[2], (m, 1))
    mask = jnp.ones(n)
    gp_policy, gp_state = loop.gp_ei_policy(n_restarts=n_restarts, n_steps=n_fit_steps)
    gp_step = jax.jit(lambda key: jnp.argmax(gp_policy(X, y, mask, C, key, gp_state)[0]))
    params = pfn_model.init_params(jax.random.key(1), cfg)
    borders = bar.normal_borders(cfg.n_buckets, 1.01**0.5)
    pfn_policy, _ = loop.pfn_ei_policy(params, cfg, borders)
    pfn_step = jax.jit(lambda key: jnp.argmax(pfn_policy(X, y, mask, C, key, None)[0]))

    gp = measure(lambda i: gp_step(jax.random.key(2)))
    pf = measure(lambda i: pfn_step(jax.random.key(2)))
    size = f"{n} obs, {m} candidates, 1-D"
    model = f"{cfg.n_layers} layers, width {cfg.d_model}, feed-forward {cfg.d_ff}, {cfg.n_buckets} buckets"
    return [
        {"benchmark": f"BayesOpt step, GP-EI (type-II ML refit + solve), {label}", "size": size,
         **gp.fields(), "goal": "reference",
         "note": f"{n_restarts} restarts x {n_fit_steps} Adam steps, float64"},
        {"benchmark": f"BayesOpt step, PFN-EI (one forward pass), {label}", "size": size,
         **pf.fields(), "goal": ">= 10x faster than the GP step",
         "note": f"{gp.seconds / pf.seconds:.1f}x faster than the GP step (CPU: "
                 f"{gp.cpu_seconds / max(pf.cpu_seconds, 1e-9):.1f}x); {model}, the model {model_page} trains, "
                 f"at its largest context; float32; the {n + m} tokens attend to the {n} context tokens and "
                 f"themselves"},
    ]


def bench_bayesopt_step() -> list[dict]:
    """The 10x goal, twice: with the model and candidate grid of the BayesOpt page
    (``bayesopt/pfn_bayesopt``: the PFN that runs BayesOpt in the book, EI maximised over its
    grid), and with the larger page-3 model (``bayesopt/pfn``) at the 500 random candidates of
    ``bayesopt/bayesopt_loop``, each at its model's largest context. Restarts and Adam steps of
    the GP refit are each page's."""
    from bookkit.book.toc import page_defaults

    page5 = page_defaults(Path.cwd(), "book/bayesopt/pfn_bayesopt")
    loop = page_defaults(Path.cwd(), "book/bayesopt/bayesopt_loop")
    with jax.enable_x64(True):
        return (_bayesopt_step_rows("BayesOpt page's PFN and grid", "bayesopt/pfn_bayesopt", page5["n_grid"],
                                    page5["n_restarts"], page5["n_fit_steps"])
                + _bayesopt_step_rows("page-3 PFN, 500 random candidates", "bayesopt/pfn",
                                      loop["n_candidates"], loop["n_restarts"], loop["n_fit_steps"]))


def bench_gp_posterior() -> list[dict]:
    from xfmr.bayesopt import gp

    n = 2000
    with jax.enable_x64(True):
        k = jax.random.split(jax.random.key(0), 3)
        X = jax.random.uniform(k[0], (n, 2))
        y = jax.random.normal(k[1], (n,))
        Xs = jax.random.uniform(k[2], (n, 2))
        f = jax.jit(lambda X, y, Xs: gp.masked_posterior(X, y, jnp.ones(n), Xs, lengthscale=0.3,
                                                         outputscale=1.0, noise=0.01))
        timing = measure(lambda i: f(X, y, Xs), 3)
    return [{"benchmark": "GP posterior (mean + variance)", "size": "2000 obs x 2000 test points, d = 2, float64",
             **timing.fields(), "goal": "< 2 s", "note": "Cholesky + triangular solves, jitted"}]


def bench_pfn_kl_goals() -> list[dict]:
    """The KL goals of the dimensions page, each after one timed training run (seed 0) at the
    sizes of its recorded profile ``bayesopt-dims`` (page 3's network; the steps sized to about
    5 minutes in 1-D and 10 minutes in 3-D on 2 idle cores)."""
    import numpy as np

    from bookkit.bench.timing import measure_once
    from bookkit.book.toc import page_defaults, profile_overrides
    from xfmr.bayesopt import bar, pfn_eval, pfn_model, pfn_prior, pfn_train

    root = Path.cwd()
    sizes = {**page_defaults(root, "book/bayesopt/dimensions"),
             **profile_overrides(root / "book/profiles.yml", "bayesopt/dimensions", "bayesopt-dims")}
    rows = []
    with jax.enable_x64(True):
        borders = bar.normal_borders(sizes["n_buckets"], (sizes["outputscale"] + sizes["noise"]) ** 0.5)
        for d, goal, minutes in ((1, "KL <= 0.05 nats at every n <= 30, training <= 5 min", 5),
                                 (3, "the KL reached after <= 10 min, stated", 10)):
            hyper = dict(lengthscale=sizes["base_lengthscale"] * d**0.5, outputscale=sizes["outputscale"],
                         noise=sizes["noise"])
            cfg = pfn_model.PFNConfig(d_in=d, **{k: sizes[k] for k in ("d_model", "n_heads", "n_layers", "d_ff",
                                                                      "n_buckets", "max_context", "n_points")})
            steps = sizes["steps_by_dim"].get(d, sizes["n_steps"])
            sampler = pfn_prior.gp_dataset_sampler(cfg, sizes["batch_size"], **hyper)
            timing, fit = measure_once(lambda: jax.block_until_ready(pfn_train.fit_pfn(
                cfg, borders, sampler, jax.random.key(0), n_steps=steps, learning_rate=sizes["learning_rate"],
                warmup_steps=sizes["warmup_steps"])))
            x, y = pfn_prior.sample_gp_datasets(jax.random.key(1000 + d), 512, cfg.n_points, d, **hyper)
            table = pfn_eval.kl_table(fit.params, cfg, borders, x, y, list(range(1, cfg.max_context + 1)), **hyper)
            worst = int(np.argmax(table[:, 3]))
            met = bool(table[worst, 3] <= 0.05 and timing.seconds <= 60 * minutes) if d == 1 else None
            rows.append({"benchmark": f"PFN training to the GP posterior predictive, d = {d}",
                         "size": f"{cfg.n_layers} layers, width {cfg.d_model}, {steps} steps, batch "
                                 f"{sizes['batch_size']} x {cfg.n_points} points",
                         **timing.fields(), "goal": goal,
                         "note": f"worst KL {table[worst, 3]:.3f} nats at n = {worst + 1} (floor "
                                 f"{np.max(table[:, 1] - table[:, 0]):.3f}); "
                                 + ("goal met" if met else "goal not met" if d == 1 else "stated")})
    return rows
