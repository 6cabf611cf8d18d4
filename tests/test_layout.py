"""The package layout: kernels (xfmr) never import the tooling (bookkit) or its dependencies."""

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import xfmr

KERNELS = sorted(m.name for m in pkgutil.iter_modules(xfmr.__path__))
TOOLING = {"bookkit", "jupytext", "nbformat", "papermill", "playwright", "yaml", "jupyter_book", "nbval",
           "sphinx", "matplotlib", "seaborn"}


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

