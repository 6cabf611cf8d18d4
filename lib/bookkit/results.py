"""Key results of the pages, recorded as JSON when a page executes (standard library only at
import; numpy and IPython are imported by the two functions that need them).

A page calls :func:`record` right after the cell that computes one of its key numbers::

    from bookkit.results import record
    record("growth_rates.query_H_o", float(fit.mean), spread=float(fit.std))

The claim id is ``<page>.<key>``: ``<page>`` is the page's file name without ``.md``
(unique in the book), ``<key>`` names the number on that page. The value lands in
``<out>/results/<page>.json`` of the executed tree (``{key: {"value": ..., **extra}}``), written
atomically (a temporary file in the same folder, then ``os.replace``), so a re-execution by
nbval rewrites the same values. The tree is found by walking up from the kernel's working
folder to the marker file :data:`MARKER` that ``bookkit.book.execute`` writes at the root
of its output; ``$XFMR_RESULTS_DIR`` overrides it. A page executed anywhere else
(``make lab``, plain Jupyter in ``book/``) finds no marker and records nothing, silently.

The claims page (``book/about/claims.md``) reads every file with :func:`load_results` and
checks each verdict against the ledger (:mod:`bookkit.ledger`). A recorded run (``make record-paper``) copies the
results of its pages, with the date, to ``book/_data/recorded/<profile>/<page>.json``
(:func:`keep_results`); pages show them with :func:`recorded`.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

MARKER = ".xfmr-results"
RESULTS_DIR = "results"
ENV_VAR = "XFMR_RESULTS_DIR"
RECORDED_DIR = Path("book") / "_data" / "recorded"
_CLAIM = re.compile(r"^([a-z0-9_]+)\.([A-Za-z0-9_]+)$")


def current_profile(start: Path | None = None) -> str | None:
    """The profile of the executed tree this kernel runs in (the marker file holds it), or None."""
    start = Path.cwd() if start is None else Path(start)
    for folder in (start, *start.parents):
        if (folder / MARKER).is_file():
            return (folder / MARKER).read_text().strip() or None
    return None


def split_claim(claim: str) -> tuple[str, str]:
    """``"<page>.<key>"`` -> ``(page, key)``; ValueError for any other form."""
    if not isinstance(claim, str):
        raise TypeError(f"claim must be a str, got {type(claim).__name__}")
    match = _CLAIM.match(claim)
    if match is None:
        raise ValueError(f"claim must look like '<page>.<key>' (lower-case page stem), got {claim!r}")
    return match.group(1), match.group(2)


def to_json(value: Any) -> Any:
    """``value`` as plain JSON data: numbers, strings, booleans, None, lists and dicts.

    Arrays and array scalars (numpy, JAX) are converted with ``.tolist()``. A NaN or an
    infinity is a ValueError: a key result must be a number JSON can hold.
    """
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"value must be finite, got {value!r}")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    raise TypeError(f"value must be a number, string, bool, list or dict, got {type(value).__name__}")


def results_dir(start: Path | None = None) -> Path | None:
    """Where this kernel records: ``$XFMR_RESULTS_DIR``, else ``<root>/results`` of the nearest
    folder upwards from ``start`` (default: the working folder) holding :data:`MARKER`, else None."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    start = Path.cwd() if start is None else Path(start)
    for folder in (start, *start.parents):
        if (folder / MARKER).is_file():
            return folder / RESULTS_DIR
    return None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record(claim: str, value: Any, directory: Path | None = None, **extra: Any) -> None:
    """Record ``value`` (and ``extra`` fields such as ``spread=`` or the page's own ``tol=``)
    under ``claim``; nothing happens when the page runs outside an executed tree.

    Returns None, so that a cell ending in ``record(...)`` prints nothing.
    """
    page, key = split_claim(claim)
    entry = {"value": to_json(value), **{k: to_json(v) for k, v in extra.items()}}
    directory = results_dir() if directory is None else Path(directory)
    if directory is None:
        return None
    path = directory / f"{page}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = entry
    write_json_atomic(path, data)


