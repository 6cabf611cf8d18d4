"""The book's pipeline: table of contents, profiles, and the browser check on a tiny site."""

import json
import shutil
from pathlib import Path

import pytest

from bookkit import paths
from bookkit.book import browser_check, execute, toc

ROOT = Path(__file__).resolve().parents[2]


def test_toc_lists_existing_pages_in_order():
    pages = toc.toc_pages(ROOT / "_toc.yml")
    assert pages[0] == "book/index"
    assert pages[-1] == "book/about/references"
    assert len(pages) == len(set(pages))
    for page in pages:
        toc.page_source(ROOT, page)  # raises if missing


def test_no_orphan_pages():
    assert execute.orphan_pages(ROOT, toc.toc_pages(ROOT / "_toc.yml")) == []


def test_an_unlisted_page_is_an_orphan_but_a_note_beside_the_data_is_not(tmp_path):
    (tmp_path / "book" / "_data" / "recorded").mkdir(parents=True)
    for name in ("index.md", "extra.md", "_data/recorded/HISTORY.md"):
        (tmp_path / "book" / name).write_text("# x\n")
    assert execute.orphan_pages(tmp_path, ["book/index"]) == ["book/extra.md"]


def test_profiles_name_each_page_and_profile_once():
    """YAML keeps the last of two equal keys silently: a page or profile written twice (as a
    merge can leave it) would drop the first entry."""
    import yaml

    def no_duplicates(loader, node):
        keys = [loader.construct_object(k) for k, _ in node.value]
        assert len(keys) == len(set(keys)), f"line {node.start_mark.line + 1}: {sorted(k for k in set(keys) if keys.count(k) > 1)} twice"
        return yaml.SafeLoader.construct_mapping(loader, node)

    class Strict(yaml.SafeLoader):
        pass

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, no_duplicates)
    yaml.load((ROOT / "book" / "profiles.yml").read_text(), Loader=Strict)
    with pytest.raises(AssertionError, match="twice"):
        yaml.load("a:\n  ci: {x: 1}\n  ci: {x: 2}\n", Loader=Strict)


def test_every_profile_names_real_parameters():
    import jupytext
    import yaml

    table = yaml.safe_load((ROOT / "book" / "profiles.yml").read_text())
    pages = set(toc.toc_pages(ROOT / "_toc.yml"))
    for key, profiles in table.items():
        page = f"book/{key}"
        assert page in pages, f"profiles.yml names {key}, which is not in _toc.yml"
        nb = jupytext.read(toc.page_source(ROOT, page))
        names = toc.parameter_names(execute.parameters_cell(nb).source)
        for profile, overrides in profiles.items():
            assert profile != "default", f"{key}: the default profile is the parameters cell"
            assert set(overrides) <= names, (key, profile, set(overrides) - names)


def test_a_page_may_define_a_profile_of_its_own(tmp_path):
    profiles = tmp_path / "profiles.yml"
    profiles.write_text("a/page:\n  ci: {n: 1}\n  big: {n: 9}\nb/page:\n  paper: {n: 2}\n")
    assert toc.page_profiles(profiles) == {"big": ["book/a/page"]}
    assert toc.profile_overrides(profiles, "book/a/page", "big") == {"n": 9}
    assert toc.profile_overrides(profiles, "book/b/page", "ci") == {}  # a book profile: every page
    assert toc.profile_overrides(profiles, "book/b/page", "default") == {}
    with pytest.raises(ValueError, match=r"a page's own \(big\).*'b/page'.*'big'"):
        toc.profile_overrides(profiles, "book/b/page", "big")
    profiles.write_text("a/page:\n  Big: {n: 9}\n")
    with pytest.raises(ValueError, match="lower-case"):
        toc.page_profiles(profiles)


def test_the_larger_khop_run_is_a_profile_of_the_training_page():
    """`make record-khop` runs book/khop/training with its own profile khop-large."""
    profiles = ROOT / "book" / "profiles.yml"
    assert toc.page_profiles(profiles)["khop-large"] == ["book/khop/training"]
    large = toc.profile_overrides(profiles, "book/khop/training", "khop-large")
    assert large["k_max"] == 8 and large["seq_len"] == 99 and large["depths"] == [2, 3, 4, 5]
    assert large["expected_strategy"] == {1: "composition", 2: "composition", 3: "multi-hop", 4: "multi-hop"}


def test_a_folder_s_pages_come_from_the_toc_in_reading_order():
    pages = toc.toc_pages(ROOT / "_toc.yml")
    assert toc.pages_under(pages, "book/optimisers") == [
        "book/optimisers/block_spectra", "book/optimisers/training_curvature",
        "book/optimisers/heterogeneity_test", "book/optimisers/block_rates",
        "book/optimisers/temperature", "book/optimisers/warmup"]
    assert toc.pages_under(pages, "book/experiments/") == toc.pages_under(pages, "book/experiments")
    assert toc.pages_under(pages, "book/exp") == []  # a folder, not a prefix of a name


