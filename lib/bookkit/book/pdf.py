"""The whole book as one PDF, offline: a single-page HTML build printed by headless Chromium.

Route: Jupyter Book's ``singlehtml`` builder renders the executed notebooks (the same tree the
site is built from) into one HTML page, with the same offline MathJax as the site; Chromium,
already in the stack for the browser check, loads it from a local server, waits until MathJax
has typeset every formula, and prints it (A4, page numbers in the footer). Internal links
(``#anchors`` of the single page) stay links in the PDF. No LaTeX installation is needed.

    python -m bookkit.book.pdf --notebooks _build/nb/default --out _build/pdf/book.pdf

Before printing, every figure of a code cell's output gets a caption "Figure N" (numbered
through the book, in reading order). The PDF is then checked: it has at least two pages per
chapter (or ``--min-pages``), the title of every chapter of ``_toc.yml`` appears in its text,
every figure of the executed pages is there with its number, the text holds no MathJax or
LaTeX error (``Math input error``, ``Undefined control sequence``, ...), and no mathematics
was left as raw TeX (``\frac``, ``$x$``) outside code and program output.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from urllib.parse import urljoin

from bookkit.book.browser_check import CHROMIUM_ARGS, chromium_path, serve
from bookkit.paths import find_root
from bookkit.book.render import prepare
from bookkit.book.toc import toc_pages

ERROR_TEXTS = ("Math input error", "Undefined control sequence", "Missing $ inserted",
               "Misplaced &", "Extra }", "Missing }", "MathJax error", "! LaTeX Error")
FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#555">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
# Print without the site's navigation: sidebars, header buttons, prev/next links.
PRINT_CSS = """
.bd-sidebar-primary, .bd-sidebar-secondary, .bd-header, .header-article, .prev-next-area,
.bd-footer, .bd-footer-content, .search-button-field, .skip-link, #pst-back-to-top { display: none !important; }
.bd-main .bd-content .bd-article-container { max-width: 100% !important; }
.pdf-figure-number { text-align: center; font-size: 0.9em; font-style: italic; margin: 0.2em 0 1em; }
"""
# Open every dropdown (solutions of exercises, toggled cells): a printed book shows them.
EXPAND_JS = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
    document.querySelectorAll('.toggle-details__summary, button.toggle-button').forEach(e => e.remove());
}"""
# Caption each figure of a code cell's output "Figure N", in reading order; returns N.
NUMBER_FIGURES_JS = """() => {
    const images = Array.from(document.querySelectorAll('div.cell_output img'));
    images.forEach((img, i) => {
        const caption = document.createElement('p');
        caption.className = 'pdf-figure-number';
        caption.textContent = `Figure ${i + 1}`;
        img.insertAdjacentElement('afterend', caption);
    });
    return images.length;
}"""
# Text outside code, program output and typeset mathematics that still looks like TeX.
RAW_TEX_JS = r"""() => {
    const skip = 'pre, code, script, style, mjx-container, .highlight, .cell_output, textarea';
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const found = [];
    const pattern = /\\[A-Za-z]{2,}|\$[^$\s][^$]{0,80}\$/;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement && node.parentElement.closest(skip)) continue;
        const match = node.textContent.match(pattern);
        if (match) found.push(node.textContent.trim().slice(0, 120));
    }
    return found;
}"""


def build_single_html(notebooks: Path, out_root: Path) -> Path:
    """``jupyter-book build --builder singlehtml`` of the executed tree; the page's path."""
    prepare(find_root(Path.cwd()), notebooks)
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(notebooks),
               "--path-output", str(out_root), "--builder", "singlehtml", "--all"]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)
    page = out_root / "_build" / "singlehtml" / "book" / "index.html"
    if not page.exists():
        raise FileNotFoundError(f"the singlehtml build wrote no {page}")
    # The builder writes the page's asset paths (_static/, _images/) relative to the site root
    # although the page sits in book/: a copy at the root finds its styles, MathJax and figures.
    at_root = page.parents[1] / "book.html"
    shutil.copy2(page, at_root)
    return at_root


