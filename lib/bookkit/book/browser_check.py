"""Load every page of the built book in headless Chromium and fail on what a reader would see.

A page fails when MathJax reports an error (or never loads although the page has math), when
a local link points to a file or anchor that does not exist, when a local request (image,
script, stylesheet) fails, or when an image (a figure) did not load. Two site-wide checks: the
download menu of a Part III page offers a valid executed notebook and its jupytext source, and
the offline search, asked for a Part III word, lists a Part III page. The front page is saved
as a screenshot.

    python -m bookkit.book.browser_check --site _build/html --screenshot _build/front-page.png

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it). Without it the check
says so loudly and exits 0 on a developer's machine, but exits 1 under CI (``CI=true``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static", "_panels_static"}
SKIP_PAGES = {"genindex.html", "search.html"}
# The longest line of a code cell (bookkit.book.format_check); the code column must show it.
LINE_LENGTH = 72
# The page whose downloads are checked, and a search query whose results must include a page
# of the same part.
DOWNLOAD_PAGE = "book/khop/task.html"
SEARCH_QUERY, SEARCH_PART = "induction", "book/khop/"

# Runs in the page: wait for MathJax, then report math errors, broken images and links.
INSPECT_JS = """
async () => {
  const hasMath = document.querySelector('.math, mjx-container, span.math, div.math') !== null;
  let mathjax = 'absent';
  if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
    await window.MathJax.startup.promise;
    if (window.MathJax.typesetPromise) { await window.MathJax.typesetPromise(); }
    mathjax = 'loaded';
  }
  const mathErrors = Array.from(document.querySelectorAll('mjx-merror, .MathJax_Error'))
    .map(e => e.getAttribute('data-mjx-error') || e.textContent).slice(0, 5);
  const rendered = document.querySelectorAll('mjx-container').length;
  const images = Array.from(document.images).map(img => ({
    src: img.getAttribute('src'), ok: img.complete && img.naturalWidth > 0,
    figure: img.closest('.cell_output, figure, .output') !== null }));
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id);
  return {hasMath, mathjax, mathErrors, rendered, images, links, ids};
}
"""


# Runs in the page after INSPECT_JS: open every fold (hide-input cells, dropdowns), then find
# every code block, output block and display equation whose content is wider than its box
# (scrollWidth > clientWidth), naming its kind and first line that does not fit; and the number
# of monospace characters the narrowest code cell's box shows.
OVERFLOW_JS = """
() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const root = document.querySelector('.bd-article, article, main') || document.body;
  const canvas = document.createElement('canvas').getContext('2d');
  const inner = e => {
    const s = getComputedStyle(e);
    return e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
  };
  const charWidth = e => { canvas.font = getComputedStyle(e).font; return canvas.measureText('0').width; };
  const fits = e => Math.floor(inner(e) / charWidth(e) + 1e-6);
  const firstLine = e => {
    const n = fits(e);
    const line = e.textContent.split('\\n').find(l => l.replace(/\\t/g, '    ').length > n);
    return line === undefined ? '' : line;
  };
  const blocks = [];
  const over = e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth;
  for (const pre of root.querySelectorAll('pre')) {
    const output = pre.closest('.cell_output, .output') !== null;
    const kind = output ? 'output' : 'code';
    blocks.push({kind, over: over(pre), width: pre.clientWidth, chars: fits(pre),
                 cell: pre.closest('.cell_input') !== null, what: over(pre) ? firstLine(pre) : ''});
  }
  for (const out of root.querySelectorAll('.cell_output .output:not(.stream):not(.text_plain):not(.traceback)')) {
    if (out.querySelector('pre, img') !== null && out.querySelector('table') === null) { continue; }
    const table = out.querySelector('table');
    const head = table ? Array.from(table.querySelectorAll('th')).map(t => t.textContent.trim()).join(' ') : '';
    blocks.push({kind: 'output', over: over(out), width: out.clientWidth, chars: 0, cell: false,
                 what: (table ? 'table: ' + head : out.textContent.trim()).slice(0, 80)});
  }
  const items = (window.MathJax && MathJax.startup && MathJax.startup.document)
    ? Array.from(MathJax.startup.document.math) : [];
  for (const box of root.querySelectorAll('div.math, mjx-container[display="true"]')) {
    if (box.matches('mjx-container') && box.closest('div.math')) { continue; }
    const container = box.matches('mjx-container') ? box : box.querySelector('mjx-container') || box;
    const tall = [box, container].some(over);
    const item = items.find(m => m.typesetRoot === container);
    const tex = item ? item.math : box.textContent;
    blocks.push({kind: 'equation', over: tall, width: box.clientWidth, chars: 0, cell: false,
                 what: tex.replace(/\\s+/g, ' ').trim().slice(0, 80)});
  }
  const searches = Array.from(document.querySelectorAll('.search-button-field, .search-button'))
    .filter(e => e.getBoundingClientRect().width > 0).length;
  blocks.push({kind: 'search', over: searches > 1, width: 0, chars: 0, cell: false,
               what: searches + ' search boxes'});
  return blocks;
}
"""
KINDS = ("code", "output", "equation")


def overflow_problems(name: str, blocks: list[dict], line_length: int | None = None) -> list[str]:
    """The page's overflow findings: one line per kind (its first offending block and the count),
    and one when a code cell's box shows fewer than ``line_length`` characters."""
    problems = []
    for kind in KINDS:
        wide = [b for b in blocks if b["kind"] == kind and b["over"]]
        if wide:
            total = sum(b["kind"] == kind for b in blocks)
            problems.append(f"{name}: {len(wide)} of {total} {kind} blocks wider than their box; "
                            f"the first: {wide[0]['what'].strip()[:80]!r}")
    problems += [f"{name}: {b['what']} (one is enough)" for b in blocks if b["kind"] == "search" and b["over"]]
    if line_length is not None:
        narrow = [b for b in blocks if b["cell"] and 0 < b["chars"] < line_length]
        if narrow:
            problems.append(f"{name}: a code cell's box shows {narrow[0]['chars']} characters "
                            f"(< {line_length}) at 1280 px")
    return problems


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def serve(site: Path) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``site`` on a free loopback port in a background thread."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A page closed while a file was still being sent is no problem of the site."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


