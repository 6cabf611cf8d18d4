"""Every third-party import is declared in pyproject.toml, by the part of it that installs it.

- the kernels (``lib/xfmr``) in ``dependencies``;
- the tooling (``lib/bookkit``) and the pages' code cells (``book/**/*.md``) in ``dependencies``
  or the ``book`` extra (the peer benchmark ``bookkit.peers`` also in ``peers``);
- the tests (``tests``) in ``dependencies`` or the ``test`` extra (the tooling's tests
  ``tests/bookkit`` also in ``book``; the peer tests ``tests_peers`` in any of them).

An import is mapped to its distribution with :data:`DISTRIBUTIONS` (``yaml`` -> ``pyyaml``),
else by its own name. Every declared distribution is pinned in a lock file, so that
``make setup`` installs what ``pip install -e '.[book,test]'`` would.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"xfmr", "bookkit", "tests"}
# import name -> distribution name, where the two differ
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "causallearn": "causal-learn",
    "websocket": "websocket-client",
    "mathjax": "django-static-mathjax",
    "IPython": "ipython",
    "PIL": "pillow",
    "curvlinops": "curvlinops-for-pytorch",
    "jupyter_book": "jupyter-book",
}
# Which parts of pyproject.toml may declare the imports of which files (the first matching
# prefix wins).
AREAS = [
    ("lib/xfmr/", ("dependencies",)),
    ("lib/bookkit/peers/", ("dependencies", "book", "peers")),
    ("lib/bookkit/", ("dependencies", "book")),
    ("book/", ("dependencies", "book")),
    ("tests/bookkit/", ("dependencies", "book", "test")),
    ("tests/", ("dependencies", "test")),
    ("tests_peers/", ("dependencies", "book", "test", "peers")),
]
LOCKS = {"dependencies": "requirements.lock", "book": "requirements.lock", "test": "requirements.lock",
         "peers": "requirements-peers.lock"}


def normalise(name: str) -> str:
    """A distribution name in its canonical form (PEP 503): ``PyYAML`` -> ``pyyaml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """``"jax>=0.10.2"`` -> ``"jax"`` (extras and markers dropped)."""
    return normalise(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def declared(pyproject: Path) -> dict[str, set[str]]:
    """``{"dependencies": {...}, <extra>: {...}}``: the distribution names each part declares."""
    project = tomllib.loads(Path(pyproject).read_text())["project"]
    parts = {"dependencies": project.get("dependencies", [])}
    parts.update(project.get("optional-dependencies", {}))
    return {part: {requirement_name(r) for r in requirements} for part, requirements in parts.items()}


def code_cells(page: str) -> str:
    """The code of a MyST page's ``{code-cell}`` blocks, without cell options (``:tags: ...``
    lines or a ``---`` block) and magics."""
    lines, inside, header = [], False, None
    for line in page.splitlines():
        if not inside:
            if line.startswith("```{code-cell}"):
                inside, header = True, "start"
            continue
        if line.startswith("```"):
            inside = False
        elif header == "start" and line.strip() == "---":
            header = "yaml"
        elif header == "yaml":
            header = "done" if line.strip() == "---" else "yaml"
        elif header == "start" and line.startswith(":"):
            continue
        else:
            header = "done"
            lines.append("" if line.lstrip().startswith(("%", "!")) else line)
    return "\n".join(lines)


def top_level_imports(source: str) -> set[str]:
    """The top-level names of every absolute import in ``source`` (at any depth of the tree)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def third_party_imports(path: Path) -> set[str]:
    """The third-party top-level imports of a Python file or a page: not the standard library,
    not this repository's packages, not a module beside the file (a test's helpers)."""
    text = path.read_text()
    names = top_level_imports(code_cells(text) if path.suffix == ".md" else text)
    return {n for n in names if n not in sys.stdlib_module_names and n not in FIRST_PARTY
            and not (path.parent / f"{n}.py").exists()}


def distribution(module: str) -> str:
    return normalise(DISTRIBUTIONS.get(module, module))


def undeclared(files: list[Path], root: Path, parts: dict[str, set[str]]) -> list[str]:
    """``"<file>: <import> (<distribution>) not in <parts>"`` for every import that no part
    allowed for ``file`` (:data:`AREAS`) declares."""
    problems = []
    for path in files:
        relative = path.relative_to(root).as_posix()
        allowed = next((names for prefix, names in AREAS if relative.startswith(prefix)), None)
        if allowed is None:
            raise ValueError(f"files: {relative} lies in no area of AREAS")
        have = set().union(*(parts.get(name, set()) for name in allowed))
        for module in sorted(third_party_imports(path)):
            if distribution(module) not in have:
                problems.append(f"{relative}: {module} ({distribution(module)}) not in {' or '.join(allowed)}")
    return problems


def source_files(root: Path) -> list[Path]:
    files = [*root.glob("lib/**/*.py"), *root.glob("tests/**/*.py"), *root.glob("tests_peers/**/*.py")]
    files += [p for p in root.glob("book/**/*.md") if "```{code-cell}" in p.read_text()]
    return sorted(files)


def lock_pins(path: Path) -> dict[str, str]:
    """``{distribution: version}`` of a lock file's ``name==version`` lines."""
    lines = Path(path).read_text().splitlines()
    pins = (line.split("==") for line in lines if "==" in line and not line.startswith("#"))
    return {normalise(name): version.strip() for name, version in pins}