def print_pdf(site: Path, page: Path, out: Path, attempts: int = 3) -> dict:
    """Load ``page`` (under ``site``) in headless Chromium, wait for MathJax, number the figures,
    print to ``out``. Returns ``{"figures": count numbered, "raw_tex": [text snippets]}``.

    A browser that dies mid-print (playwright's "Target page, context or browser has been
    closed", seen now and then from headless Chromium under load) is relaunched, up to
    ``attempts`` times in all; any other error is raised at once.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    server, base = serve(site)
    try:
        for attempt in range(1, attempts + 1):
            try:
                with sync_playwright() as pw:
                    return _print_once(pw, site, base, page, out)
            except PlaywrightError as error:
                if "has been closed" not in str(error) or attempt == attempts:
                    raise
                print(f"pdf: the browser closed during attempt {attempt} of {attempts}; relaunching",
                      file=sys.stderr)
    finally:
        server.shutdown()
    raise AssertionError("unreachable")


def _print_once(pw, site: Path, base: str, page: Path, out: Path) -> dict:
    """One launch of Chromium: load, typeset, number the figures, print (see :func:`print_pdf`)."""
    browser = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
    try:
        tab = browser.new_page()
        tab.goto(urljoin(base, page.relative_to(site).as_posix()), wait_until="load", timeout=300_000)
        tab.add_style_tag(content=PRINT_CSS)
        # Sphinx's singlehtml builder writes the MathJax path relative to the site root
        # although the page sits in book/: load it from the site's _static/ when missing.
        if (site / "_static/mathjax/tex-chtml.js").exists() and not tab.evaluate("() => !!window.MathJax"):
            tab.add_script_tag(url=urljoin(base, "_static/mathjax/tex-chtml.js"))
            tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                  timeout=120_000)
        tab.evaluate("""async () => {
            if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
                await MathJax.startup.promise;
                if (MathJax.typesetPromise) { await MathJax.typesetPromise(); }
            }
        }""")
        tab.evaluate(EXPAND_JS)
        found = {"figures": tab.evaluate(NUMBER_FIGURES_JS), "raw_tex": tab.evaluate(RAW_TEX_JS)}
        out.parent.mkdir(parents=True, exist_ok=True)
        tab.pdf(path=str(out), format="A4", print_background=True, display_header_footer=True,
                header_template="<span></span>", footer_template=FOOTER,
                margin={"top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"})
        return found
    finally:
        browser.close()


def chapter_titles(notebooks: Path) -> list[str]:
    """The first heading of every page of the table of contents (as the PDF shows it)."""
    import nbformat

    titles = []
    for entry in toc_pages(notebooks / "_toc.yml"):
        path = next((notebooks / f"{entry}{ext}" for ext in (".ipynb", ".md")
                     if (notebooks / f"{entry}{ext}").exists()), None)
        if path is None:
            raise FileNotFoundError(f"no executed page for {entry} under {notebooks}")
        text = ("\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
                if path.suffix == ".ipynb" else path.read_text())
        match = re.search(r"^# (.+)$", text, re.MULTILINE)
        if match is None:
            raise ValueError(f"{path}: no top-level heading")
        titles.append(match.group(1).strip())
    return titles


def count_figures(notebooks: Path) -> int:
    """PNG figures in the outputs of the executed pages of the table of contents."""
    import nbformat

    count = 0
    for entry in toc_pages(notebooks / "_toc.yml"):
        path = notebooks / f"{entry}.ipynb"
        if path.exists():
            count += sum("image/png" in output.get("data", {})
                         for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
                         for output in cell.get("outputs", []))
    return count


def _plain(text: str) -> str:
    """Text without markup, ligatures (NFKC: "ﬁ" -> "fi") or spacing differences, for comparing
    titles with PDF text."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"\{[a-z]+\}`([^`]*)`|`([^`]*)`", lambda m: m.group(1) or m.group(2), text)
    text = re.sub(r"\$([^$]*)\$", r"\1", text)
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def check_pdf(pdf: Path, titles: list[str], min_pages: int, figures: int = 0,
              raw_tex: list[str] = ()) -> list[str]:
    """Problems with the printed book (empty when it is fine): too few pages, a chapter title
    missing from the text, fewer than ``figures`` numbered figures ("Figure 1" ... "Figure N"),
    error text, and the ``raw_tex`` snippets found on the page before printing."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    text = "\n".join(page.extract_text() or "" for page in reader.pages)
    problems = []
    if len(reader.pages) < min_pages:
        problems.append(f"{pdf}: {len(reader.pages)} pages, expected at least {min_pages}")
    flat = _plain(text)
    # A title's mathematics is typeset as glyphs: compare the text around it, piece by piece.
    problems += [f"{pdf}: chapter title not found in the text: {t!r}" for t in titles
                 if not all(_plain(piece) in flat for piece in re.split(r"\$[^$]*\$", t))]
    numbers = {int(n) for n in re.findall(r"Figure (\d+)", text)}
    missing = sorted(set(range(1, figures + 1)) - numbers)
    if missing:
        problems.append(f"{pdf}: {len(missing)} of {figures} figure numbers not in the text "
                        f"(first: Figure {missing[0]})")
    problems += [f"{pdf}: error text {e!r} in the PDF" for e in ERROR_TEXTS if e in text]
    problems += [f"{pdf}: raw TeX outside code: {snippet!r}" for snippet in raw_tex]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", type=Path, required=True, help="executed tree, e.g. _build/nb/default")
    parser.add_argument("--out", type=Path, required=True, help="the PDF to write")
    parser.add_argument("--min-pages", type=int, help="fail below this page count (default: two per chapter)")
    args = parser.parse_args(argv)
    if chromium_path() is None:
        print("pdf: headless Chromium is not installed (Debian package 'chromium')", file=sys.stderr)
        return 1
    notebooks = args.notebooks.resolve()
    out_root = args.out.resolve().parent / "singlehtml-build"
    page = build_single_html(notebooks, out_root)
    found = print_pdf(out_root / "_build" / "singlehtml", page, args.out.resolve())
    titles = chapter_titles(notebooks)
    figures = count_figures(notebooks)
    if found["figures"] != figures:
        print(f"pdf: the single page shows {found['figures']} figures, the executed pages hold {figures}",
              file=sys.stderr)
        return 1
    problems = check_pdf(args.out, titles, args.min_pages or 2 * len(titles), figures, found["raw_tex"])
    for line in problems:
        print(f"pdf: {line}", file=sys.stderr)
    print(f"pdf: {args.out}: {figures} numbered figures, {len(titles)} chapters, {len(problems)} problems",
          flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
