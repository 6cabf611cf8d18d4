"""Read the book's table of contents and profiles: which pages exist, in which order, and
which parameters each execution profile overrides.

    python -m bookkit.book.toc book/experiments    # its pages in reading order, one per line

The book's profiles (:data:`PROFILES`) apply to every page. A page may define profiles of its
own in ``book/profiles.yml`` (``khop/training: {khop-large: {...}}``): each overrides that
page's parameters cell and runs only on pages that define it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

from bookkit.paths import find_root

PROFILES = ("ci", "default", "paper")
_PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def toc_pages(toc_path: Path) -> list[str]:
    """Every page of ``_toc.yml`` in reading order, as paths without extension (``book/...``)."""
    toc = yaml.safe_load(Path(toc_path).read_text())
    pages: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if "file" in node:
                pages.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    pages.append(toc["root"])
    walk(toc)
    return pages


def page_source(root: Path, page: str) -> Path:
    """The source file of a toc entry: ``book/x`` -> ``book/x.md`` (or ``.ipynb``)."""
    for ext in (".md", ".ipynb"):
        path = root / f"{page}{ext}"
        if path.exists():
            return path
    raise FileNotFoundError(f"page {page!r} of _toc.yml has no source file {page}.md or {page}.ipynb")


def pages_under(pages: list[str], folder: str) -> list[str]:
    """The toc entries of ``pages`` that lie under ``folder`` (``book/experiments``), in order."""
    prefix = folder.rstrip("/") + "/"
    return [page for page in pages if page.startswith(prefix)]


def page_profiles(profiles_path: Path) -> dict[str, list[str]]:
    """The pages' own profiles: ``{name: [toc entry, ...]}`` for every profile that is not one of
    :data:`PROFILES`. A ValueError names a profile whose name is not lower-case letters, digits,
    ``-`` or ``_`` (it names the folder of a kept run)."""
    table = yaml.safe_load(Path(profiles_path).read_text()) or {}
    found: dict[str, list[str]] = {}
    for key, entry in table.items():
        for name in entry or {}:
            if not _PROFILE_NAME.fullmatch(str(name)):
                raise ValueError(f"{profiles_path}: page {key!r} names the profile {name!r}; a profile "
                                 "name is lower-case letters, digits, '-' or '_'")
            if name not in PROFILES:
                found.setdefault(name, []).append(f"book/{key}")
    return found


def profile_overrides(profiles_path: Path, page: str, profile: str) -> dict:
    """The parameters that ``profile`` injects into ``page`` (``{}`` for the default profile).

    ``page`` is a toc entry (``book/hessian/single_layer``); the profiles file is keyed by the
    path under ``book/``. ``profile`` is one of :data:`PROFILES` or a profile of ``page``'s own.
    """
    if profile == "default":
        return {}
    table = yaml.safe_load(Path(profiles_path).read_text()) or {}
    key = page.removeprefix("book/")
    entry = table.get(key) or {}
    if profile not in PROFILES and profile not in entry:
        own = sorted(page_profiles(profiles_path))
        raise ValueError(f"profile must be one of {PROFILES} or a page's own ({', '.join(own) or 'none'}) "
                         f"defined for {key!r} in {profiles_path}, got {profile!r}")
    return dict(entry.get(profile) or {})


_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=]+)?=")


def parameter_names(source: str) -> set[str]:
    """Names assigned at the top level of a parameters cell's source."""
    return {m.group(1) for line in source.splitlines() if (m := _ASSIGNMENT.match(line))}


def page_defaults(root: Path, page: str) -> dict:
    """The values that a page's parameters cell assigns (its default profile), from running that
    cell alone. ``page`` is a toc entry (``book/bayesopt/pfn``). A benchmark or a test sized "as on
    page P" reads its sizes here instead of repeating them."""
    import jupytext

    source = page_source(Path(root), page)
    cells = [c for c in jupytext.read(source).cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"page: {source} has {len(cells)} cells tagged 'parameters', expected 1")
    values: dict = {}
    exec(cells[0].source, {"__builtins__": {}}, values)  # literals only: no names, no calls
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="a folder of the book (book/experiments): print its pages' sources")
    args = parser.parse_args(argv)
    root = find_root(Path.cwd())
    pages = pages_under(toc_pages(root / "_toc.yml"), args.folder)
    if not pages:
        print(f"toc: no page of _toc.yml lies under {args.folder}", file=sys.stderr)
        return 1
    for page in pages:
        print(page_source(root, page).relative_to(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
