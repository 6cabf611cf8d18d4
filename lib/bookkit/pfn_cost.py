"""What a PFN of the paper's sizes would cost to train here: one step measured, then scaled.

The PFN pages of Part IV train a laptop-sized model. The PFN paper (Mueller et al., ICLR 2022)
trains 6 layers of width 512 on sequences of up to 2,000 points in up to 5 dimensions;
PFNs4BO (Mueller et al., ICML 2023) trains 12 layers of width 512 for about 50,000 steps.
:func:`paper_config` is the PFN paper's depth and width with 4 heads and 1,000 buckets, on this
book's 1-D datasets; :func:`paper_seconds_per_step` measures one training step of it on this
machine (:func:`seconds_per_step`), and :func:`paper_cost_text` turns it into the pages'
sentence, which names the model and the data it was timed on; :func:`paper_cost_report` does
both for a page's own model.
Tooling, not a kernel: it times, and it writes prose.
"""

from __future__ import annotations

import time

import jax
import optax

from xfmr.bayesopt import bar
from xfmr.bayesopt.pfn_model import PFNConfig, init_params
from xfmr.bayesopt.pfn_prior import gp_dataset_sampler
from xfmr.bayesopt.pfn_train import query_nll
from xfmr.core.validate import check_instance, check_int

__all__ = ["seconds_per_step", "paper_config", "PAPER_PROBE_POINTS", "paper_seconds_per_step", "paper_cost_text",
           "paper_cost_report"]


def seconds_per_step(config: PFNConfig, borders, batch: int, *, probe_batch: int = 2, repeats: int = 2) -> float:
    """Measured CPU seconds of one Adam training step of ``config`` at ``batch`` datasets.

    Times ``repeats`` jitted steps (after one compiling call) at ``probe_batch`` datasets and
    scales linearly to ``batch`` (the step's work is linear in the batch), so that a model far
    too large to train here can be costed in seconds. The borders are an argument of the
    compiled step, not a constant in it, so one ``config`` compiles to one program whatever the
    borders (the persistent compilation cache then serves every caller). Returns the estimate
    in CPU seconds of this process (``time.process_time``).
    """
    batch = check_int(batch, "batch", minimum=1)
    probe_batch = check_int(probe_batch, "probe_batch", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    borders = bar.check_borders(borders)
    params = init_params(jax.random.key(0), config)
    optimizer = optax.adam(1e-3)
    sampler = gp_dataset_sampler(config, probe_batch, lengthscale=0.2, outputscale=1.0, noise=0.01)

    @jax.jit
    def step(p, s, key, borders):
        value, grads = jax.value_and_grad(query_nll(config, borders))(p, sampler(key))
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    state = optimizer.init(params)
    jax.block_until_ready(step(params, state, jax.random.key(1), borders))
    t0 = time.process_time()
    for r in range(repeats):
        params, state, _ = jax.block_until_ready(step(params, state, jax.random.key(2 + r), borders))
    return (time.process_time() - t0) / repeats * batch / probe_batch


def paper_config(n_layers: int = 6, *, max_context: int = 30, n_points: int = 40) -> PFNConfig:
    """The PFN paper's model (Mueller et al. 2022): width 512, 4 heads, feed-forward 1024, 1000
    buckets, ``n_layers`` layers (6 in the paper), on this book's 1-D datasets."""
    return PFNConfig(d_in=1, d_model=512, n_heads=4, n_layers=check_int(n_layers, "n_layers", minimum=1),
                     d_ff=1024, n_buckets=1000, max_context=max_context, n_points=n_points)


PAPER_PROBE_POINTS = 40   # points per dataset at which the paper model's step is timed


def paper_seconds_per_step(n_layers: int, *, max_context: int, n_points: int, batch: int, scale: float) -> float:
    """:func:`seconds_per_step` of :func:`paper_config` at ``batch`` datasets of ``n_points``
    points, ``scale`` the target scale of the equal-mass buckets.

    Timed with one step at one dataset of ``PAPER_PROBE_POINTS`` points (context up to 30),
    whatever the caller's sizes, and scaled linearly to ``n_points``: every page then times the
    same compiled program (shared through the persistent compilation cache), and the step's
    work is linear in the points but for the attention scores, about 2% of a step at width
    512 and 40 points (2 * 40 * 512 of the 2.1M multiply-adds per point and layer).
    """
    n_points = check_int(n_points, "n_points", minimum=2)
    check_int(max_context, "max_context", minimum=1, maximum=n_points - 1)
    config = paper_config(n_layers, max_context=PAPER_PROBE_POINTS - 10, n_points=PAPER_PROBE_POINTS)
    per_probe = seconds_per_step(config, bar.normal_borders(config.n_buckets, scale), batch, probe_batch=1, repeats=1)
    return per_probe * n_points / PAPER_PROBE_POINTS


def paper_cost_text(per_step: float, n_layers: int, batch: int, page_per_step: float, *,
                    n_points: int = PAPER_PROBE_POINTS, n_steps: int = 1_000) -> str:
    """Four short lines on the timed model's training cost: ``per_step`` CPU-s per step (from
    :func:`paper_seconds_per_step`) of :func:`paper_config` with ``n_layers`` layers at ``batch``
    1-D datasets of ``n_points`` points (the data the step was timed on, not a paper's), this
    page's own ``page_per_step``, and the CPU-hours of ``n_steps`` such steps."""
    return (f"measured: {n_layers} layers, width 512, 4 heads, 1,000 buckets,\n"
            f"on 1-D datasets of {n_points} points: {per_step:.1f} CPU-s per step\n"
            f"at batch {batch} (this page's model: {page_per_step:.2f});\n"
            f"{n_steps:,} steps = {per_step * n_steps / 3600:.1f} CPU-hours on this machine")


def paper_cost_report(n_layers: int, config: PFNConfig, batch: int, scale: float, page_per_step: float) -> str:
    """:func:`paper_cost_text` of :func:`paper_seconds_per_step`, for a page whose own PFN is
    ``config`` trained at ``batch`` datasets in ``page_per_step`` CPU-s per step: the paper
    model with ``n_layers`` layers is timed on datasets of the page's ``config.n_points``
    points (context up to ``config.max_context``), ``scale`` the target scale of its buckets."""
    check_instance(config, "config", PFNConfig)
    per_step = paper_seconds_per_step(n_layers, max_context=config.max_context, n_points=config.n_points,
                                      batch=batch, scale=scale)
    return paper_cost_text(per_step, n_layers, batch, page_per_step, n_points=config.n_points)
