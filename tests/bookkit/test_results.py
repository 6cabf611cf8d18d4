"""bookkit.results: recording the pages' key results and recorded runs."""

import json
import os
from pathlib import Path

import pytest

from bookkit import results
from bookkit.book import execute, toc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """An executed tree (marker at its root) and a kernel working folder inside it."""
    monkeypatch.delenv(results.ENV_VAR, raising=False)
    (tmp_path / results.MARKER).touch()
    folder = tmp_path / "book" / "part"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    return tmp_path


def test_record_writes_one_file_per_page(tree):
    import numpy as np

    assert results.record("growth_rates.slope", np.float64(5.97), spread=np.float32(0.25)) is None
    results.record("growth_rates.blocks", np.array([1, 2]))
    results.record("depth.worst", 0.1)
    path = tree / "results" / "growth_rates.json"
    assert json.loads(path.read_text()) == {"blocks": {"value": [1, 2]}, "slope": {"value": 5.97, "spread": 0.25}}
    assert results.load_results(tree / "results") == {
        "depth.worst": {"value": 0.1}, "growth_rates.blocks": {"value": [1, 2]},
        "growth_rates.slope": {"value": 5.97, "spread": 0.25}}
    results.record("growth_rates.slope", 6.0)  # a re-execution overwrites the same key
    assert json.loads(path.read_text())["slope"] == {"value": 6.0}


