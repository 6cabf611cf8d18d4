"""The book's process settings live in bookkit.environment; make, the one-page executor and
the tests use them, so a page run by hand computes what the build computes."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bookkit import environment
from bookkit.book import execute

ROOT = Path(__file__).resolve().parents[2]


def test_settings_fix_the_platform_threads_and_hash_seed_and_cache_under_the_root(tmp_path):
    values = environment.settings(tmp_path)
    assert values["JAX_PLATFORMS"] == "cpu" and values["PYTHONHASHSEED"] == "0"
    assert {values[n] for n in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")} == {"2"}
    assert values["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path.resolve() / "_build" / "jax-cache")


def test_apply_sets_every_value_and_reports_what_it_changed(tmp_path):
    env = {"OMP_NUM_THREADS": "16", "PYTHONHASHSEED": "0", "HOME": "/home/x"}
    changed = environment.apply(tmp_path, env)
    assert env == {"HOME": "/home/x", **environment.settings(tmp_path)}
    assert changed["OMP_NUM_THREADS"] == "16" and changed["JAX_PLATFORMS"] == ""
    assert "PYTHONHASHSEED" not in changed  # already the book's value
    assert environment.apply(tmp_path, env) == {}


def test_the_module_prints_the_settings_for_make():
    out = subprocess.run([sys.executable, "-m", "bookkit.environment", str(ROOT)], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "lib")}).stdout
    assert dict(line.split("=", 1) for line in out.splitlines()) == environment.settings(ROOT)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_exports_exactly_these_settings(tmp_path):
    probe = tmp_path / "probe.mk"
    names = sorted(environment.settings(ROOT))
    probe.write_text("probe:\n" + "".join(f"\t@echo {n}=$${n}\n" for n in names))
    # a clean environment and a Makefile that must not set anything up: only the exports
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
    out = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", str(probe), "probe",
                          f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=env).stdout
    assert dict(line.split("=", 1) for line in out.splitlines()) == environment.settings(ROOT)


def test_the_one_page_executor_gives_its_kernel_the_settings(tmp_path, monkeypatch):
    """``python -m bookkit.book.execute --page ...`` in a shell with other values: the kernel sees
    the book's."""
    for name in environment.settings(tmp_path):
        monkeypatch.setenv(name, "7")  # restored after the test
    monkeypatch.setenv("PYTHONPATH", f"{ROOT / 'lib'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "profiles.yml").write_text("")
    expected = environment.settings(tmp_path)
    (tmp_path / "book" / "page.md").write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "    format_version: 0.13\nkernelspec:\n  name: python3\n  display_name: Python 3\n"
        "  language: python\n---\n\n# Page\n\n```{code-cell} ipython3\n:tags: [parameters]\n\nn = 1\n```\n\n"
        f"```{{code-cell}} ipython3\nimport os\nexpected = {expected!r}\n"
        "assert {k: os.environ.get(k) for k in expected} == expected\n```\n")
    monkeypatch.chdir(tmp_path)
    assert execute.main(["--out", str(tmp_path / "out"), "--page", "book/page.md", "--jobs", "1"]) == 0


def test_the_unit_tests_compile_at_level_zero_and_pages_at_the_default(tmp_path):
    pages, tests = environment.settings(tmp_path), environment.settings(tmp_path, tests=True)
    assert pages["XLA_FLAGS"] == ""  # a shell's XLA options never reach a page
    assert tests == {**pages, "XLA_FLAGS": "--xla_backend_optimization_level=0"}
    assert os.environ["XLA_FLAGS"] == tests["XLA_FLAGS"]  # tests/conftest.py applied it here