def site_pages(site: Path) -> list[Path]:
    """Every HTML page of the book (not Sphinx's own index and search pages, not assets)."""
    pages = []
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site)
        if rel.parts[0] in SKIP_DIRS or rel.name in SKIP_PAGES:
            continue
        pages.append(rel)
    return pages


def redirect_target(path: Path) -> str | None:
    """The target of a ``<meta http-equiv="refresh">`` stub page, else None."""
    match = re.search(r'http-equiv="refresh"[^>]*url=([^"]+)"', path.read_text(errors="replace"), re.IGNORECASE)
    return match.group(1).split("#")[0] if match else None


def local_target(site: Path, base: str, url: str) -> tuple[Path, str] | None:
    """Map a link on the served site to (file, fragment); None for links elsewhere."""
    parsed = urlparse(url)
    if not url.startswith(base):
        return None
    path = unquote(parsed.path)[len(urlparse(base).path):]
    target = site / path
    if path == "" or path.endswith("/"):
        target = target / "index.html"
    return target, parsed.fragment


def check_site(site: Path, screenshot: Path | None, layout: dict[str, list[dict]] | None = None,
               layout_only: bool = False) -> list[str]:
    """All problems found on all pages, as readable lines (empty when the site is fine).

    ``layout``, when given, receives each page's measured blocks (see :data:`OVERFLOW_JS`).
    ``layout_only`` checks MathJax and the widths only (no links, downloads or search): the
    quick check of ``make book``.
    """
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    server, base = serve(site)
    ids_cache: dict[Path, set[str]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            # The book must render offline: anything not on the local server is refused.
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                          else route.abort())
            for rel in site_pages(site):
                redirect = redirect_target(site / rel)
                if redirect is not None:  # a meta-refresh stub: its target must exist
                    if not (site / rel).parent.joinpath(redirect).exists():
                        problems.append(f"{rel.as_posix()}: redirects to a missing page {redirect}")
                    continue
                page = context.new_page()
                failed: list[str] = []
                page.on("requestfailed", lambda r, f=failed: f.append(r.url) if r.url.startswith(base) else None)
                page.on("response", lambda r, f=failed: f.append(f"{r.url} ({r.status})")
                        if r.url.startswith(base) and r.status >= 400 else None)
                page.goto(urljoin(base, rel.as_posix()), wait_until="load")
                info = page.evaluate(INSPECT_JS)
                ids_cache[site / rel] = set(info["ids"])
                name = rel.as_posix()
                if info["hasMath"] and info["mathjax"] != "loaded":
                    problems.append(f"{name}: page has math but MathJax did not load")
                if info["hasMath"] and info["rendered"] == 0:
                    problems.append(f"{name}: page has math but MathJax rendered nothing")
                problems += [f"{name}: MathJax error: {e}" for e in info["mathErrors"]]
                problems += [f"{name}: image did not load: {i['src']}" for i in info["images"] if not i["ok"]]
                problems += [f"{name}: local request failed: {u}" for u in failed]
                for url in [] if layout_only else info["links"]:
                    target = local_target(site, base, url)
                    if target is None:
                        continue
                    path, fragment = target
                    if not path.exists():
                        problems.append(f"{name}: broken link to {url}")
                    elif fragment and path.suffix == ".html":
                        if path not in ids_cache:
                            ids_cache[path] = _ids_of(context, urljoin(base, path.relative_to(site).as_posix()))
                        if unquote(fragment) not in ids_cache[path]:
                            problems.append(f"{name}: link to a missing anchor {url}")
                blocks = page.evaluate(OVERFLOW_JS)
                if layout is not None:
                    layout[name] = blocks
                problems += overflow_problems(name, blocks, LINE_LENGTH)
                if screenshot is not None and rel.as_posix() in ("index.html", "book/index.html"):
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(screenshot), full_page=False)
                page.close()
            # Site-wide checks where their pages exist (main() requires them of the book).
            if (site / DOWNLOAD_PAGE).exists() and not layout_only:
                problems += check_downloads(context, urljoin(base, DOWNLOAD_PAGE))
            if (site / "search.html").exists() and not layout_only:
                problems += check_search(context, base)
            browser.close()
    finally:
        server.shutdown()
    return problems


