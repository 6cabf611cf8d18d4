"""Every code cell of every page is formatted, and no line the reader sees is over 72 characters.

A page's code cells must be what ``ruff format --line-length 72`` makes of them through
jupytext (the page written as a ``py:percent`` script, formatted, read back: what
``jupytext --pipe "ruff format --line-length 72 {}" page.md`` does), and no line of a code cell,
and no line of a library object that a page shows with ``literalinclude :pyobject:``, may be
longer than :data:`LINE_LENGTH` characters: at 1280 px the page's code column shows 72
characters of the monospace font without a scroll bar (``bookkit.book.browser_check`` measures
it). A finding names the page, the cell and the line of the page's markdown.

    python -m bookkit.book.format_check              # every page of _toc.yml; exit 1 on a finding
    python -m bookkit.book.format_check book/khop/task.md
    python -m bookkit.book.format_check --fix        # `make format`: jupytext --pipe on each page
                                                     # that the formatter would change

The formatter runs once for all pages (one ``ruff`` process on a folder of scripts), so the
check takes a few seconds.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bookkit.paths import find_root
from bookkit.book.toc import page_source, toc_pages

LINE_LENGTH = 72
RUFF_VERSION = "0.17.5"
_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")
_INCLUDE = re.compile(r"^(`{3,}|:{3,})\{literalinclude\}\s+(\S+)\s*$")


@dataclass(frozen=True)
class Finding:
    """One problem: ``page`` (relative path), ``line`` (1-based, of the page's markdown)."""

    page: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.message}"


def ruff() -> Path:
    """The ``ruff`` executable beside this interpreter (``requirements.lock`` pins it)."""
    path = Path(sys.executable).parent / "ruff"
    if not path.exists():
        raise FileNotFoundError(f"ruff not found at {path}: run `make setup` (requirements.lock pins ruff=={RUFF_VERSION})")
    return path


def formatter_command(line_length: int = LINE_LENGTH) -> str:
    """The command ``jupytext --pipe`` runs (``{}`` is the temporary script)."""
    return f"{ruff()} format --isolated --line-length {line_length} {{}}"


def is_notebook(path: Path) -> bool:
    """A page with code cells (``{code-cell}`` fences); a plain markdown page has none, and the
    fenced blocks of its text (a shell session, say) are not Python."""
    return any(_FENCE.match(line) for line in path.read_text(encoding="utf-8").splitlines())


def code_cells(path: Path) -> list[str]:
    """The sources of the page's code cells, in order (jupytext's reading of the page)."""
    import jupytext

    notebook = jupytext.read(path)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def cell_lines(text: str) -> list[int]:
    """The 1-based line of the page's markdown where each ``{code-cell}`` fence opens."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if _FENCE.match(line)]


def source_line(page_lines: list[str], fence: int, cell_line: str, index: int) -> int:
    """The page line of line ``index`` (0-based) of the code cell whose fence is at ``fence``."""
    for number in range(fence + 1, len(page_lines) + 1):
        if page_lines[number - 1] == cell_line:
            return number
    return fence + 1 + index


def format_sources(pages: dict[str, Path], line_length: int = LINE_LENGTH) -> dict[str, list[str] | str]:
    """What the formatter makes of each page's code cells: a list of sources, or an error text.

    All pages are written as ``py:percent`` scripts into one temporary folder and formatted by a
    single ``ruff format`` call, then read back with jupytext, as ``jupytext --pipe`` would.
    """
    import jupytext

    result: dict[str, list[str] | str] = {}
    with tempfile.TemporaryDirectory(prefix="format-check-") as tmp:
        scripts: dict[str, Path] = {}
        for i, (name, path) in enumerate(pages.items()):
            if not is_notebook(path):
                continue
            notebook = jupytext.read(path)
            if not any(cell.cell_type == "code" for cell in notebook.cells):
                continue
            script = Path(tmp) / f"page{i:03d}.py"
            script.write_text(jupytext.writes(notebook, "py:percent"), encoding="utf-8")
            scripts[name] = script
        if not scripts:
            return result
        run = subprocess.run(
            [str(ruff()), "format", "--isolated", "--line-length", str(line_length), tmp],
            capture_output=True, text=True,
        )
        errors = run.stderr if run.returncode != 0 else ""
        for name, script in scripts.items():
            if script.name in errors:
                lines = [line for line in errors.splitlines() if script.name in line]
                result[name] = "the formatter cannot parse it: " + lines[0].split(script.name, 1)[-1].lstrip(":")
                continue
            formatted = jupytext.reads(script.read_text(encoding="utf-8"), "py:percent")
            result[name] = [cell.source for cell in formatted.cells if cell.cell_type == "code"]
    return result


def first_difference(before: str, after: str) -> tuple[int, str, str]:
    """The first line (0-based) where two sources differ, with both versions of it."""
    old, new = before.splitlines(), after.splitlines()
    for i in range(max(len(old), len(new))):
        a = old[i] if i < len(old) else ""
        b = new[i] if i < len(new) else ""
        if a != b:
            return i, a, b
    return 0, "", ""


def include_findings(root: Path, name: str, text: str, line_length: int) -> list[Finding]:
    """Lines over ``line_length`` in the library objects shown with ``literalinclude :pyobject:``."""
    findings = []
    page_lines = text.splitlines()
    for number, line in enumerate(page_lines, start=1):
        match = _INCLUDE.match(line)
        if not match:
            continue
        options = {}
        for option in page_lines[number:number + 10]:
            if not option.startswith(":"):
                break
            key, _, value = option[1:].partition(":")
            options[key.strip()] = value.strip()
        if "pyobject" not in options:
            continue
        target = match.group(2)
        path = root / target.lstrip("/") if target.startswith("/") else (root / name).parent / target
        if not path.exists():
            findings.append(Finding(name, number, f"literalinclude of a missing file {target}"))
            continue
        source = path.read_text(encoding="utf-8")
        node = _find_object(ast.parse(source), options["pyobject"])
        if node is None:
            findings.append(Finding(name, number, f"{target} has no object {options['pyobject']}"))
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        lines = source.splitlines()[start - 1:node.end_lineno]
        for offset, shown in enumerate(lines):
            if len(shown) > line_length:
                findings.append(Finding(
                    name, number,
                    f"literalinclude {target} :pyobject: {options['pyobject']}: line {start + offset} of "
                    f"{target} is {len(shown)} characters (> {line_length}): {shown.strip()[:60]}"))
                break
    return findings


def _find_object(tree: ast.Module, dotted: str):
    """The class or function ``A`` or ``A.b`` of a module, as Sphinx's ``:pyobject:`` finds it."""
    nodes = tree.body
    found = None
    for part in dotted.split("."):
        found = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.name == part), None)
        if found is None:
            return None
        nodes = found.body
    return found


