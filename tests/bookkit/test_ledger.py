"""bookkit.ledger: the rules that decide a claim, the six verdicts, the ledger's files, coverage."""

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookkit import ledger
from bookkit.book import toc

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "book" / "_data" / "claims.yml"
finite = st.floats(-1e6, 1e6, allow_nan=False)


def _interval(center, half):
    return {"value": center, "low": center - half, "high": center + half}


@pytest.mark.parametrize(
    "rule,entry,expected",
    [
        ({"op": "within", "target": 6, "tol": 0.3}, {"value": 5.8}, "holds"),
        ({"op": "within", "target": 6, "tol": 0.3}, {"value": 6.35}, "fails"),   # two-sided: above fails
        ({"op": "within", "target": 6, "tol": 0.3}, {"value": 5.65}, "fails"),   # and below
        ({"op": "within", "target": 0, "tol": "recorded"}, {"value": 0.1, "tol": 0.2}, "holds"),
        ({"op": "within", "target": 0, "tol": "recorded"}, {"value": 0.3, "bound": 0.2}, "fails"),
        ({"op": "within", "target": 1, "tol": 0.5}, {"value": [0.8, 1.2]}, "holds"),
        ({"op": "within", "target": 1, "tol": 0.5}, {"value": [0.8, 1.6]}, "fails"),
        ({"op": "equals", "target": True}, {"value": False}, "fails"),
        ({"op": "equals", "target": 0.0}, {"value": 0.0}, "holds"),
        ({"op": "interval", "direction": "above"}, _interval(1.0, 0.5), "holds"),
        ({"op": "interval", "direction": "above"}, _interval(0.2, 0.5), "undecided"),
        ({"op": "interval", "direction": "above"}, _interval(-1.0, 0.5), "fails"),
        ({"op": "interval", "direction": "below"}, _interval(-1.0, 0.5), "holds"),
        ({"op": "interval", "direction": "above", "margin": 1.0}, _interval(1.2, 0.5), "undecided"),
        ({"op": "equivalent", "margin": 1.0}, _interval(0.2, 0.5), "holds"),
        ({"op": "equivalent", "margin": 1.0}, _interval(0.8, 0.5), "undecided"),
        ({"op": "equivalent", "margin": 1.0}, _interval(-2.0, 0.5), "fails"),
    ],
)
def test_outcome(rule, entry, expected):
    assert ledger.outcome(rule, entry) == expected


@given(center=finite, half=st.floats(0, 1e3), margin=st.floats(0, 1e3))
@settings(max_examples=200, deadline=None)
def test_interval_rules_mirror_and_never_decide_on_an_interval_that_holds_the_margin(center, half, margin):
    """"d above 0" is "-d below 0"; "competitive" is symmetric; an interval holding m is undecided."""
    entry, mirror = _interval(center, half), _interval(-center, half)
    assert (ledger.outcome({"op": "interval", "direction": "above"}, entry)
            == ledger.outcome({"op": "interval", "direction": "below"}, mirror))
    equivalent = {"op": "equivalent", "margin": margin}
    assert ledger.outcome(equivalent, entry) == ledger.outcome(equivalent, mirror)
    if entry["low"] <= margin <= entry["high"]:
        assert ledger.outcome({"op": "interval", "direction": "above", "margin": margin}, entry) == "undecided"
        assert ledger.outcome(equivalent, entry) != "holds"


@given(value=finite, target=finite, tol=st.floats(0, 1e6))
@settings(max_examples=200, deadline=None)
def test_within_is_symmetric_about_the_target(value, target, tol):
    mirror = 2 * target - value
    a = ledger.outcome({"op": "within", "target": target, "tol": tol}, {"value": value})
    b = ledger.outcome({"op": "within", "target": target, "tol": tol}, {"value": mirror})
    if abs(abs(value - target) - tol) > 1e-9 * (1 + abs(target) + tol):  # away from the edge (rounding)
        assert a == b


@pytest.mark.parametrize("rule", [{"op": "below", "bound": 1}, {"op": "within", "target": 1},
                                  {"op": "interval", "direction": "up"}, {"op": "interval"},
                                  {"op": "equivalent", "margin": -1}, {"op": "within", "target": 1, "tol": -1},
                                  {"op": "equals", "target": 1, "tol": 2}])
def test_bad_rules_are_refused(rule):
    with pytest.raises(ValueError, match="rule"):
        ledger.check_rule(rule)


def test_an_interval_entry_must_hold_its_value():
    with pytest.raises(ValueError, match="does not contain"):
        ledger.outcome({"op": "interval", "direction": "above"}, {"value": 3.0, "low": 0.0, "high": 1.0})
    with pytest.raises(TypeError, match="low"):
        ledger.outcome({"op": "interval", "direction": "above"}, {"value": 3.0})


