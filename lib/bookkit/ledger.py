"""The ledger: every claim of the sources that the book treats, with the rule that decides it.

The rows live in ``book/_data/claims.yml``, in book order, and the sources they cite in
``book/_data/sources.yml`` beside it; a row's part (:data:`PARTS`) is the folder of its page
(:data:`PART_OF_FOLDER`). A row::

    - id: comparison.tcbo_minus_greedy      # <page>.<key>: the page records the number with
                                            # bookkit.results.record("<page>.<key>", value, ...)
      source: tcbo                          # a key of sources.yml
      where: Figure 4 (read off)            # where in the source: theorem, figure, abstract
      statement: TC-BO reaches ...          # what the source states (MyST: $H_o$ is typeset)
      measured: paired difference ...       # what the book measures
      verdict: undecided                    # one of VERDICTS
      rule: {op: interval, direction: below}
      rationale: 5 seeds, paired; a 95 % t-interval   # why this tolerance or interval
      fmt: "{:+.2f}"                        # how the value is printed
      section: tcbo-comparison-greedy       # optional: the label of the measuring section

Rules (:func:`outcome` turns a rule and a recorded entry into ``holds``, ``fails`` or
``undecided``):

- ``{op: within, target: t, tol: e}``: a value claim, two-sided: ``|value - t| <= e``
  (an error or a deviation is ``within`` 0);
- ``{op: equals, target: v}``: an exact value (a boolean, a structural zero);
- ``{op: interval, direction: above | below, margin: m}``: a comparison; the entry records
  ``low`` and ``high``, a paired interval of a difference. It holds when the interval lies on
  the claimed side of ``m`` (default 0), fails when it lies on the other side, and is
  undecided when it contains ``m``;
- ``{op: equivalent, margin: m}``: "competitive": holds when the paired interval lies inside
  ``(-m, m)``, fails when it lies wholly outside, undecided otherwise.

A field set to ``recorded`` is read from the entry (the page's own tolerance); a list value
holds when every entry holds. The verdict a row earns (:func:`verdict`): a rule that holds gives
the row's verdict when that is one of :data:`SUPPORTED`, else ``reproduced``; a rule that
fails gives ``not supported``; an undecided interval gives ``undecided``. ``not attempted``
rows have no rule and record nothing; their ``rationale`` says why and what it would take.

Coverage: a page that reaches a verdict records it (``record(id, value, verdict=..., ...)``);
:func:`coverage` lists the recorded verdicts that the ledger lacks or states differently.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

__all__ = ["VERDICTS", "SUPPORTED", "OPS", "PARTS", "PART_OF_FOLDER", "PART_TITLES", "FIELDS", "load_ledger", "load_sources",
           "part_of", "check_row",
           "check_rule", "resolve", "outcome", "decide", "verdict", "coverage"]

VERDICTS = ("reproduced", "reproduced, with an exception located", "corrected", "not supported", "undecided",
            "not attempted")
SUPPORTED = VERDICTS[:3]  # the verdicts of a rule that holds
OPS = ("within", "equals", "interval", "equivalent")
PARTS = ("hessian", "cross_entropy", "khop", "bayesopt", "tcbo", "causal")  # Parts I-VI
PART_OF_FOLDER = {"hessian": 0, "experiments": 0, "optimisers": 0, "cross_entropy": 1, "khop": 2,
                  "bayesopt": 3, "tcbo": 4, "causal": 5}  # book/<folder>/ -> index in PARTS
PART_TITLES = ("Part I: the Hessian of self-attention", "Part II: cross-entropy learns distributions",
               "Part III: K-hop induction heads", "Part IV: transformers and Bayesian optimisation",
               "Part V: planning under transition constraints", "Part VI: standardized causal models")
FIELDS = ("id", "source", "where", "statement", "measured", "verdict", "rationale")  # every row
RECORDED = "recorded"
_RECORDED_AS = {"tol": ("tol", "bound")}  # a page's own tolerance on an error is recorded as bound=
_RULE_FIELDS = {"within": ({"target", "tol"}, set()), "equals": ({"target"}, set()),
                "interval": ({"direction"}, {"margin"}), "equivalent": ({"margin"}, set())}


def load_sources(ledger: Path | str) -> dict[str, dict]:
    """``sources.yml`` beside the ledger file: ``{key: {"name": ..., "cite": bibtex key or None}}``."""
    return yaml.safe_load(Path(ledger).with_name("sources.yml").read_text())


def part_of(page: str, book: Path | str) -> int:
    """The part (index in :data:`PARTS`) of the page with stem ``page``: the folder under ``book``
    that holds it (as ``.md``, or ``.ipynb`` in an executed tree)."""
    folders = {p.parent.name for p in Path(book).glob(f"*/{page}.*") if p.suffix in (".md", ".ipynb")}
    if len(folders) != 1 or not folders <= PART_OF_FOLDER.keys():
        raise ValueError(f"page {page!r} must be in exactly one folder of {sorted(PART_OF_FOLDER)} "
                         f"under {book}, found {sorted(folders)}")
    return PART_OF_FOLDER[folders.pop()]


def load_ledger(ledger: Path | str, parts: tuple[str, ...] = PARTS) -> list[dict]:
    """The rows of ``parts`` (default: every row) of the ledger file, in its order, each with
    ``part`` (its index in :data:`PARTS`, from its page's folder in the book that holds the
    ledger's ``_data`` folder) added; every row is checked (:func:`check_row`), ids are unique
    and the rows follow the book's order of parts."""
    ledger = Path(ledger)
    sources = load_sources(ledger)
    rows, seen = [], set()
    for row in yaml.safe_load(ledger.read_text()) or []:
        check_row(row, sources)
        if row["id"] in seen:
            raise ValueError(f"claim id {row['id']!r} appears twice in the ledger")
        seen.add(row["id"])
        part = part_of(row["id"].split(".")[0], ledger.parent.parent)
        if rows and part < rows[-1]["part"]:
            raise ValueError(f"claim {row['id']!r} of {PARTS[part]} comes after a row of {PARTS[rows[-1]['part']]}: "
                             "keep the rows in the book's order of parts")
        rows.append({**row, "part": part})
    return [row for row in rows if PARTS[row["part"]] in parts]


def check_row(row: dict, sources: dict) -> None:
    """ValueError unless ``row`` has every field of :data:`FIELDS`, a known source and verdict,
    and a rule and format exactly when its verdict is not ``not attempted``."""
    if not isinstance(row, dict):
        raise ValueError(f"a ledger row must be a mapping, got {row!r}")
    missing = [f for f in FIELDS if not row.get(f) or "TODO" in str(row[f])]
    if missing:
        raise ValueError(f"claim {row.get('id')!r} lacks the fields (or has a TODO in) {missing}")
    if row["source"] not in sources:
        raise ValueError(f"claim {row['id']!r}: source {row['source']!r} is not in sources.yml ({sorted(sources)})")
    if row["verdict"] not in VERDICTS:
        raise ValueError(f"claim {row['id']!r}: verdict must be one of {VERDICTS}, got {row['verdict']!r}")
    attempted = row["verdict"] != "not attempted"
    for field in ("rule", "fmt"):
        if (field in row) != attempted:
            raise ValueError(f"claim {row['id']!r}: a {row['verdict']!r} row "
                             f"{'needs' if attempted else 'takes no'} {field!r}")
    if attempted:
        check_rule(row["rule"])
        if row["verdict"] == "undecided" and row["rule"]["op"] not in ("interval", "equivalent"):
            raise ValueError(f"claim {row['id']!r}: only an interval rule can leave a claim undecided")


def check_rule(rule: dict) -> None:
    """ValueError unless ``rule`` is ``{op, ...}`` with exactly the fields its operator takes."""
    if not isinstance(rule, dict) or rule.get("op") not in OPS:
        raise ValueError(f"rule must be a mapping with op in {OPS}, got {rule!r}")
    need, may = _RULE_FIELDS[rule["op"]]
    if not need <= set(rule) - {"op"} <= need | may:
        raise ValueError(f"rule {rule!r}: op {rule['op']!r} takes the fields {sorted(need)}"
                         + (f" and optionally {sorted(may)}" if may else ""))
    if rule["op"] == "interval" and rule["direction"] not in ("above", "below"):
        raise ValueError(f"rule {rule!r}: direction must be 'above' or 'below'")
    for field in ("tol", "margin"):
        if field in rule and rule[field] != RECORDED and not rule[field] >= 0:
            raise ValueError(f"rule {rule!r}: {field} must be >= 0")


def resolve(rule: dict, entry: dict) -> dict:
    """``rule`` with every field set to ``"recorded"`` replaced by the entry's field of that name."""
    out = dict(rule)
    for field, value in rule.items():
        if value == RECORDED:
            names = [name for name in _RECORDED_AS.get(field, (field,)) if name in entry]
            if not names:
                raise KeyError(f"rule {rule!r} reads {field!r} from the recorded entry, which has none")
            out[field] = entry[names[0]]
    return out


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def outcome(rule: dict, entry: dict) -> str:
    """``"holds"``, ``"fails"`` or ``"undecided"``: what ``rule`` says of the recorded ``entry``
    (``{"value": ..., "low": ..., "high": ..., **fields}``); see the module docstring."""
    check_rule(rule)
    rule = resolve(rule, entry)
    op, value = rule["op"], entry["value"]
    if op in ("interval", "equivalent"):
        low, high = _number(entry.get("low"), "the entry's 'low'"), _number(entry.get("high"), "the entry's 'high'")
        if not low <= value <= high:
            raise ValueError(f"the entry's interval [{low}, {high}] does not contain its value {value}")
        if op == "equivalent":
            m = _number(rule["margin"], "margin")
            return "holds" if -m < low and high < m else "fails" if high < -m or low > m else "undecided"
        m = _number(rule.get("margin", 0.0), "margin")
        above, below = low > m, high < m
        if rule["direction"] == "below":
            above, below = below, above
        return "holds" if above else "fails" if below else "undecided"
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("an empty list of values decides nothing")
    if op == "equals":
        ok = all(v == rule["target"] for v in values)
    else:
        ok = all(abs(_number(v, "value") - _number(rule["target"], "target")) <= _number(rule["tol"], "tol")
                 for v in values)
    return "holds" if ok else "fails"


def verdict(row: dict, entry: dict | None) -> str:
    """The verdict that ``row`` earns from its recorded ``entry`` (None for ``not attempted``)."""
    stated = row.get("verdict")
    if stated not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {stated!r}")
    if stated == "not attempted":
        if "rule" in row or entry is not None:
            raise ValueError(f"claim {row.get('id')!r}: 'not attempted' takes no rule and no recorded value")
        return stated
    if entry is None:
        raise KeyError(f"claim {row.get('id')!r} has no recorded value")
    return decide(row["rule"], entry, stated if stated in SUPPORTED else "reproduced")


def decide(rule: dict, entry: dict, supported: str = "reproduced") -> str:
    """The verdict of ``rule`` on ``entry``: ``supported`` (one of :data:`SUPPORTED`) when it
    holds, ``not supported`` when it fails, ``undecided`` otherwise. A page decides with it::

        entry = {"value": mean, "low": low, "high": high}
        record("comparison.tcbo_minus_greedy", **entry,
               verdict=decide({"op": "interval", "direction": "below"}, entry))
    """
    if supported not in SUPPORTED:
        raise ValueError(f"supported must be one of {SUPPORTED}, got {supported!r}")
    result = outcome(rule, entry)
    return supported if result == "holds" else "not supported" if result == "fails" else "undecided"


def coverage(rows: list[dict], found: dict[str, dict]) -> dict[str, tuple]:
    """The verdicts that pages recorded (entries with a ``verdict`` field) which the ledger
    lacks or states otherwise: ``{id: (recorded verdict, ledger verdict or None)}``."""
    stated = {row["id"]: row["verdict"] for row in rows}
    return {claim: (entry["verdict"], stated.get(claim)) for claim, entry in sorted(found.items())
            if "verdict" in entry and stated.get(claim) != entry["verdict"]}


def main(argv: list[str] | None = None) -> int:
    """Check rows against an executed tree's results: the verdict each row earns, and coverage.

        python -m bookkit.ledger --results /tmp/nb/results [--part bayesopt]
    """
    import argparse

    from bookkit.results import load_results

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--results", type=Path, required=True, help="the results folder of an executed tree")
    parser.add_argument("--ledger", type=Path, default=Path("book/_data/claims.yml"))
    parser.add_argument("--part", choices=PARTS, help="only this part's rows (default: all)")
    args = parser.parse_args(argv)
    rows = load_ledger(args.ledger, PARTS if args.part is None else (args.part,))
    found = load_results(args.results)
    bad = 0
    for row in rows:
        entry = found.get(row["id"])
        if row["verdict"] != "not attempted" and entry is None:
            print(f"{row['id']}: NO RECORDED VALUE (page not run?)")
            continue
        earned = verdict(row, entry)
        bad += earned != row["verdict"]
        print(f"{row['id']}: {entry['value'] if entry else '-'} -> {earned}"
              + ("" if earned == row["verdict"] else f"   MISMATCH (ledger says {row['verdict']})"))
    stems = {row["id"].split(".")[0] for row in rows}
    for claim, (got, stated) in coverage(rows, found).items():
        if args.part is None or claim.split(".")[0] in stems:  # with --part, that part's pages only
            bad += 1
            print(f"{claim}: the page recorded the verdict {got!r}, the ledger {'lacks it' if stated is None else 'says ' + repr(stated)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
