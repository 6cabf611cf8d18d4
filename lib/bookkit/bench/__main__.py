"""Run every ``bench_*`` function of :mod:`bookkit.bench` and write the results as JSON.

    python -m bookkit.bench --out book/_data/benchmarks.json [--only hessian]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import sys
import time
from datetime import date
from pathlib import Path

import bookkit.bench


def discover(only: str | None = None):
    """``(module name, function)`` for every ``bench_*`` function in the package, sorted."""
    found = []
    for info in sorted(pkgutil.iter_modules(bookkit.bench.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or (only and info.name != only):
            continue
        module = importlib.import_module(f"bookkit.bench.{info.name}")
        for name in sorted(dir(module)):
            if name.startswith("bench_") and callable(getattr(module, name)):
                found.append((info.name, getattr(module, name)))
    return found


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="run only this module of bookkit.bench (rows of the others are kept)")
    args = parser.parse_args(argv)
    previous = json.loads(args.out.read_text()) if args.only and args.out.exists() else {"rows": []}
    # a kept row without its own date was measured on the date of the table it was kept from
    rows = [{"date": previous["date"], **r} if "date" not in r else r
            for r in previous["rows"] if r.get("group") != args.only]
    for group, function in discover(args.only):
        print(f"bench: {group}.{function.__name__} ...", flush=True)
        start = time.perf_counter()
        for row in function():
            rows.append({"group": group, "date": date.today().isoformat(), **row})
            print(f"  {row}", flush=True)
        print(f"bench: {group}.{function.__name__} took {time.perf_counter() - start:.1f} s", flush=True)
    table = {
        "date": date.today().isoformat(),  # of the last run; each row carries its own
        "machine": {"cores": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version()},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"bench: wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
