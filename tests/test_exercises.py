"""Every part of the book ends with an exercises page whose solutions are hidden and checked.

A part is the group of ``_toc.yml`` captions that start with the same "Part <numeral>:" (Part I
has three captions). The last page of the group's last caption must be ``book/<dir>/exercises``
with at least three ``exercise`` directives, one hidden (``:class: dropdown``) solution per
exercise, and an ``assert`` in every code cell that sits inside a gated solution
(``solution-start`` ... ``solution-end``), so that a solution that computes something cannot
go stale without failing the build.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MIN_EXERCISES = 3

FENCE = re.compile(r"^(:{3,}|`{3,})\{(?P<name>[a-z-]+)\}\s*(?P<arg>.*)$")
CODE_CELL = re.compile(r"^```\{code-cell\}")
OPTION = re.compile(r"^:[a-z-]+:")


def parts() -> dict[str, list[str]]:
    """Part name ("Part I") -> its pages in order, from ``_toc.yml``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    grouped: dict[str, list[str]] = {}
    for part in toc["parts"]:
        match = re.match(r"(Part [IVXLC]+):", part.get("caption", ""))
        if match:
            grouped.setdefault(match.group(1), []).extend(ch["file"] for ch in part["chapters"])
    return grouped


def directives(text: str) -> list[tuple[str, str, list[str]]]:
    """``(name, argument, option lines)`` of every fenced directive, in order."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = FENCE.match(line.strip())
        if match and match.group("name") != "code-cell":
            options = []
            for following in lines[i + 1:]:
                if not OPTION.match(following.strip()):
                    break
                options.append(following.strip())
            found.append((match.group("name"), match.group("arg").strip(), options))
    return found


def gated_solution_cells(text: str) -> list[str]:
    """Source of each code cell between a ``solution-start`` and its ``solution-end``."""
    cells, inside, current = [], False, None
    for line in text.splitlines():
        stripped = line.strip()
        match = FENCE.match(stripped)
        if match and match.group("name") == "solution-start":
            inside = True
        elif match and match.group("name") == "solution-end":
            inside = False
        elif inside and CODE_CELL.match(stripped):
            current = []
        elif current is not None and stripped.startswith("```"):
            cells.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return cells


def test_every_part_is_found():
    assert list(parts()) == ["Part I", "Part II", "Part III", "Part IV", "Part V", "Part VI"]


@pytest.mark.parametrize("part", list(parts()))
def test_part_ends_with_exercises(part):
    last = parts()[part][-1]
    assert last.endswith("/exercises"), f"{part} ends with {last}, not an exercises page"
    text = (ROOT / f"{last}.md").read_text()
    found = directives(text)
    exercises = [opts for name, _, opts in found if name == "exercise"]
    labels = [o.split(":", 2)[2].strip() for opts in exercises for o in opts if o.startswith(":label:")]
    assert len(exercises) >= MIN_EXERCISES, f"{last}: {len(exercises)} exercises, want >= {MIN_EXERCISES}"
    assert len(labels) == len(exercises), f"{last}: every exercise needs a :label:"
    solutions = [(arg, opts) for name, arg, opts in found if name in ("solution", "solution-start")]
    assert sorted(arg for arg, _ in solutions) == sorted(labels), f"{last}: one solution per exercise"
    for arg, opts in solutions:
        assert ":class: dropdown" in opts, f"{last}: the solution to {arg} is not hidden (:class: dropdown)"
    n_start = sum(name == "solution-start" for name, _, _ in found)
    assert n_start == sum(name == "solution-end" for name, _, _ in found), f"{last}: unbalanced gated solutions"


@pytest.mark.parametrize("part", list(parts()))
def test_solutions_that_compute_assert(part):
    last = parts()[part][-1]
    text = (ROOT / f"{last}.md").read_text()
    cells = gated_solution_cells(text)
    assert cells, f"{last}: no solution computes anything"
    for cell in cells:
        assert re.search(r"^\s*assert\b", cell, re.M), f"{last}: a solution cell has no assert:\n{cell}"


def test_helpers_catch_a_missing_assert():
    page = "\n".join([
        ":::{solution-start} ex-a", ":class: dropdown", ":::", "```{code-cell} ipython3", "x = 1",
        "```", ":::{solution-end}", ":::", "```{code-cell} ipython3", "assert True", "```",
    ])
    assert gated_solution_cells(page) == ["x = 1"]
    assert [d[0] for d in directives(page)] == ["solution-start", "solution-end"]
