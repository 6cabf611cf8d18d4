"""The benchmarks' one timing helper, their isolated runs, and what their code may not do."""

import ast
import json
import os
import time
from datetime import date
from pathlib import Path

import pytest

import bookkit.bench
from bookkit.bench.isolated import peak_mib, run_isolated
from bookkit.bench.timing import Timing, measure, measure_once

BENCH = Path(bookkit.bench.__path__[0])


def test_measure_takes_the_median_of_the_timed_calls_after_the_first():
    pauses = [0.12, 0.0, 0.06, 0.3]  # call(0) is the first call, apart from the timed ones
    timing = measure(lambda i: time.sleep(pauses[i]), repeats=3)
    assert 0.06 <= timing.seconds < 0.25, timing  # the middle one of 0.0, 0.06, 0.3
    assert 0.12 <= timing.first_seconds < 0.25, timing
    assert timing.statistic == "median of 3 calls after a first one (compilation excluded)"
    assert timing.fields() == {"seconds": timing.seconds, "cpu_seconds": timing.cpu_seconds,
                               "statistic": timing.statistic}


def _spin(cpu_seconds: float) -> None:
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def test_cpu_time_counts_work_not_waiting():
    busy = measure(lambda i: _spin(0.05), repeats=1, first_call=False)
    idle = measure(lambda i: time.sleep(0.05), repeats=1, first_call=False)
    assert busy.cpu_seconds >= 0.05 and idle.cpu_seconds < 0.02, (busy, idle)
    assert idle.seconds >= 0.05 and idle.first_seconds is None
    assert idle.statistic == "one call (compilation included)"


def test_measure_once_returns_the_result_and_sums_need_one_statistic():
    timing, value = measure_once(lambda: sum(range(10)))
    assert value == 45 and timing.statistic == "one call (compilation included)"
    total = timing.plus(Timing(1.0, 0.5, timing.statistic))
    assert total.seconds == pytest.approx(timing.seconds + 1.0) and total.cpu_seconds == pytest.approx(timing.cpu_seconds + 0.5)
    with pytest.raises(ValueError, match="other"):
        timing.plus(Timing(1.0, 0.5, "median of 5 calls"))
    with pytest.raises(ValueError, match="repeats"):
        measure(lambda i: None, repeats=0)


def test_an_isolated_run_is_a_fresh_process_with_its_own_peak_memory():
    ballast = bytearray(200 * 2**20)  # this process's peak is at least 200 MiB now
    assert run_isolated(os.getpid) != os.getpid()
    assert run_isolated(peak_mib) < 150 < peak_mib()
    del ballast


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            parts = []
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            names.add(".".join(reversed(parts)))
    return names


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_a_benchmark_leaves_settings_alone_and_runs_no_code_from_strings(path):
    tree = ast.parse(path.read_text())
    calls = _calls(tree)
    assert "jax.config.update" not in calls, "change a JAX setting inside `with jax.enable_x64(...)`"
    assert not calls & {"exec", "eval", "compile"}, calls
    if path.name != "isolated.py":  # the one fresh process, started with a pickled function
        assert not calls & {"subprocess.run", "subprocess.Popen"}, calls
    if path.name not in ("__main__.py", "timing.py", "isolated.py"):
        timers = {"time.perf_counter", "time.process_time", "time.time"} & calls
        assert not timers, f"time with bookkit.bench.timing, not {timers}"


def test_the_settings_check_detects():
    tree = ast.parse("import jax\njax.config.update('jax_enable_x64', True)\nexec('x = 1')\n")
    assert {"jax.config.update", "exec"} <= _calls(tree)


def test_only_keeps_the_other_groups_rows_with_the_date_they_were_measured(tmp_path, monkeypatch):
    from bookkit.bench import __main__ as bench_main

    out = tmp_path / "benchmarks.json"
    out.write_text(json.dumps({"date": "2020-01-02", "machine": {}, "rows": [
        {"group": "old", "benchmark": "undated"},
        {"group": "old", "date": "2019-05-06", "benchmark": "dated"},
        {"group": "new", "benchmark": "replaced"}]}))

    def bench_one():
        return [{"benchmark": "fresh"}]

    monkeypatch.setattr(bench_main, "discover", lambda only: [("new", bench_one)])
    assert bench_main.main(["--out", str(out), "--only", "new"]) == 0
    rows = {r["benchmark"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"undated", "dated", "fresh"}
    assert rows["undated"]["date"] == "2020-01-02" and rows["dated"]["date"] == "2019-05-06"
    assert rows["fresh"]["date"] == date.today().isoformat()