def record_seeds(claim: str, values: Any, directory: Path | None = None, **extra: Any) -> None:
    """Record per-seed ``values`` (1-D, at least two seeds) as their mean, with the standard
    deviation over seeds (ddof 1) as ``spread``; a scalar is recorded as it is."""
    import numpy as np

    v = np.asarray(to_json(values), dtype=float)
    if v.ndim == 0:
        return record(claim, float(v), directory, **extra)
    if v.ndim != 1 or v.size < 2:
        raise ValueError(f"values must be a scalar or one value per seed (1-D, >= 2 seeds), got shape {v.shape}")
    return record(claim, float(v.mean()), directory, spread=float(v.std(ddof=1)), **extra)


def load_results(directory: Path) -> dict[str, dict]:
    """Every recorded result under ``directory``: ``{"<page>.<key>": {"value": ..., ...}}``."""
    out = {}
    for path in sorted(Path(directory).glob("*.json")):
        for key, entry in json.loads(path.read_text()).items():
            out[f"{path.stem}.{key}"] = entry
    return out


def keep_figures(notebook: Path, dest: Path) -> list[str]:
    """Write the PNG figures of an executed notebook, in page order, to
    ``dest/figures/<stem>-<k>.png`` (k = 1, 2, ...); return those paths relative to ``dest``."""
    import base64

    notebook = Path(notebook)
    cells = json.loads(notebook.read_text())["cells"]
    pngs = [output["data"]["image/png"] for cell in cells if cell["cell_type"] == "code"
            for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
    names = []
    for k, png in enumerate(pngs, start=1):
        name = f"figures/{notebook.stem}-{k}.png"
        target = Path(dest) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode("".join(png) if isinstance(png, list) else png))
        names.append(name)
    return names


def keep_results(results: Path, dest: Path, profile: str, pages: list[str], date: str,
                 label: str | None = None, overrides: dict | None = None,
                 notebooks: Path | None = None) -> list[Path]:
    """Copy the results of ``pages`` (paths like ``book/experiments/depth``) from an executed
    tree's ``results`` folder to ``dest/<label>/<page>.json`` (``label`` defaults to the profile)
    with the profile, the parameters set on top of it, and the date. With ``notebooks`` (the
    executed tree's root), the page's figures are kept too (:func:`keep_figures`), listed under
    ``"figures"``."""
    label = label or profile
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", label):
        raise ValueError(f"label must be lower-case letters, digits, '-' or '_', got {label!r}")
    written = []
    for page in pages:
        stem = Path(page).name
        source = Path(results) / f"{stem}.json"
        if not source.exists():
            continue
        data = {"profile": profile, "date": date, "page": page, "results": json.loads(source.read_text())}
        if overrides:
            data["overrides"] = to_json(overrides)
        if notebooks is not None and (executed := Path(notebooks) / f"{page}.ipynb").exists():
            data["figures"] = keep_figures(executed, Path(dest) / label)
        target = Path(dest) / label / f"{stem}.json"
        write_json_atomic(target, data)
        written.append(target)
    return written


def _recorded_dir(profile: str, data_dir: Path | str | None) -> Path:
    """The folder of a profile's recorded runs: ``data_dir/<profile>``, ``data_dir`` defaulting
    to ``../_data/recorded`` (seen from a page's folder)."""
    return (Path("../_data/recorded") if data_dir is None else Path(data_dir)) / profile


def recorded(page: str, profile: str = "paper", data_dir: Path | str | None = None) -> dict | None:
    """A recorded run of ``page`` (stem, e.g. ``"growth_rates"``): ``{profile, date, page, results}``,
    or None if none was kept. ``data_dir`` defaults to ``../_data/recorded`` (a page's folder)."""
    path = _recorded_dir(profile, data_dir) / f"{page}.json"
    return json.loads(path.read_text()) if path.exists() else None


def show_recorded_figures(page: str, profile: str = "paper", data_dir: Path | str | None = None) -> None:
    """Display the figures kept from a recorded run of ``page`` (see :func:`keep_figures`),
    each under a line with the run's date; one sentence when none were kept."""
    run = recorded(page, profile, data_dir)
    if run is None or not run.get("figures"):
        print(f"No figures of a {profile}-profile run of this page have been kept yet.")
        return
    from IPython.display import Image, display

    base = _recorded_dir(profile, data_dir)
    for k, name in enumerate(run["figures"], start=1):
        print(f"{profile} profile, run on {run['date']}: figure {k} of {len(run['figures'])} of this page")
        display(Image(filename=str(base / name)))


