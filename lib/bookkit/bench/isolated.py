"""A measurement in a fresh Python process: its own peak memory, no compiled function shared.

:func:`run_isolated` pickles a module-level function and its arguments, runs them in a new
interpreter (``python -m bookkit.bench.isolated RESULT``, reading them from its standard input)
and returns the function's (picklable) result, which the child writes to the file ``RESULT``.
The child is a new program, not a fork, so :func:`peak_mib` there is that measurement's own
peak and the caller's ``__main__`` is never imported again.
"""

from __future__ import annotations

import pickle
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_isolated(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a fresh Python process, and its result. ``function`` is defined at
    the top level of an importable module; its arguments and result are picklable."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.pickle"
        proc = subprocess.run([sys.executable, "-m", "bookkit.bench.isolated", str(result)],
                              input=pickle.dumps((function, args)), capture_output=True, check=False)
        if proc.returncode != 0:
            name = getattr(function, "__qualname__", repr(function))
            raise RuntimeError(f"isolated run of {name} failed:\n{proc.stderr.decode(errors='replace')[-2000:]}")
        return pickle.loads(result.read_bytes())


def peak_mib() -> float:
    """This process's peak resident set size in MiB (``VmHWM`` of ``/proc/self/status``; the
    JAX runtime itself is about 0.3 GiB of it). ``ru_maxrss`` would inherit the parent's peak
    across fork and exec; it is the fallback where ``/proc`` is missing."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str] | None = None) -> int:
    (result,) = sys.argv[1:] if argv is None else argv
    function, args = pickle.load(sys.stdin.buffer)
    Path(result).write_bytes(pickle.dumps(function(*args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
