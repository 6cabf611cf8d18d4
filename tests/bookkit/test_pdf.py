"""`make pdf`: the checker of the printed book finds a missing chapter, error text and too few pages."""

from pathlib import Path

import pytest

from bookkit.book.browser_check import chromium_path
from bookkit.book.pdf import _plain, check_pdf, print_pdf

needs_chromium = pytest.mark.skipif(chromium_path() is None, reason="headless Chromium is not installed")


def test_titles_are_compared_without_markup():
    assert _plain("The softmax and the `attention` moments") == _plain("The softmax and the attention\nmoments")
    assert _plain("Depth: $L$ layers") == "depthllayers"


def print_page(tmp_path: Path, body: str) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(f"<html><body>{body}</body></html>")
    out = tmp_path / "book.pdf"
    print_pdf.found = print_pdf(site, site / "index.html", out)
    return out


@needs_chromium
def test_a_clean_book_passes_and_each_fault_is_named(tmp_path):
    body = "<h1>A single self-attention layer</h1><p>text</p><div style='page-break-before:always'>" \
           "<h1>Growth rates of the Hessian blocks</h1></div>"
    pdf = print_page(tmp_path, body)
    titles = ["A single self-attention layer", "Growth rates of the Hessian blocks"]
    assert check_pdf(pdf, titles, min_pages=2) == []
    problems = check_pdf(pdf, [*titles, "A chapter that is not there"], min_pages=3)
    assert any("2 pages, expected at least 3" in p for p in problems)
    assert any("A chapter that is not there" in p for p in problems)


@needs_chromium
def test_mathjax_error_text_fails(tmp_path):
    pdf = print_page(tmp_path, "<h1>Title</h1><p>Math input error</p>")
    assert any("Math input error" in p for p in check_pdf(pdf, ["Title"], min_pages=1))


PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
       "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


@needs_chromium
def test_figures_are_numbered_and_counted(tmp_path):
    figure = f"<div class='cell_output'><img src='{PNG}' width='40' height='40'/></div>"
    solution = f"<details><summary>Solution</summary>{figure}</details>"  # closed dropdown
    pdf = print_page(tmp_path, f"<h1>Title</h1>{figure}<p>text</p>{solution}")
    assert print_pdf.found["figures"] == 2
    assert check_pdf(pdf, ["Title"], min_pages=1, figures=2) == []  # the dropdown was printed open
    assert any("1 of 3 figure numbers" in p for p in check_pdf(pdf, ["Title"], min_pages=1, figures=3))


@needs_chromium
def test_raw_tex_outside_code_is_found(tmp_path):
    body = ("<h1>Title</h1><p>typeset: fine</p><pre>print(r'$\\sigma$')</pre>"
            "<div class='cell_output'><pre>$a$ \\frac in output</pre></div>"
            "<p>left raw: $x^2$ and \\frac{1}{2}</p>")
    pdf = print_page(tmp_path, body)
    snippets = print_pdf.found["raw_tex"]
    assert snippets == ["left raw: $x^2$ and \\frac{1}{2}"]
    problems = check_pdf(pdf, ["Title"], min_pages=1, raw_tex=snippets)
    assert any("raw TeX outside code" in p for p in problems)


def test_single_page_builder_gets_the_html_visitors_it_lacks():
    from types import SimpleNamespace

    from bookkit.book.singlehtml_nodes import merge_html_visitors

    handlers = {"html": {"theorem_node": ("v", "d"), "exercise_node": ("h", "h")},
                "singlehtml": {"exercise_node": ("s", "s")}}  # sphinx-exercise registers its own
    app = SimpleNamespace(builder=SimpleNamespace(name="singlehtml"),
                          registry=SimpleNamespace(translation_handlers=handlers))
    merge_html_visitors(app)
    assert handlers["singlehtml"] == {"exercise_node": ("s", "s"), "theorem_node": ("v", "d")}
    app.builder.name = "html"
    handlers["html"]["other"] = ("o", "o")
    merge_html_visitors(app)  # other builders are left alone
    assert "other" not in handlers["singlehtml"]
