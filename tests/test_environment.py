"""The pinned environment: requirements.lock and environment.yml agree, and every pin is exact."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def lock_pins() -> list[str]:
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_every_lock_line_is_an_exact_pin():
    pins = lock_pins()
    assert pins, "requirements.lock is empty"
    assert all("==" in p and p.count("==") == 1 for p in pins), [p for p in pins if "==" not in p]
    names = [p.split("==")[0].lower() for p in pins]
    assert len(names) == len(set(names)), "a package is pinned twice"


def test_environment_yml_repeats_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda_pins = sorted(p for p in pip_section if not p.startswith("-e"))
    assert conda_pins == sorted(lock_pins())
    assert "python=3.11" in env["dependencies"]


def test_key_packages_are_pinned():
    names = {p.split("==")[0].lower() for p in lock_pins()}
    for required in ("jupyter-book", "jax", "jaxlib", "numpy", "papermill", "nbval", "jupytext", "sphinx-proof"):
        assert required in names, required
    assert "jupyter-book==1.0.4.post1" in lock_pins()


def test_references_bib_parses_and_every_entry_has_a_title_and_year():
    from pybtex.database import parse_file

    entries = parse_file(ROOT / "references.bib").entries
    assert entries
    incomplete = [key for key, e in entries.items() if not {"title", "year"} <= {f.lower() for f in e.fields}]
    assert not incomplete, incomplete
