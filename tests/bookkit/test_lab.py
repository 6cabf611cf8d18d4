"""`make lab`: a headless JupyterLab opens a page's markdown as a notebook and runs it in the book's kernel."""

from pathlib import Path

import pytest

from bookkit.book.lab import code_to_run, headless_lab, page_as_notebook, run_in_kernel
from bookkit.book.toc import profile_overrides

ROOT = Path(__file__).resolve().parents[2]
PAGE = "book/hessian/single_layer.md"


def test_profile_assignments_follow_the_parameters_cell():
    notebook = {"cells": [
        {"cell_type": "markdown", "source": "# title", "metadata": {}},
        {"cell_type": "code", "source": "n = 10", "metadata": {"tags": ["parameters"]}},
        {"cell_type": "code", "source": ["print(", "n)"], "metadata": {}},
    ]}
    assert code_to_run(notebook, {"n": 3, "name": "x"}) == ["n = 10", "n = 3\nname = 'x'", "print(n)"]
    assert code_to_run(notebook, {}) == ["n = 10", "print(n)"]


@pytest.fixture(scope="module")
def lab():
    with headless_lab(ROOT) as server:
        yield server


def test_a_page_opens_as_a_notebook_and_runs_in_the_lab_kernel(lab):
    base, token = lab
    notebook = page_as_notebook(base, token, PAGE)
    cells = code_to_run(notebook, profile_overrides(ROOT / "book" / "profiles.yml", PAGE[:-3], "ci"))
    assert len(cells) >= 5
    assert run_in_kernel(base, token, cells) == len(cells)


def test_an_error_in_a_cell_fails_the_check(lab):
    base, token = lab
    with pytest.raises(RuntimeError, match="code cell 1 failed.*ZeroDivisionError"):
        run_in_kernel(base, token, ["x = 1", "x / 0", "never = 1"])