def test_record_outside_an_executed_tree_is_silent(tmp_path, monkeypatch):
    monkeypatch.delenv(results.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert results.results_dir() is None
    assert results.record("page.key", 1.0) is None
    assert list(tmp_path.iterdir()) == []


def test_environment_variable_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv(results.ENV_VAR, str(tmp_path / "elsewhere"))
    results.record("page.key", 2)
    assert json.loads((tmp_path / "elsewhere" / "page.json").read_text()) == {"key": {"value": 2}}


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "a.json"
    results.write_json_atomic(path, {"x": 1})
    with pytest.raises(TypeError):
        results.write_json_atomic(path, {"x": object()})  # json cannot encode it
    assert json.loads(path.read_text()) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temporary file left


@pytest.mark.parametrize("claim", ["page", "Page.key", "a.b.c", "page.", ".key", "pa ge.key"])
def test_bad_claim_ids(claim):
    with pytest.raises(ValueError, match="claim"):
        results.split_claim(claim)


def test_bad_values():
    with pytest.raises(TypeError, match="claim"):
        results.split_claim(3)
    with pytest.raises(ValueError, match="finite"):
        results.to_json(float("nan"))
    with pytest.raises(TypeError, match="value"):
        results.to_json(object())
    assert results.to_json((1, True, None, {"a": 2.5})) == [1, True, None, {"a": 2.5}]


def test_record_seeds_keeps_the_mean_and_the_spread_over_seeds(tmp_path):
    results.record_seeds("page.gap", [1.0, 2.0, 3.0], tmp_path)
    results.record_seeds("page.lr", 0.03, tmp_path, bound=1)
    data = json.loads((tmp_path / "page.json").read_text())
    assert data == {"gap": {"value": 2.0, "spread": 1.0}, "lr": {"value": 0.03, "bound": 1}}
    for bad in ([1.0], [[1.0, 2.0]]):
        with pytest.raises(ValueError, match="one value per seed"):
            results.record_seeds("page.bad", bad, tmp_path)


def test_recorded_runs(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "depth.json").write_text('{"worst": {"value": 0.12, "spread": 0.03}}')
    kept = results.keep_results(tmp_path / "results", tmp_path / "rec", "ci",
                                ["book/experiments/depth", "book/experiments/other"], "2026-12-02")
    assert kept == [tmp_path / "rec" / "ci" / "depth.json"]
    run = results.recorded("depth", "ci", tmp_path / "rec")
    assert run == {"profile": "ci", "date": "2026-12-02", "page": "book/experiments/depth",
                   "results": {"worst": {"value": 0.12, "spread": 0.03}}}
    text = results.describe_recorded("depth", {"worst": "worst slope"}, {"worst": 0.1}, "ci", tmp_path / "rec")
    assert text == "ci profile, run on 2026-12-02:\n  worst slope  +0.12 (seed sd 0.030)   (this run: +0.10)"
    assert results.recorded("depth", "paper", tmp_path / "rec") is None
    assert "No paper-profile run" in results.describe_recorded("depth", {"worst": "w"}, data_dir=tmp_path / "rec")
    # a page's summary: key -> (per-seed values, label); this run's value is the seeds' mean
    summary = {"worst": ([0.05, 0.15], "worst slope")}
    assert results.describe_recorded_summary("depth", summary, profile="ci", data_dir=tmp_path / "rec") == text
    # the same as a table: recorded value, seed sd and this run's mean, one row per key
    table = results.recorded_table("depth", {"worst": "worst slope"}, {"worst": 0.1}, "ci", tmp_path / "rec")
    assert table.loc["worst slope"].tolist() == ["+0.12", "0.030", "+0.10"]
    shown = []
    monkeypatch.setattr(results, "show_recorded_table", lambda *a, **k: shown.append(results.recorded_table(*a, **k)))
    results.show_recorded_summary("depth", summary, profile="ci", data_dir=tmp_path / "rec")
    assert shown[0].equals(table)


def test_claims_page_runs_after_every_page_and_before_the_statistics():
    assert execute.LAST_PAGES == ("book/about/claims", "book/about/execution")
    pages = toc.toc_pages(ROOT / "_toc.yml")
    assert set(execute.LAST_PAGES) <= set(pages)


def _page(path: Path, cells: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "    format_version: 0.13\nkernelspec:\n  name: python3\n  display_name: Python 3\n"
        "  language: python\n---\n\n# Page\n\n```{code-cell} ipython3\n:tags: [parameters]\n\nn = 1\n```\n\n"
        "```{code-cell} ipython3\n" + cells + "\n```\n")


def _recording_book(tmp_path, monkeypatch, toc_body: str) -> None:
    """A tiny book in ``tmp_path``: the toc ``toc_body``, one page ``part/page`` recording
    ``page.n = 1.5 n`` (ci sets n = 3), executed with this checkout's ``lib`` importable."""
    monkeypatch.delenv(results.ENV_VAR, raising=False)
    monkeypatch.setenv("PYTHONPATH", f"{ROOT / 'lib'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    (tmp_path / "_toc.yml").write_text("format: jb-book\n" + toc_body)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "profiles.yml").write_text("part/page:\n  ci: {n: 3}\n")
    _page(tmp_path / "book" / "part" / "page.md", "from bookkit.results import record\nrecord('page.n', n * 1.5)")


def test_executor_records_then_runs_the_claims_page_last(tmp_path, monkeypatch):
    """A two-page book whose claims page comes first in the toc: it still sees the other's result,
    and a recorded run keeps that result with its date."""
    _recording_book(tmp_path, monkeypatch, "root: book/about/claims\nchapters:\n  - file: book/part/page\n")
    _page(tmp_path / "book" / "about" / "claims.md",
          "from bookkit.results import load_results\nassert load_results('../../results') == "
          "{'page.n': {'value': 4.5}}, load_results('../../results')")
    out = tmp_path / "out"
    assert execute.run(tmp_path, out, "ci", None, keep_results=tmp_path / "rec") == 0
    assert (out / results.MARKER).read_text() == "ci"
    assert results.current_profile(out / "book" / "part") == "ci" and results.current_profile(tmp_path) is None
    kept = json.loads((tmp_path / "rec" / "ci" / "page.json").read_text())
    assert kept["results"] == {"n": {"value": 4.5}} and kept["page"] == "book/part/page"


def test_a_labelled_run_with_overrides_is_kept_apart(tmp_path, monkeypatch):
    """`make record-khop`: one page, parameters set on top of a profile, kept under its own label."""
    _recording_book(tmp_path, monkeypatch, "root: book/part/page\n")
    assert execute.parse_overrides(["n=[5, 6]"]) == {"n": [5, 6]}
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        execute.parse_overrides(["n"])
    assert execute.run(tmp_path, tmp_path / "out", "ci", None, overrides={"n": 5}) == 2  # --set needs --page
    assert execute.run(tmp_path, tmp_path / "out", "ci", ["book/part/page.md"], keep_results=tmp_path / "rec",
                       overrides={"n": 5}, label="big") == 0
    kept = json.loads((tmp_path / "rec" / "big" / "page.json").read_text())
    assert kept["results"] == {"n": {"value": 7.5}} and kept["overrides"] == {"n": 5} and kept["profile"] == "ci"
    assert results.recorded("page", "big", tmp_path / "rec")["results"]["n"]["value"] == 7.5
    with pytest.raises(ValueError, match="label"):
        results.keep_results(tmp_path / "out" / "results", tmp_path / "rec", "ci", ["book/part/page"], "d", label="Big!")


def test_a_page_s_own_profile_runs_only_on_that_page_and_is_kept_with_its_parameters(tmp_path, monkeypatch):
    """`make record-khop`: a profile that one page defines, kept under its own name."""
    _recording_book(tmp_path, monkeypatch, "root: book/part/page\nchapters:\n  - file: book/part/other\n")
    (tmp_path / "book" / "profiles.yml").write_text("part/page:\n  ci: {n: 3}\n  big: {n: 6}\n")
    _page(tmp_path / "book" / "part" / "other.md", "x = 1")
    out, rec = tmp_path / "out", tmp_path / "rec"
    assert execute.run(tmp_path, out, "big", None) == 2  # a page's own profile needs --page
    assert execute.run(tmp_path, out, "big", ["book/part/other.md"]) == 2  # not defined for that page
    assert execute.run(tmp_path, out, "huge", ["book/part/page.md"]) == 2  # defined nowhere
    assert execute.run(tmp_path, out, "big", ["book/part/page.md"], keep_results=rec) == 0
    kept = json.loads((rec / "big" / "page.json").read_text())
    assert kept["profile"] == "big" and kept["overrides"] == {"n": 6} and kept["results"] == {"n": {"value": 9.0}}


def test_page_kernels_use_unix_sockets_that_cannot_collide():
    # Over TCP two kernels started at once can pick the same free port and one dies at start.
    a, b = execute.IPCKernelManager(), execute.IPCKernelManager()
    assert a.transport == b.transport == "ipc"
    assert a.ip != b.ip and os.path.isabs(a.ip)


def test_recorded_figures_are_kept_in_page_order_and_shown(tmp_path, capsys):
    import base64

    png = [b"\x89PNG first", b"\x89PNG second"]
    cells = [{"cell_type": "markdown", "source": "x"},
             {"cell_type": "code", "outputs": [{"output_type": "stream", "text": "t"},
                                               {"output_type": "display_data", "data": {"image/png": base64.b64encode(png[0]).decode()}}]},
             {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"image/png": base64.b64encode(png[1]).decode()}}]}]
    (tmp_path / "out" / "book" / "part").mkdir(parents=True)
    (tmp_path / "out" / "book" / "part" / "page.ipynb").write_text(json.dumps({"cells": cells}))
    (tmp_path / "out" / "results").mkdir()
    (tmp_path / "out" / "results" / "page.json").write_text('{"n": {"value": 1}}')
    results.keep_results(tmp_path / "out" / "results", tmp_path / "rec", "paper", ["book/part/page"], "2026-12-03",
                         notebooks=tmp_path / "out")
    run = results.recorded("page", "paper", tmp_path / "rec")
    assert run["figures"] == ["figures/page-1.png", "figures/page-2.png"]
    assert [(tmp_path / "rec" / "paper" / f).read_bytes() for f in run["figures"]] == png
    results.show_recorded_figures("page", "paper", tmp_path / "rec")
    assert "paper profile, run on 2026-12-03: figure 2 of 2 of this page" in capsys.readouterr().out
    results.show_recorded_figures("other", "paper", tmp_path / "rec")
    assert "No figures" in capsys.readouterr().out