def describe_recorded(page: str, keys: dict[str, str], live: dict[str, float] | None = None,
                      profile: str = "paper", data_dir: Path | str | None = None, fmt: str = "{:+.2f}",
                      maker: str = "make record-paper") -> str:
    """Lines comparing this run's values with a recorded run's, one per key.

    ``keys`` maps a result key of ``page`` to its label; ``live`` holds this run's values.
    Without a recording, one sentence says so (and that ``maker`` makes one).
    """
    run = recorded(page, profile, data_dir)
    if run is None:
        return f"No {profile}-profile run of this page has been recorded yet ({maker} keeps one)."
    lines = [f"{profile} profile, run on {run['date']}:"]
    width = max(len(label) for label in keys.values())
    for key, label in keys.items():
        entry = run["results"].get(key)
        text = "not recorded" if entry is None else _format(entry, fmt)
        mine = "" if live is None or key not in live else f"   (this run: {fmt.format(live[key])})"
        lines.append(f"  {label:<{width}}  {text}{mine}")
    return "\n".join(lines)


def recorded_table(page: str, keys: dict[str, str], live: dict[str, float] | None = None,
                   profile: str = "paper", data_dir: Path | str | None = None, fmt: str = "{:+.2f}",
                   maker: str = "make record-paper"):
    """:func:`describe_recorded` as a table (a pandas DataFrame, one row per key, indexed by its
    label): the recorded value, its seed sd where recorded, and this run's value, each formatted
    with ``fmt`` as there. Without a recording it prints the same sentence and returns None."""
    import pandas as pd

    run = recorded(page, profile, data_dir)
    if run is None:
        print(f"No {profile}-profile run of this page has been recorded yet ({maker} keeps one).")
        return None
    rows = {}
    for key, label in keys.items():
        entry = run["results"].get(key)
        value = entry["value"] if entry is not None else None
        rows[label] = {
            f"{profile} ({run['date']})": "not recorded" if entry is None else (
                ", ".join(fmt.format(v) for v in value) if isinstance(value, list) else fmt.format(value)),
            "seed sd": f"{entry['spread']:.3f}" if entry is not None and "spread" in entry else "",
            "this run": "" if live is None or key not in live else fmt.format(live[key]),
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    return table.loc[:, (table != "").any()]


def show_recorded_table(*args: Any, **kwargs: Any) -> None:
    """Display :func:`recorded_table` whole (every row, however many)."""
    import pandas as pd
    from IPython.display import display

    table = recorded_table(*args, **kwargs)
    if table is not None:
        with pd.option_context("display.max_rows", None):
            display(table)


def describe_recorded_summary(page: str, summary: dict[str, tuple[Any, str]], **kwargs: Any) -> str:
    """:func:`describe_recorded` for a page's ``summary``: ``key -> (per-seed values, label)``,
    this run's value being the mean over its seeds. ``kwargs`` go to :func:`describe_recorded`."""
    import numpy as np

    return describe_recorded(page, {k: label for k, (_, label) in summary.items()},
                             {k: float(np.mean(v)) for k, (v, _) in summary.items()}, **kwargs)


def show_recorded_summary(page: str, summary: dict[str, tuple[Any, str]], **kwargs: Any) -> None:
    """:func:`describe_recorded_summary` as a table (:func:`show_recorded_table`): one row per
    key of ``summary``, with the recorded value, its seed sd and this run's mean over seeds."""
    import numpy as np

    show_recorded_table(page, {k: label for k, (_, label) in summary.items()},
                        {k: float(np.mean(v)) for k, (v, _) in summary.items()}, **kwargs)


def _format(entry: dict, fmt: str) -> str:
    value = entry["value"]
    text = ", ".join(fmt.format(v) for v in value) if isinstance(value, list) else fmt.format(value)
    if "spread" in entry:
        text += f" (seed sd {entry['spread']:.3f})"
    return text
