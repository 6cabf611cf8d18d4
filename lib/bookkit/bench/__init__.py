"""Benchmarks of the book's kernels (``make bench``).

Every module of this package may define functions named ``bench_*``; each takes no argument
and returns a list of rows ``{"benchmark", "size", "seconds", "goal", "note", ...}``.
``python -m bookkit.bench`` runs them all and writes one JSON table that the book's performance
page renders. Speed and memory goals live here, never in timed tests.
"""

import json
import subprocess
import sys
import textwrap


def run_isolated(prelude: str, body: str) -> dict:
    """Run ``prelude + body`` in a fresh interpreter (its own peak memory, no shared jit cache);
    the code must print one JSON object as its last line, which is returned."""
    code = prelude + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