def check_pages(root: Path, pages: dict[str, Path], line_length: int = LINE_LENGTH) -> list[Finding]:
    """Every finding on the given pages (name -> markdown path), in page order."""
    formatted = format_sources(pages, line_length)
    findings: list[Finding] = []
    for name, path in pages.items():
        text = path.read_text(encoding="utf-8")
        page_lines = text.splitlines()
        fences = cell_lines(text)
        cells = code_cells(path) if name in formatted else []
        after = formatted.get(name, [])
        if isinstance(after, str):
            findings.append(Finding(name, 1, after))
            after = cells
        elif len(after) != len(cells):
            findings.append(Finding(name, 1, f"the formatter changes the number of code cells "
                                             f"({len(cells)} -> {len(after)})"))
            after = cells
        for k, (source, new) in enumerate(zip(cells, after)):
            fence = fences[k] if k < len(fences) else 1
            lines = source.splitlines()
            if source != new:
                i, old_line, new_line = first_difference(source, new)
                where = source_line(page_lines, fence, old_line, i) if old_line else fence
                findings.append(Finding(
                    name, where, f"code cell {k + 1} is not formatted (`make format`): "
                                 f"{old_line.strip()[:50]!r} -> {new_line.strip()[:50]!r}"))
            for i, line in enumerate(lines):
                if len(line) > line_length:
                    findings.append(Finding(
                        name, source_line(page_lines, fence, line, i),
                        f"code cell {k + 1}, line {i + 1}: {len(line)} characters (> {line_length}): "
                        f"{line.strip()[:50]}"))
        findings += include_findings(root, name, text, line_length)
    return findings


def book_pages(root: Path) -> dict[str, Path]:
    """Every markdown page of ``_toc.yml``: name (``book/x.md``) -> path."""
    pages = {}
    for page in toc_pages(root / "_toc.yml"):
        source = page_source(root, page)
        if source.suffix == ".md":
            pages[source.relative_to(root).as_posix()] = source
    return pages


def fix(pages: dict[str, Path], line_length: int = LINE_LENGTH) -> list[str]:
    """Run ``jupytext --pipe`` with the formatter on each page it would change; their names."""
    formatted = format_sources(pages, line_length)
    changed = []
    jupytext_cli = Path(sys.executable).parent / "jupytext"
    for name, path in pages.items():
        after = formatted.get(name)
        if after is None or isinstance(after, str) or after == code_cells(path):
            continue
        subprocess.run([str(jupytext_cli), "--quiet", "--pipe", formatter_command(line_length), str(path)],
                       check=True)
        changed.append(name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", type=Path, help="pages (default: every page of _toc.yml)")
    parser.add_argument("--fix", action="store_true", help="apply the formatter to the pages it would change")
    args = parser.parse_args(argv)
    root = find_root(Path.cwd())
    if args.pages:
        pages = {p.resolve().relative_to(root).as_posix(): p.resolve() for p in args.pages}
    else:
        pages = book_pages(root)
    if args.fix:
        changed = fix(pages)
        print(f"format: {len(changed)} of {len(pages)} pages reformatted"
              + "".join(f"\n  {name}" for name in changed))
    findings = check_pages(root, pages)
    for finding in findings:
        print(f"format check: {finding}", file=sys.stderr)
    n_pages = len(pages)
    print(f"format check: {n_pages} pages, {len(findings)} findings"
          + (" (lines over 72 characters are shortened by hand; the rest: `make format`)" if findings else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