def test_recorded_table_holds_the_numbers_of_describe_recorded(tmp_path, capsys):
    run = {"date": "2026-01-02", "results": {"worst": {"value": 0.123, "spread": 0.01}, "list": {"value": [1, 2]}}}
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "depth.json").write_text(json.dumps(run))
    keys = {"worst": "worst slope", "list": "two values", "missing": "absent"}
    table = results.recorded_table("depth", keys, {"worst": 0.1}, data_dir=tmp_path, fmt="{:+.3f}")
    assert list(table.index) == ["worst slope", "two values", "absent"]
    assert table.loc["worst slope"].tolist() == ["+0.123", "0.010", "+0.100"]
    assert table.loc["two values", "paper (2026-01-02)"] == "+1.000, +2.000"
    assert table.loc["absent", "paper (2026-01-02)"] == "not recorded"
    text = results.describe_recorded("depth", keys, {"worst": 0.1}, data_dir=tmp_path, fmt="{:+.3f}")
    assert "+0.123 (seed sd 0.010)   (this run: +0.100)" in text
    assert results.recorded_table("depth", keys, data_dir=tmp_path / "none") is None
    assert "No paper-profile run" in capsys.readouterr().out


def test_show_recorded_table_displays_every_row(tmp_path, capsys, monkeypatch):
    import pandas as pd
    from IPython import display as ipd

    keys = {f"k{i}": f"row {i}" for i in range(80)}
    run = {"date": "2026-01-02", "results": {k: {"value": 1.0} for k in keys}}
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "depth.json").write_text(json.dumps(run))
    shown = []
    monkeypatch.setattr(ipd, "display", lambda t: shown.append(t.to_string()
                                                               if pd.get_option("display.max_rows") is None else "cut"))
    results.show_recorded_table("depth", keys, data_dir=tmp_path)
    assert len(shown) == 1 and "row 79" in shown[0]
