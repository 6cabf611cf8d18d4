"""Render the HTML book from an executed notebook tree, with execution off.

The executed tree (``_build/nb/<profile>``, written by :mod:`bookkit.book.execute`) mirrors the
repository root. This step adds what Sphinx needs beside the notebooks (``_config.yml``,
``_toc.yml``, ``references.bib``, a link to ``lib/`` for ``literalinclude``, and MathJax in
``_extra/_static/``) and runs ``jupyter-book build --all -W -n --keep-going`` from scratch, so that
any warning fails the build and no page is executed twice.

    python -m bookkit.book.render --notebooks _build/nb/default --site-root .
    # -> ./_build/html
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bookkit.paths import find_root
from bookkit.book.markdown_sources import EXTRA_SOURCES
from bookkit.book.toc import page_source, toc_pages

ROOT_FILES = ("_config.yml", "_toc.yml", "references.bib")


def mathjax_dir() -> Path:
    """The MathJax 3 ``es5`` folder shipped by the pinned ``django-static-mathjax`` package."""
    import mathjax  # the package's import name

    folder = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (folder / "tex-chtml.js").exists():
        raise FileNotFoundError(f"MathJax 3 not found at {folder}")
    return folder


def prepare(root: Path, notebooks: Path) -> None:
    """Put the configuration, bibliography, library link and MathJax beside the notebooks."""
    if not (notebooks / "book").is_dir():
        raise FileNotFoundError(f"{notebooks} holds no executed book/ tree: run `make execute` first")
    for name in ROOT_FILES:
        shutil.copy2(root / name, notebooks / name)
    lib_link = notebooks / "lib"
    if lib_link.is_symlink() or lib_link.exists():
        lib_link.unlink()
    lib_link.symlink_to(os.path.relpath(root / "lib", notebooks), target_is_directory=True)
    static = notebooks / "_extra" / "_static" / "mathjax"
    if static.exists():
        shutil.rmtree(static)
    shutil.copytree(mathjax_dir(), static)
    copy_markdown_sources(root, notebooks)


def copy_markdown_sources(root: Path, notebooks: Path) -> None:
    """Each page's markdown source to ``_extra/_sources/<page>.md`` (the site's download menu)."""
    target = notebooks / EXTRA_SOURCES
    if target.exists():
        shutil.rmtree(target)
    for page in toc_pages(root / "_toc.yml"):
        source = page_source(root, page)
        if source.suffix == ".md":
            (target / page).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / f"{page}.md")


def build(notebooks: Path, site_root: Path) -> int:
    """Run jupyter-book from scratch; the site lands in ``site_root/_build/html``."""
    build_dir = site_root / "_build"
    for stale in (build_dir / "html", build_dir / ".doctrees", build_dir / "jupyter_execute"):
        if stale.exists():
            shutil.rmtree(stale)
    command = [
        str(Path(sys.executable).parent / "jupyter-book"), "build", str(notebooks),
        "--path-output", str(site_root), "--builder", "html", "--all", "-W", "-n", "--keep-going",
    ]
    print(" ".join(command), flush=True)
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", type=Path, required=True, help="executed tree, e.g. _build/nb/default")
    parser.add_argument("--site-root", type=Path, default=Path("."), help="the site goes to SITE_ROOT/_build/html")
    args = parser.parse_args(argv)
    root = find_root(Path.cwd())
    notebooks = args.notebooks.resolve()
    prepare(root, notebooks)
    code = build(notebooks, args.site_root.resolve())
    if code != 0:
        print(f"render: the book build failed (exit {code}); see the warnings above", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
