"""The package layout: one subpackage per part of the book plus a core, parts import the core
and earlier parts only, and no kernel imports the tooling (bookkit) or its dependencies."""

import ast
import importlib
import pkgutil
import re
import tempfile
from pathlib import Path

import pytest

import xfmr

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(xfmr.__path__[0])
# In the order of the book: a part may import the core and the parts before it.
PARTS = ["core", "hessian", "experiments", "optimisers", "cross_entropy", "khop", "bayesopt", "tcbo", "causal"]
TOOLING = {"bookkit", "jupytext", "nbformat", "papermill", "playwright", "yaml", "jupyter_book", "nbval",
           "sphinx", "matplotlib", "seaborn", "torch", "curvlinops"}
MODULES = sorted(
    f"{part}.{m.name}" for part in PARTS for m in pkgutil.iter_modules([str(PACKAGE / part)])
)


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def parts_imported(path: Path) -> set[str]:
    return {name.split(".")[1] for name in imported_modules(path)
            if name.startswith("xfmr.") and name.split(".")[1] in PARTS}


def test_the_package_is_one_subpackage_per_part():
    top = {m.name for m in pkgutil.iter_modules(xfmr.__path__)}
    assert top == set(PARTS), f"lib/xfmr/ holds {sorted(top)}; expected the subpackages {PARTS}"
    assert all(m.ispkg for m in pkgutil.iter_modules(xfmr.__path__)), "no flat modules in lib/xfmr/"


@pytest.mark.parametrize("part", PARTS[1:])
def test_a_part_shares_its_name_with_its_pages_and_tests(part):
    assert (ROOT / "book" / part).is_dir(), f"xfmr.{part} has no pages in book/{part}/"
    assert (ROOT / "tests" / part).is_dir(), f"xfmr.{part} has no tests in tests/{part}/"


def test_every_test_folder_is_a_part_or_the_tooling():
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders <= set(PARTS) | {"bookkit"}, f"tests/ has folders {sorted(folders - set(PARTS))} with no part"


@pytest.mark.parametrize("name", MODULES)
def test_kernel_module_imports_only_the_core_and_earlier_parts(name):
    part = name.split(".")[0]
    allowed = set(PARTS[: PARTS.index(part) + 1]) | {"core"}
    later = parts_imported(PACKAGE / part / f"{name.split('.')[1]}.py") - allowed
    assert not later, f"xfmr.{name} (in {part}) imports the later part(s) {sorted(later)}"


@pytest.mark.parametrize("name", MODULES)
def test_kernel_module_does_not_import_tooling(name):
    path = PACKAGE / name.replace(".", "/")
    tops = {m.split(".")[0] for m in imported_modules(path.with_suffix(".py"))}
    assert not tops & TOOLING, f"xfmr.{name} imports {tops & TOOLING}"


def test_the_direction_check_can_fail():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.py"
        path.write_text("from xfmr.causal import dags\nimport xfmr.khop.task\nfrom xfmr.core.train import train\n")
        assert parts_imported(path) == {"causal", "khop", "core"}


@pytest.mark.parametrize("name", MODULES)
def test_kernel_module_imports(name):
    importlib.import_module(f"xfmr.{name}")


def private_names_used_from_other_modules(path: Path, own: str) -> set[str]:
    """``module._name`` uses and ``from xfmr.part.module import _name`` imports of other xfmr modules
    (``own`` is the module's dotted name below ``xfmr``, ``"part.module"``)."""
    tree = ast.parse(path.read_text())
    used, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xfmr":
            below = node.module.split(".", 1)[1] if "." in node.module else ""
            for alias in node.names:
                if below in PARTS:  # from xfmr.part import module
                    aliases[alias.asname or alias.name] = f"{below}.{alias.name}"
                elif alias.name.startswith("_") and below != own:
                    used.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("xfmr.") and alias.asname:
                    aliases[alias.asname] = alias.name.split(".", 1)[1]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and aliases[node.value.id] != own):
            used.add(f"xfmr.{aliases[node.value.id]}.{node.attr}")
    return used


@pytest.mark.parametrize("name", MODULES)
def test_kernel_module_uses_no_private_name_of_another(name):
    path = PACKAGE / f"{name.replace('.', '/')}.py"
    assert not private_names_used_from_other_modules(path, name)


def test_private_name_detector_detects():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.py"
        path.write_text("from xfmr.cross_entropy.sources import _check\nfrom xfmr.khop import task as k\nk._find(1)\n")
        assert private_names_used_from_other_modules(path, "x.m") == {
            "xfmr.cross_entropy.sources._check", "xfmr.khop.task._find"}


@pytest.mark.parametrize("part", PARTS)
def test_every_module_is_listed_in_its_subpackage_docstring(part):
    package = importlib.import_module(f"xfmr.{part}")
    modules = sorted(m.name for m in pkgutil.iter_modules(package.__path__))
    missing = [m for m in modules if f":mod:`{m}`" not in (package.__doc__ or "")]
    assert not missing, f"lib/xfmr/{part}/__init__.py does not list {missing}"
    assert re.search(rf":mod:`xfmr\.{part}`", xfmr.__doc__), f"lib/xfmr/__init__.py does not map xfmr.{part}"