def test_every_notebook_page_has_a_parameters_cell():
    import jupytext

    for page in toc.toc_pages(ROOT / "_toc.yml"):
        source = toc.page_source(ROOT, page)
        if execute.is_notebook(source):
            nb = jupytext.read(source)
            assert execute.parameters_cell(nb) is not None, page
            assert nb.metadata["kernelspec"]["name"] == "python3", page
            assert "sys.path" not in source.read_text(), page


def test_papermill_parses_every_parameters_cell(caplog):
    """papermill injects a profile's values by reading the parameters cell line by line; a line
    it cannot parse is logged ("Unable to parse line") and its name is not known to papermill."""
    import jupytext
    from papermill.translators import PythonTranslator

    for page in toc.toc_pages(ROOT / "_toc.yml"):
        source = toc.page_source(ROOT, page)
        if execute.is_notebook(source):
            cell = execute.parameters_cell(jupytext.read(source))
            caplog.clear()
            found = {p.name for p in PythonTranslator.inspect(cell)}
            assert "Unable to parse" not in caplog.text, (page, caplog.text)
            assert found == toc.parameter_names(cell.source), (page, toc.parameter_names(cell.source) ^ found)


def test_parameter_names():
    assert toc.parameter_names("a = 1\nb: int = 2\n  c = 3\n# d = 4\ne=[1,\n 2]") == {"a", "b", "e"}


def test_repository_path_resolves_against_the_root_from_an_output_folder(tmp_path, monkeypatch):
    (tmp_path / "_toc.yml").write_text("root: book/intro\n")
    out = tmp_path / "_build" / "nb" / "paper" / "book" / "khop"
    out.mkdir(parents=True)
    monkeypatch.chdir(out)  # where a page runs
    monkeypatch.delenv(paths.ROOT_ENV, raising=False)
    assert paths.repository_path("_build/cache") == tmp_path / "_build" / "cache"
    # an output folder outside the repository: the executor names the root
    elsewhere = tmp_path.parent / f"{tmp_path.name}-out"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(FileNotFoundError, match="_toc.yml"):
        paths.repository_path("_build/cache")
    monkeypatch.setenv(paths.ROOT_ENV, str(tmp_path))
    assert paths.repository_path("_build/cache") == tmp_path / "_build" / "cache"
    assert paths.repository_path(tmp_path / "x") == tmp_path / "x"
    assert paths.repository_path(None) is None


def test_page_defaults_are_the_parameters_cell_values(tmp_path):
    _one_page_book(tmp_path, "", "```{code-cell} ipython3\n:tags: [parameters]\n\nn = 3\na, b = 0.5, [1, 2]\n"
                   "c = {'x': 1_000}\n```\n\n```{code-cell} ipython3\nn = 4\n```\n")
    assert toc.page_defaults(tmp_path, "book/page") == {"n": 3, "a": 0.5, "b": [1, 2], "c": {"x": 1000}}
    with pytest.raises(FileNotFoundError, match="book/other"):
        toc.page_defaults(tmp_path, "book/other")
    # a real page: the BayesOpt benchmark reads its model sizes this way
    sizes = toc.page_defaults(ROOT, "book/bayesopt/pfn_bayesopt")
    assert {"d_model", "n_layers", "d_ff", "n_grid", "n_restarts", "n_fit_steps"} <= set(sizes)


def test_profile_overrides_rejects_unknown_profile(tmp_path):
    (tmp_path / "p.yml").write_text("x:\n  ci: {n: 1}\n")
    with pytest.raises(ValueError, match="profile must be one of"):
        toc.profile_overrides(tmp_path / "p.yml", "book/x", "fast")


def _one_page_book(root: Path, profiles: str, cells: str) -> None:
    """A book with the single notebook page ``book/page`` under ``root``."""
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    (root / "book").mkdir()
    (root / "book" / "profiles.yml").write_text(profiles)
    (root / "book" / "page.md").write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "    format_version: 0.13\nkernelspec:\n  name: python3\n  display_name: Python 3\n"
        "  language: python\n---\n\n# Page\n\n" + cells)


def test_unknown_profile_parameter_is_an_error(tmp_path):
    _one_page_book(tmp_path, "page:\n  ci: {n_steps: 3}\n",
                   "```{code-cell} ipython3\n:tags: [parameters]\n\nseed = 0\n```\n")
    with pytest.raises(ValueError, match="n_steps"):
        execute.execute_page(tmp_path, "book/page", tmp_path / "out", "ci")


