"""bookkit.pfn_cost: the paper's model, the probe every page times, the scaling of a measured
step to a page's batch and points, and the cost sentence."""

import pytest

from bookkit import pfn_cost
from xfmr.bayesopt import bar, pfn_model


def test_paper_config_is_the_pfn_papers_model():
    c = pfn_cost.paper_config(max_context=20, n_points=30)
    assert (c.d_model, c.n_heads, c.n_layers, c.d_ff, c.n_buckets) == (512, 4, 6, 1024, 1000)
    assert (c.max_context, c.n_points) == (20, 30)
    with pytest.raises(ValueError, match="n_layers"):
        pfn_cost.paper_config(0)


def test_seconds_per_step_times_repeats_steps_after_compiling_and_scales_to_the_batch(monkeypatch):
    """A fake CPU clock that advances 1 s per reading: the compiling call is not timed, the
    ``repeats`` timed steps are, and the time per step is scaled from the probe to the batch."""
    cfg = pfn_model.PFNConfig(d_model=8, n_heads=2, n_layers=1, d_ff=8, n_buckets=5, max_context=3, n_points=5)
    readings = iter(range(100))
    monkeypatch.setattr(pfn_cost.time, "process_time", lambda: float(next(readings)))
    # two readings around the 3 timed steps: 1 s in all, 1/3 s per step at 2 datasets, x 12 / 2
    assert pfn_cost.seconds_per_step(cfg, bar.normal_borders(5, 1.0), 12, probe_batch=2, repeats=3) == pytest.approx(2.0)
    assert next(readings) == 2   # exactly two readings: the compiling call is outside the clock


def test_paper_probe_times_one_program_and_scales_to_the_callers_points(monkeypatch):
    """Every page times the same paper-size program (40 points, borders an argument), scaled
    linearly to its own points and batch."""
    seen = []

    def fake(config, borders, batch, *, probe_batch, repeats):
        seen.append((config, probe_batch, repeats))
        return float(batch)

    monkeypatch.setattr(pfn_cost, "seconds_per_step", fake)
    a = pfn_cost.paper_seconds_per_step(1, max_context=10, n_points=20, batch=16, scale=1.0)
    b = pfn_cost.paper_seconds_per_step(1, max_context=30, n_points=40, batch=16, scale=1.5)
    assert (a, b) == (8.0, 16.0)
    assert seen[0] == seen[1] and seen[0][0].n_points == pfn_cost.PAPER_PROBE_POINTS == 40
    with pytest.raises(ValueError, match="max_context"):
        pfn_cost.paper_seconds_per_step(1, max_context=20, n_points=20, batch=16, scale=1.0)
    # 2.0 CPU-s per step: 1,000 steps are 2,000 CPU-s, 0.56 CPU-hours, printed as 0.6
    assert pfn_cost.paper_cost_text(2.0, 6, 16, 0.05, n_points=40) == (
        "measured: 6 layers, width 512, 4 heads, 1,000 buckets,\n"
        "on 1-D datasets of 40 points: 2.0 CPU-s per step\n"
        "at batch 16 (this page's model: 0.05);\n"
        "1,000 steps = 0.6 CPU-hours on this machine")


def test_the_report_times_the_paper_model_on_the_pages_points_and_batch(monkeypatch):
    seen = []

    def fake(n_layers, *, max_context, n_points, batch, scale):
        seen.append((n_layers, max_context, n_points, batch, scale))
        return 2.0

    monkeypatch.setattr(pfn_cost, "paper_seconds_per_step", fake)
    cfg = pfn_model.PFNConfig(d_model=8, n_heads=2, n_layers=1, d_ff=8, n_buckets=5, max_context=20, n_points=30)
    report = pfn_cost.paper_cost_report(6, cfg, 16, 1.5, 0.05)
    assert seen == [(6, 20, 30, 16, 1.5)]
    assert report == pfn_cost.paper_cost_text(2.0, 6, 16, 0.05, n_points=30)
    with pytest.raises(TypeError, match="config"):
        pfn_cost.paper_cost_report(6, cfg._asdict(), 16, 1.5, 0.05)