def check_downloads(context, url: str) -> list[str]:
    """The page's download menu: the .ipynb is a valid notebook, the .md a jupytext notebook."""
    import jupytext
    import nbformat

    page = context.new_page()
    page.goto(url, wait_until="load")
    page.click("button[aria-label='Download this page']")
    links = {a.text_content().strip(): a.get_attribute("href")
             for a in page.query_selector_all(".dropdown-download-buttons a.dropdown-item")}
    page.close()
    problems = []
    for suffix, reader in ((".ipynb", lambda text: nbformat.reads(text, as_version=4)),
                           (".md", lambda text: jupytext.reads(text, fmt="md:myst"))):
        name = f"{url.rsplit('/', 1)[-1]}: download {suffix}"
        if suffix not in links:
            problems.append(f"{name}: no such entry in the download menu (found {sorted(links)})")
            continue
        response = context.request.get(urljoin(url, links[suffix]))
        if not response.ok:
            problems.append(f"{name}: {response.status}")
            continue
        try:
            notebook = reader(response.text())
            if suffix == ".ipynb":
                nbformat.validate(notebook)
            if not any(cell.cell_type == "code" for cell in notebook.cells):
                problems.append(f"{name}: holds no code cell")
        except Exception as error:  # noqa: BLE001 - any parse error is the finding
            problems.append(f"{name}: not a valid notebook ({error})")
    return problems


def check_search(context, base: str) -> list[str]:
    """The offline search page, given a query, lists at least one page of the expected part."""
    page = context.new_page()
    page.goto(urljoin(base, f"search.html?q={SEARCH_QUERY}"), wait_until="load")
    try:
        page.wait_for_selector("#search-results ul.search li a", timeout=60_000)
        hrefs = [a.get_attribute("href") or "" for a in page.query_selector_all("#search-results ul.search li a")]
    except Exception:  # noqa: BLE001 - a timeout means no results
        hrefs = []
    page.close()
    if not any(SEARCH_PART in h for h in hrefs):
        return [f"search for {SEARCH_QUERY!r}: no page under {SEARCH_PART} among {len(hrefs)} results"]
    return []


def _ids_of(context, url: str) -> set[str]:
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    ids = set(page.evaluate("() => Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
    page.close()
    return ids


def layout_summary(layout: dict[str, list[dict]]) -> str:
    """How many blocks of each kind are wider than their box, over all pages, and the code column."""
    blocks = [b for page in layout.values() for b in page]
    parts = [f"{sum(b['over'] for b in blocks if b['kind'] == k)} of {sum(b['kind'] == k for b in blocks)} {k} blocks"
             for k in KINDS]
    chars = [b["chars"] for b in blocks if b["cell"] and b["chars"] > 0]
    column = f"; a code cell shows {min(chars)} characters" if chars else ""
    return "wider than their box at 1280 px: " + ", ".join(parts) + column


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, required=True, help="the built HTML folder")
    parser.add_argument("--screenshot", type=Path, help="where to save a screenshot of the front page")
    parser.add_argument("--layout-only", action="store_true",
                        help="only MathJax and the widths of code, outputs and equations (make book)")
    parser.add_argument("--layout-json", type=Path, help="write every page's measured blocks here")
    args = parser.parse_args(argv)
    if chromium_path() is None:
        message = ("browser check: NOT RUN - headless Chromium is not installed "
                   "(Debian package 'chromium'; .ci/run installs it)")
        print("!" * len(message), message, "!" * len(message), sep="\n", file=sys.stderr)
        return 1 if os.environ.get("CI", "").lower() == "true" else 0
    site = args.site.resolve()
    if not (site / "index.html").exists():
        print(f"browser check: no built site at {site} (run the book build first)", file=sys.stderr)
        return 1
    problems = [f"{name}: missing from the built book" for name in (DOWNLOAD_PAGE, "search.html")
                if not (site / name).exists() and not args.layout_only]
    layout: dict[str, list[dict]] = {}
    problems += check_site(site, args.screenshot, layout, layout_only=args.layout_only)
    if args.layout_json is not None:
        args.layout_json.parent.mkdir(parents=True, exist_ok=True)
        args.layout_json.write_text(json.dumps(layout, indent=1))
    n_pages = len(site_pages(site))
    for line in problems:
        print(f"browser check: {line}", file=sys.stderr)
    print("browser check: " + layout_summary(layout), flush=True)
    print(f"browser check: {n_pages} pages, {len(problems)} problems", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
