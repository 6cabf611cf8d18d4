"""Execute the book's pages into a separate tree that mirrors ``book/``.

Every page of ``_toc.yml`` that is a notebook (a jupytext MyST file with a kernelspec) is
converted with jupytext, given the parameters of the chosen profile by papermill, executed
with the ``python3`` kernel in its own folder of the output tree, and saved as ``.ipynb``.
Pages without code are copied. Pages record their key results with
``bookkit.results.record`` into ``results/<page>.json`` of the output tree (whose root holds the
marker file ``bookkit.results.MARKER``). The pages of ``LAST_PAGES`` run after all others, in
that order: the claims page reads every page's results, and the execution-statistics page
reads the runtimes of this run from ``stats.json`` at the root of the output tree.

    python -m bookkit.book.execute --profile ci --out _build/nb/ci
    python -m bookkit.book.execute --profile ci --out /tmp/nb --page book/hessian/single_layer.md
    python -m bookkit.book.execute --profile paper --out _build/nb/paper-part1 \
        --page book/experiments/growth_rates.md ... --record book/_data/paper_part1.json
    python -m bookkit.book.execute --profile khop-large --out _build/nb/khop-large \
        --page book/khop/training.md --keep-results book/_data/recorded

A profile is one of the book's (``ci``, ``default``, ``paper``) or a page's own, defined for
that page in ``book/profiles.yml`` (``khop-large``), which runs only with ``--page``. The
executor sets the book's process settings (:mod:`bookkit.environment`: CPU JAX, thread
counts, hash seed, compilation cache) before it starts a kernel, so a page executed here
gives the numbers of ``make book``.

``--record FILE`` keeps the runtimes of a successful run (profile, pages, total, date, CPU
count) in a JSON file of the repository, for the execution page to report a run that is too
long to repeat on every build (`make record-paper`). ``--keep-results DIR`` keeps the recorded
results of a successful run's pages, with the date, in ``DIR/<profile>/<page>.json``
(``book/_data/recorded`` for `make record-paper`), where the pages show them; a page's own
profile keeps them with its parameters, under the profile's name.

Exits non-zero, naming every page that failed, if any page raises.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import papermill
import yaml
from jupyter_client.manager import AsyncKernelManager
from traitlets import default

from bookkit import environment, results
from bookkit.book.toc import PROFILES, page_profiles, page_source, parameter_names, profile_overrides, toc_pages
from bookkit.paths import ROOT_ENV, find_root

STATS_PAGE = "book/about/execution"
CLAIMS_PAGE = "book/about/claims"
# Pages that read what the others wrote, executed after them in this order.
LAST_PAGES = (CLAIMS_PAGE, STATS_PAGE)
# Kernels draw figures as PNG outputs, whatever backend the calling shell chose (Agg would
# silently drop every figure).
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
STATS_FILE = "stats.json"


class IPCKernelManager(AsyncKernelManager):
    """A kernel reached over Unix sockets instead of TCP ports.

    Over TCP each kernel picks five free ports when it starts, and two kernels started at once
    can pick the same one (the kernel then dies with ZMQError 'Address already in use' and the
    page fails after the 60 s start timeout: seen with two pages started together). Here the
    sockets are files ``<tmp>/bookkit-kernel-<uuid>-<n>``, which cannot collide and which the
    manager removes when the kernel shuts down.
    """

    @default("transport")
    def _default_transport(self) -> str:
        return "ipc"

    @default("ip")
    def _default_ip(self) -> str:
        return os.path.join(tempfile.gettempdir(), f"bookkit-kernel-{uuid.uuid4().hex}")


def is_notebook(source: Path) -> bool:
    """A page is executable when jupytext finds a kernelspec in it."""
    if source.suffix == ".ipynb":
        return True
    return "kernelspec" in jupytext.read(source).metadata


def parameters_cell(nb) -> nbformat.NotebookNode | None:
    """The cell tagged ``parameters`` (at most one is allowed)."""
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) > 1:
        raise ValueError("a page may have only one cell tagged 'parameters'")
    return cells[0] if cells else None


def execute_page(root: Path, page: str, out: Path, profile: str, overrides: dict | None = None) -> float:
    """Execute one notebook page into ``out``; return its runtime in seconds.

    ``overrides`` (``--set name=value``) are applied on top of the profile's parameters.
    """
    source = page_source(root, page)
    nb = jupytext.read(source)
    params = {**profile_overrides(root / "book" / "profiles.yml", page, profile), **(overrides or {})}
    cell = parameters_cell(nb)
    if any(c.cell_type == "code" for c in nb.cells) and cell is None:
        raise ValueError(f"{source}: an executable page needs a code cell tagged 'parameters'")
    unknown = set(params) - parameter_names(cell.source if cell else "")
    if unknown:
        raise ValueError(f"{source}: profile {profile!r} sets {sorted(unknown)}, not in the parameters cell")
    nb.metadata["xfmr"] = {"profile": profile, "source": str(source.relative_to(root))}
    (out / results.MARKER).write_text(profile)
    (out / results.RESULTS_DIR / f"{Path(page).name}.json").unlink(missing_ok=True)  # no stale results
    target = out / f"{page}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    start = time.perf_counter()
    papermill.execute_notebook(
        str(target),
        str(target),
        parameters=params,
        kernel_name="python3",
        kernel_manager_class=IPCKernelManager,
        cwd=str(target.parent),
        progress_bar=False,
        request_save_on_cell_execute=False,
    )
    seconds = time.perf_counter() - start
    format_injected_parameters(target)
    missing = cells_missing_figures(nbformat.read(target, as_version=4))
    if missing:
        raise RuntimeError(f"{source}: code cell(s) {missing} call plt.show() but produced no PNG figure")
    return seconds


def format_injected_parameters(target: Path) -> None:
    """Format the cell papermill injected (the profile's parameters, one assignment a line)
    as the pages' own code is formatted (ruff, :data:`format_check.LINE_LENGTH` columns), so
    that a long value (a dict, a list) is broken over lines the page's code column shows."""
    from bookkit.book import format_check

    nb = nbformat.read(target, as_version=4)
    cells = [c for c in nb.cells if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        return
    for cell in cells:
        cell.source = subprocess.run(
            [str(format_check.ruff()), "format", "--isolated", "--line-length",
             str(format_check.LINE_LENGTH), "-"],
            input=cell.source, capture_output=True, text=True, check=True).stdout.rstrip("\n")
    nbformat.write(nb, target)


def cells_missing_figures(nb) -> list[int]:
    """Indices of code cells that show a figure (``plt.show()``) but have no PNG output."""
    missing = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "plt.show()" in cell.source:
            if not any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
                missing.append(index)
    return missing


def copy_assets(root: Path, out: Path) -> None:
    """Copy everything under ``book/`` that is not a page source (data, images)."""
    for path in (root / "book").rglob("*"):
        if path.is_file() and path.suffix not in (".md", ".ipynb") and path.name != "profiles.yml":
            dest = out / path.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)


DATA_DIR = "book/_data"  # data the pages read (and notes on how it was recorded), no pages


def orphan_pages(root: Path, pages: list[str]) -> list[str]:
    """Page sources under ``book/`` (outside :data:`DATA_DIR`) that ``_toc.yml`` does not list."""
    listed = {f"{p}.md" for p in pages} | {f"{p}.ipynb" for p in pages}
    sources = (p.relative_to(root).as_posix() for p in (root / "book").rglob("*.md"))
    return sorted(s for s in sources if s not in listed and not s.startswith(f"{DATA_DIR}/"))


def write_runtimes(path: Path, profile: str, pages: list[dict], **extra) -> None:
    """The runtimes of a run as JSON: ``{"profile", **extra, "pages": [{page, seconds, status}]}``."""
    path.write_text(json.dumps({"profile": profile, **extra, "pages": pages}, indent=1) + "\n")


def execute_pages(root: Path, pages: list[str], out: Path, profile: str, jobs: int,
                  overrides: dict | None = None) -> list[dict]:
    """Execute ``pages`` with up to ``jobs`` kernels at once (one kernel per page).

    Returns one ``{page, seconds, status}`` row per page, in the order of ``pages``; a page that
    raises is reported on stderr and marked ``failed`` while the others go on.
    """
    def one(page: str) -> dict:
        print(f"execute [{profile}] {page} ...", flush=True)
        try:
            seconds = execute_page(root, page, out, profile, overrides)
        except Exception as error:  # report every failing page, then fail
            print(f"execute: FAILED {page}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            return {"page": page, "seconds": None, "status": "failed"}
        print(f"execute [{profile}] {page}: {seconds:.1f} s", flush=True)
        return {"page": page, "seconds": round(seconds, 2), "status": "ok"}

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, pages))


