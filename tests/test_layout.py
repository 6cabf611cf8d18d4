"""The package layout: kernels (xfmr) never import the tooling (bookkit) or its dependencies."""

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import xfmr

KERNELS = sorted(m.name for m in pkgutil.iter_modules(xfmr.__path__))
TOOLING = {"bookkit", "jupytext", "nbformat", "papermill", "playwright", "yaml", "jupyter_book", "nbval",
           "sphinx", "matplotlib", "seaborn", "torch", "curvlinops"}


def imported_top_levels(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_kernels_are_modules_not_packages():
    assert KERNELS, "xfmr has no modules"
    assert not any(m.ispkg for m in pkgutil.iter_modules(xfmr.__path__)), "keep lib/xfmr/ flat"


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_module_does_not_import_tooling(name):
    path = Path(xfmr.__path__[0]) / f"{name}.py"
    assert not imported_top_levels(path) & TOOLING, f"xfmr.{name} imports {imported_top_levels(path) & TOOLING}"


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_module_imports(name):
    importlib.import_module(f"xfmr.{name}")



def private_names_used_from_other_modules(path: Path, own: str) -> set[str]:
    """``module._name`` uses and ``from xfmr.module import _name`` imports of other xfmr modules."""
    tree = ast.parse(path.read_text())
    used, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xfmr":
            for alias in node.names:
                if node.module == "xfmr":
                    aliases[alias.asname or alias.name] = alias.name
                elif alias.name.startswith("_") and node.module != f"xfmr.{own}":
                    used.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("xfmr."):
                    aliases[alias.asname or alias.name] = alias.name.split(".", 1)[1]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and aliases[node.value.id] != own):
            used.add(f"xfmr.{aliases[node.value.id]}.{node.attr}")
    return used


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_module_uses_no_private_name_of_another(name):
    path = Path(xfmr.__path__[0]) / f"{name}.py"
    assert not private_names_used_from_other_modules(path, name)


def test_private_name_detector_detects():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.py"
        path.write_text("from xfmr.sources import _check\nfrom xfmr import khop as k\nk._find(1)\n")
        assert private_names_used_from_other_modules(path, "m") == {"xfmr.sources._check", "xfmr.khop._find"}


def test_every_kernel_module_is_listed_in_the_package_overview():
    import xfmr

    modules = sorted(p.stem for p in Path(xfmr.__file__).parent.glob("*.py") if p.stem != "__init__")
    missing = [m for m in modules if f":mod:`xfmr.{m}`" not in xfmr.__doc__]
    assert not missing, f"lib/xfmr/__init__.py does not list {missing}"