def requirement_bounds(pyproject: Path, part: str) -> dict[str, str]:
    """``{distribution: version}`` of the ``>=`` or ``==`` bound of each requirement of ``part``."""
    project = tomllib.loads(Path(pyproject).read_text())["project"]
    requirements = project["dependencies"] if part == "dependencies" else project["optional-dependencies"][part]
    return {requirement_name(r): re.search(r"(?:>=|==)\s*([^,;\s]+)", r).group(1) for r in requirements}


def test_every_third_party_import_is_declared():
    files = source_files(ROOT)
    assert len([f for f in files if f.suffix == ".md"]) > 40, "the pages' code cells were not found"
    problems = undeclared(files, ROOT, declared(ROOT / "pyproject.toml"))
    assert not problems, "undeclared imports (add them to pyproject.toml):\n" + "\n".join(problems)


@pytest.mark.parametrize("part", sorted(LOCKS))
def test_every_declared_distribution_is_pinned_at_its_lower_bound(part):
    """`make setup` installs the lock; `pip install -e '.[book,test]'` may not go below it."""
    pins = lock_pins(ROOT / LOCKS[part])
    bounds = requirement_bounds(ROOT / "pyproject.toml", part)
    missing = set(bounds) - set(pins)
    assert not missing, f"pyproject.toml's {part} declares {sorted(missing)}, not pinned in {LOCKS[part]}"
    other = {name: (bound, pins[name]) for name, bound in bounds.items() if bound != pins[name]}
    assert not other, f"{part}: lower bound != the pin of {LOCKS[part]} (bound, pin): {other}"


def test_the_check_finds_an_undeclared_import(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["numpy>=2", "PyYAML"]\n'
        '[project.optional-dependencies]\nbook = ["causal-learn==0.1"]\n')
    kernel = tmp_path / "lib" / "xfmr" / "m.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("import os\nimport numpy as np\nfrom xfmr.core import nn\n"
                      "def f():\n    import yaml\n    from sklearn.linear_model import Lasso\n")
    page = tmp_path / "book" / "p.md"
    page.parent.mkdir()
    page.write_text("# A page\n\n```python\nimport not_a_cell\n```\n\n```{code-cell} ipython3\n"
                    ":tags: [parameters]\n\n%matplotlib inline\nfrom causallearn.search import pc\n```\n\n"
                    "```{code-cell} ipython3\n---\ntags: [hide-input]\n---\nimport scipy\n```\n")
    parts = declared(tmp_path / "pyproject.toml")
    assert parts == {"dependencies": {"numpy", "pyyaml"}, "book": {"causal-learn"}}
    assert undeclared([kernel, page], tmp_path, parts) == [
        "lib/xfmr/m.py: sklearn (scikit-learn) not in dependencies",
        "book/p.md: scipy (scipy) not in dependencies or book",
    ]
    # a kernel may not use what only the book extra declares
    kernel.write_text("import causallearn\n")
    assert undeclared([kernel], tmp_path, parts) == ["lib/xfmr/m.py: causallearn (causal-learn) not in dependencies"]


def test_a_test_helper_beside_the_test_is_first_party(tmp_path):
    (tmp_path / "helpers.py").write_text("")
    test = tmp_path / "test_x.py"
    test.write_text("from helpers import f\nimport torch\n")
    assert third_party_imports(test) == {"torch"}