def run(root: Path, out: Path, profile: str, only: list[str] | None = None,
        record: Path | None = None, jobs: int = 2, keep_results: Path | None = None,
        overrides: dict | None = None, label: str | None = None) -> int:
    """Execute the pages (all of ``_toc.yml``, or ``only``); 0 on success, 1 if a page failed.

    ``overrides`` set page parameters on top of the profile (only with ``only``: they would
    not fit every page); ``label`` names the recording under ``keep_results`` (default: the
    profile), so that a run with overrides does not pass for the profile's own.
    """
    if overrides and not only:
        print("execute: --set needs --page (parameters are per page)", file=sys.stderr)
        return 2
    own_pages = None if profile in PROFILES else page_profiles(root / "book" / "profiles.yml").get(profile)
    if profile not in PROFILES and not own_pages:
        print(f"execute: profile {profile!r} is neither one of {PROFILES} nor a page's own in book/profiles.yml",
              file=sys.stderr)
        return 2
    if own_pages is not None and not only:
        print(f"execute: profile {profile!r} is a page's own ({', '.join(own_pages)}): pass --page", file=sys.stderr)
        return 2
    pages = toc_pages(root / "_toc.yml")
    if only:
        wanted = [str(Path(p).with_suffix("")) for p in only]
        missing = set(wanted) - set(pages)
        if missing:
            print(f"execute: not in _toc.yml: {sorted(missing)}", file=sys.stderr)
            return 2
        if own_pages is not None and set(wanted) - set(own_pages):
            print(f"execute: profile {profile!r} is not defined for {sorted(set(wanted) - set(own_pages))}",
                  file=sys.stderr)
            return 2
        pages = [p for p in pages if p in wanted]
    else:
        orphans = orphan_pages(root, pages)
        if orphans:
            print(f"execute: pages not listed in _toc.yml: {orphans}", file=sys.stderr)
            return 2
        if out.exists():
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / results.MARKER).write_text(profile)
    copy_assets(root, out)

    for page in pages:  # pages without code are copied as they are
        source = page_source(root, page)
        if not is_notebook(source):
            dest = out / source.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
    notebooks = [p for p in pages if p not in LAST_PAGES and is_notebook(page_source(root, p))]
    total_start = time.perf_counter()
    stats = execute_pages(root, notebooks, out, profile, jobs, overrides)
    for last in LAST_PAGES:  # they read what the pages before them wrote
        if last not in pages:
            continue
        if last == STATS_PAGE:
            write_runtimes(out / STATS_FILE, profile, stats)
        stats += execute_pages(root, [last], out, profile, 1, overrides)
    failures = [s["page"] for s in stats if s["status"] != "ok"]
    total = time.perf_counter() - total_start
    if not only and STATS_PAGE not in pages:
        write_runtimes(out / STATS_FILE, profile, stats)
    print(f"execute [{profile}]: {len(stats)} pages in {total:.1f} s", flush=True)
    if keep_results is not None:  # a page's results are kept when that page ran to its end
        passed = [s["page"] for s in stats if s["status"] == "ok"]
        kept = []
        for page in passed:  # a page's own profile is kept with its parameters
            own = {} if own_pages is None else profile_overrides(root / "book" / "profiles.yml", page, profile)
            kept += results.keep_results(out / results.RESULTS_DIR, keep_results, profile, [page],
                                         time.strftime("%Y-%m-%d"), label=label,
                                         overrides={**own, **(overrides or {})}, notebooks=out)
        print(f"execute: results of {len(kept)} page(s) kept in {keep_results / (label or profile)}", flush=True)
    if failures:
        print(f"execute: {len(failures)} page(s) failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    if record is not None:  # runtimes only of a run in which every page passed
        record.parent.mkdir(parents=True, exist_ok=True)
        write_runtimes(record, profile, stats, date=time.strftime("%Y-%m-%d"),
                       cpu_count=os.cpu_count(), total_seconds=round(total, 1))
        print(f"execute: runtimes recorded in {record}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="default",
                        help=f"one of {', '.join(PROFILES)} or a page's own profile (book/profiles.yml)")
    parser.add_argument("--out", type=Path, required=True, help="output tree (mirrors the repository root)")
    parser.add_argument("--page", action="append", help="execute only this page (repeatable)")
    parser.add_argument("--record", type=Path, help="write the runtimes of a successful run here")
    parser.add_argument("--keep-results", type=Path,
                        help="keep the pages' recorded results of a successful run in DIR/<profile>/")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="set a page parameter on top of the profile (YAML value; repeatable; needs --page)")
    parser.add_argument("--label", help="name of the recording under --keep-results (default: the profile)")
    parser.add_argument("--jobs", type=int, default=2, help="pages executed at once, one kernel each (default 2)")
    args = parser.parse_args(argv)
    root = find_root(Path.cwd())
    environment.apply(root)  # the kernels inherit the book's process settings
    os.environ["MPLBACKEND"] = INLINE_BACKEND
    os.environ[ROOT_ENV] = str(root)  # for pages that name a folder of the repository
    record = None if args.record is None else args.record.resolve()
    keep = None if args.keep_results is None else args.keep_results.resolve()
    overrides = parse_overrides(args.set)
    return run(root, args.out.resolve(), args.profile, args.page, record, args.jobs, keep, overrides, args.label)


def parse_overrides(items: list[str]) -> dict:
    """``["k_max=8", "depths=[2, 3]"]`` -> ``{"k_max": 8, "depths": [2, 3]}`` (values parsed as YAML)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise SystemExit(f"execute: --set expects NAME=VALUE, got {item!r}")
        out[name.strip()] = yaml.safe_load(value)
    return out


if __name__ == "__main__":
    sys.exit(main())