def test_the_verdict_follows_the_rule():
    row = {"id": "p.k", "verdict": "reproduced", "rule": {"op": "within", "target": 2, "tol": 0.1}}
    assert ledger.verdict(row, {"value": 2.05}) == "reproduced"
    assert ledger.verdict(row, {"value": 2.5}) == "not supported"
    assert ledger.verdict(dict(row, verdict="corrected"), {"value": 1.95}) == "corrected"
    assert ledger.verdict(dict(row, verdict="not supported"), {"value": 2.0}) == "reproduced"  # a drift shows
    comparison = {"id": "p.d", "verdict": "undecided", "rule": {"op": "interval", "direction": "below"}}
    assert ledger.verdict(comparison, _interval(-0.1, 0.5)) == "undecided"
    assert ledger.verdict(comparison, _interval(1.0, 0.5)) == "not supported"
    with pytest.raises(KeyError, match="no recorded value"):
        ledger.verdict(row, None)
    assert ledger.verdict({"id": "p.k", "verdict": "not attempted"}, None) == "not attempted"
    with pytest.raises(ValueError, match="not attempted"):
        ledger.verdict({"id": "p.k", "verdict": "not attempted"}, {"value": 1})
    with pytest.raises(ValueError, match="supported"):
        ledger.decide(row["rule"], {"value": 2.0}, "not supported")


def test_rows_are_checked():
    sources = {"s": {"name": "S", "cite": None}}
    good = {"id": "p.k", "source": "s", "where": "abstract", "statement": "x", "measured": "y",
            "verdict": "reproduced", "rule": {"op": "equals", "target": True}, "rationale": "exact", "fmt": "{}"}
    ledger.check_row(good, sources)
    for bad, match in [(dict(good, source="t"), "source"), (dict(good, rationale="TODO"), "rationale"),
                       ({k: v for k, v in good.items() if k != "fmt"}, "fmt"),
                       (dict(good, verdict="undecided"), "interval"),
                       (dict(good, verdict="not attempted"), "takes no")]:
        with pytest.raises(ValueError, match=match):
            ledger.check_row(bad, sources)


def test_a_row_s_part_is_its_page_s_folder(tmp_path):
    for folder, page in (("optimisers", "a"), ("khop", "b"), ("causal", "c")):
        (tmp_path / "book" / folder).mkdir(parents=True)
        (tmp_path / "book" / folder / f"{page}.md").write_text("")
    (tmp_path / "book" / "khop" / "c.ipynb").write_text("")      # the same stem in two folders
    assert ledger.part_of("a", tmp_path / "book") == 0
    assert ledger.part_of("b", tmp_path / "book") == 2
    for page in ("c", "missing"):
        with pytest.raises(ValueError, match="exactly one folder"):
            ledger.part_of(page, tmp_path / "book")


def test_coverage_names_the_recorded_verdicts_the_ledger_lacks():
    rows = [{"id": "p.a", "verdict": "undecided"}, {"id": "p.b", "verdict": "reproduced"}]
    found = {"p.a": {"value": 1, "verdict": "undecided"}, "p.b": {"value": 1, "verdict": "not supported"},
             "p.c": {"value": 1, "verdict": "not supported"}, "p.d": {"value": 1}}
    assert ledger.coverage(rows, found) == {"p.b": ("not supported", "reproduced"), "p.c": ("not supported", None)}


def test_the_ledger_is_well_formed_and_every_recorded_verdict_has_its_row():
    rows = ledger.load_ledger(LEDGER)
    sources = ledger.load_sources(LEDGER)
    pages = {Path(p).name: p for p in toc.toc_pages(ROOT / "_toc.yml")}
    bib = (ROOT / "references.bib").read_text()
    for key, source in sources.items():
        assert source["name"], key
        assert source["cite"] is None or f"{{{source['cite']}," in bib, (key, source["cite"])
    assert {ledger.PARTS[r["part"]] for r in rows} == set(ledger.PARTS)
    by_id = {r["id"]: r for r in rows}
    for row in rows:
        page = row["id"].split(".")[0]
        assert page in pages, row["id"]
        text = (ROOT / f"{pages[page]}.md").read_text()
        if row["verdict"] != "not attempted":  # the page names it (record's argument, or a loop's) or builds it (an f-string)
            assert "record(" in text and (f'"{row["id"]}"' in text or f'f"{page}.' in text), row["id"]
        if "section" in row:
            assert f"({row['section']})=" in text, (row["id"], row["section"])
    # coverage, read from the pages' source: a page that records a verdict by name has a row for it
    # (the claims page checks every recorded verdict, those recorded in loops included)
    for stem, path in pages.items():
        text = (ROOT / f"{path}.md").read_text()
        for claim in re.findall(r'record\("([a-z0-9_]+\.[A-Za-z0-9_]+)"[^\n]*verdict=', text):
            assert claim in by_id, f"{path} records a verdict for {claim}, which the ledger lacks"
