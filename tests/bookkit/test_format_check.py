"""The code-format check of the pages: formatted by ruff at 72 columns, no longer line shown."""

from __future__ import annotations

from pathlib import Path

from bookkit.book import format_check

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A page

"""
GOOD = HEADER + """```{code-cell} ipython3
x = {"a": 1, "b": 2}
```
"""


def page(tmp_path: Path, text: str, name: str = "book/page.md") -> dict[str, Path]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return {name: path}


def test_a_formatted_page_passes(tmp_path):
    assert format_check.check_pages(tmp_path, page(tmp_path, GOOD)) == []


def test_an_unformatted_cell_is_named_with_its_page_line(tmp_path):
    text = GOOD.replace('x = {"a": 1, "b": 2}', "x = {'a':1,\n  'b':2}")
    findings = format_check.check_pages(tmp_path, page(tmp_path, text))
    assert len(findings) == 1
    assert findings[0].page == "book/page.md"
    assert findings[0].line == text.splitlines().index("x = {'a':1,") + 1
    assert "code cell 1 is not formatted" in findings[0].message


def test_a_long_line_fails_even_when_the_formatter_keeps_it(tmp_path):
    comment = "# " + "word " * 16  # a comment: ruff leaves it as it is
    text = GOOD.replace("```{code-cell} ipython3\n", "```{code-cell} ipython3\n" + comment.strip() + "\n")
    findings = format_check.check_pages(tmp_path, page(tmp_path, text))
    assert [f.message.split(":")[0] for f in findings] == ["code cell 1, line 1"]
    assert "81 characters (> 72)" in findings[0].message
    assert str(findings[0]).startswith("book/page.md:15: ")


def test_a_parameters_cell_with_options_is_checked_too(tmp_path):
    text = HEADER + """```{code-cell} ipython3
:tags: [parameters]

n_steps = 10  # the number of training steps of the small model in the first experiment
```
"""
    findings = format_check.check_pages(tmp_path, page(tmp_path, text))
    assert len(findings) == 1 and findings[0].line == 17


def test_a_shown_library_object_must_fit_too(tmp_path):
    lib = tmp_path / "lib" / "mod.py"
    lib.parent.mkdir()
    lib.write_text("def short():\n    return 1\n\n\ndef long():\n    return '" + "x" * 80 + "'\n")
    text = GOOD + "\n```{literalinclude} /lib/mod.py\n:pyobject: NAME\n```\n"
    assert format_check.check_pages(tmp_path, page(tmp_path, text.replace("NAME", "short"))) == []
    findings = format_check.check_pages(tmp_path, page(tmp_path, text.replace("NAME", "long")))
    assert len(findings) == 1 and "line 6 of /lib/mod.py is 93 characters" in findings[0].message


def test_syntax_errors_are_named(tmp_path):
    findings = format_check.check_pages(tmp_path, page(tmp_path, GOOD.replace("x = {", "x = ({")))
    assert findings and "cannot parse" in findings[0].message


def test_fix_formats_the_page_and_then_it_passes(tmp_path):
    pages = page(tmp_path, GOOD.replace('x = {"a": 1, "b": 2}', "x = {'a':1,\n  'b':2}"))
    assert format_check.fix(pages) == ["book/page.md"]
    assert format_check.check_pages(tmp_path, pages) == []
    assert 'x = {"a": 1, "b": 2}' in pages["book/page.md"].read_text()


def test_every_page_of_the_book_is_checked():
    root = format_check.find_root(Path(__file__))
    pages = format_check.book_pages(root)
    assert "book/khop/task.md" in pages and "book/index.md" in pages


def test_a_plain_markdown_page_has_no_code_cells_to_format(tmp_path):
    text = "# Notes\n\n```bash\nmake book    # a shell line, not Python\n```\n"
    assert format_check.check_pages(tmp_path, page(tmp_path, text)) == []


def test_the_injected_parameters_cell_is_formatted_to_the_code_column(tmp_path):
    import nbformat

    from bookkit.book import execute

    long = "expected = " + repr({f"key_{i}": {"sgd": "supported", "adam": "supported"} for i in range(3)})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("n = 1", metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell(long, metadata={"tags": ["injected-parameters"]})])
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    assert len(long) > 72
    execute.format_injected_parameters(path)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].source == "n = 1"  # only the injected cell changes
    assert max(len(line) for line in cells[1].source.splitlines()) <= 72
    scope = {}
    exec(cells[1].source, scope)
    assert "expected" in scope and len(scope["expected"]) == 3