def test_record_keeps_the_runtimes_of_a_run(tmp_path):
    _one_page_book(tmp_path, "page:\n  paper: {n: 3}\n",
                   "```{code-cell} ipython3\n:tags: [parameters]\n\nn = 1\n```\n\n"
                   "```{code-cell} ipython3\nassert n == 3\n```\n")
    record = tmp_path / "data" / "record.json"
    assert execute.run(tmp_path, tmp_path / "out", "paper", ["book/page.md"], record) == 0
    kept = json.loads(record.read_text())
    assert kept["profile"] == "paper" and kept["total_seconds"] > 0
    assert [(p["page"], p["status"]) for p in kept["pages"]] == [("book/page", "ok")]


SITE_PAGE = """<html><head><script src="../_static/mathjax/tex-chtml.js"></script></head><body>
<p><span class="math">\\(x^2 {BAD}\\)</span></p>
<a href="{LINK}">link</a>
<img src="{IMG}">
</body></html>"""


@pytest.mark.skipif(browser_check.chromium_path() is None, reason="headless Chromium is not installed")
@pytest.mark.parametrize(
    "bad, link, img, expected",
    [
        ("", "other.html", "ok.png", None),
        ("\\frac{1}", "other.html", "ok.png", "MathJax error"),
        ("", "missing.html", "ok.png", "broken link"),
        ("", "other.html#nowhere", "ok.png", "missing anchor"),
        ("", "other.html", "missing.png", "image did not load"),
    ],
)
def test_browser_check_catches_broken_pages(tmp_path, bad, link, img, expected):
    from bookkit.book.render import mathjax_dir

    site = tmp_path / "site"
    (site / "book").mkdir(parents=True)
    shutil.copytree(mathjax_dir(), site / "_static" / "mathjax")
    (site / "book" / "ok.png").write_bytes(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"))
    (site / "book" / "other.html").write_text("<html><body><p id='here'>x</p></body></html>")
    (site / "book" / "index.html").write_text(
        SITE_PAGE.replace("{BAD}", bad).replace("{LINK}", link).replace("{IMG}", img))
    (site / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/index.html" />')
    problems = browser_check.check_site(site, tmp_path / "shot.png")
    if expected is None:
        assert problems == []
        assert (tmp_path / "shot.png").stat().st_size > 0
    else:
        assert any(expected in p for p in problems), problems


def test_a_shown_figure_without_png_is_reported():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("plt.plot([1]); plt.show()"),
        nbformat.v4.new_code_cell("plt.show()", outputs=[nbformat.v4.new_output(
            "display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})]),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    assert execute.cells_missing_figures(nb) == [0]


LAYOUT_PAGE = """<html><head><style>pre {{ width: 300px; overflow: auto; font: 14px monospace; }}
div.math {{ width: 200px; overflow: auto; }}</style></head><body><article class="bd-article">
<div class="cell_input"><pre>{CODE}</pre></div>
<div class="cell_output"><div class="output stream"><pre>{OUT}</pre></div></div>
<div class="cell_output"><div class="output text_html" style="width: 300px; overflow: auto">{TABLE}</div></div>
<div class="math"><span style="display: inline-block; width: {EQ}px">x</span></div>
</article></body></html>"""


@pytest.mark.skipif(browser_check.chromium_path() is None, reason="headless Chromium is not installed")
@pytest.mark.parametrize(
    "code, out, columns, eq, expected",
    [
        ("x = 1", "1", 2, 100, []),
        ("x = 1\ny = '" + "z" * 60 + "'", "1", 2, 100, ["code"]),
        ("x = 1", "a " * 60, 2, 100, ["output"]),
        ("x = 1", "1", 40, 100, ["output"]),
        ("x = 1", "1", 2, 400, ["equation"]),
    ],
)
def test_browser_check_finds_blocks_wider_than_their_box(tmp_path, code, out, columns, eq, expected):
    site = tmp_path / "site"
    site.mkdir()
    table = "<table><tr>" + "".join(f"<th>column{i}</th>" for i in range(columns)) + "</tr></table>"
    (site / "index.html").write_text(LAYOUT_PAGE.format(CODE=code, OUT=out, TABLE=table, EQ=eq))
    layout = {}
    problems = browser_check.check_site(site, None, layout, layout_only=True)
    assert [p.split(" of ")[1].split()[1] for p in problems if "wider than their box" in p] == expected
    if "code" in expected:
        wide = next(p for p in problems if "code blocks wider" in p)
        assert "the first: \"y = 'zzz" in wide  # the first line that does not fit
    code_box = next(b for b in layout["index.html"] if b["kind"] == "code")
    assert code_box["chars"] < browser_check.LINE_LENGTH  # a 300 px box: fewer than 72 characters
    assert any("a code cell's box shows" in p for p in problems)
