"""The process settings under which the book's numbers are computed, in one place.

``make`` exports what ``python -m bookkit.environment`` prints, and the one-page executor
(``python -m bookkit.book.execute``), ``make lab`` (``bookkit.book.lab``) and the test suite
(``tests/conftest.py``) apply them with :func:`apply` before any kernel or library starts, so a
page run by hand gives the book's numbers. Standard library only: ``make`` reads this module
with the bare interpreter, before the book's environment exists.

    python -m bookkit.environment [ROOT]     # NAME=value lines (ROOT: the repository, default .)

Every value below changes no result by itself; what it fixes is that a result does not depend
on the machine or on the process that runs it:

- ``JAX_PLATFORMS=cpu``: the book's numbers are CPU numbers (a GPU's reductions round
  differently).
- ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``: a fixed thread count,
  so the split of a BLAS reduction, and with it its rounding, does not follow the machine's
  core count.
- ``OPENBLAS_THREAD_TIMEOUT=4``: an idle OpenBLAS thread spins for up to 2^28 cycles before it
  sleeps (its default); two kernels at a time, each with XLA's threads and OpenBLAS's second
  thread, then fight for two cores (Part V's ci pages took 76 s instead of 5-8 s). Spinning
  for 2^4 cycles ends that; the thread count, and so every result, stays the same.
- ``PYTHONHASHSEED=0``: set and dict iteration orders of strings are the same in every kernel.
- ``TQDM_DISABLE=1``: no progress bars in batch runs (they would land in the executed pages).
- ``PYDEVD_DISABLE_FILE_VALIDATION=1``: no debugger warning in the kernels' outputs.
- ``TF_CPP_MIN_LOG_LEVEL=3``: XLA's C++ log lines below FATAL stay out of the pages' outputs.
  The one seen in practice is the "slow operation alarm", printed when constant folding a
  program takes over a second of wall time: whether it appears depends on the machine's
  load, not on the result (``cross_entropy/conditionals`` on a busy 2-core machine).
  Python exceptions are unaffected.
- ``XLA_FLAGS`` empty: XLA's compiler options at their defaults, whatever the shell had set
  (an option such as the optimisation level changes roundings; see the unit tests' setting
  below).
- ``JAX_COMPILATION_CACHE_DIR`` (``_build/jax-cache`` of the repository) and
  ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0``: JAX's persistent compilation cache. nbval
  re-executes the pages that the executor has just run, and the unit tests, pages and profiles
  share many functions; a compiled function is loaded instead of compiled again (keyed by its
  program and the compiler version: the same results).

What these settings do not fix is the vector instructions that XLA (with YNNPACK), OpenBLAS
and numpy pick for the machine at run time; a few borderline ledger verdicts move between an
AVX-512 and an AVX2 machine, and the ledger is that of the AVX-512 one. Capping at AVX2 was
tried and not kept; the execution page (``book/about/execution.md``) gives the measurements
and prints the machine's instructions.

The unit tests add :data:`TEST_SETTINGS` (``settings(root, tests=True)``, applied by
``tests/conftest.py``): ``XLA_FLAGS=--xla_backend_optimization_level=0``, XLA's CPU backend
without LLVM's optimisation passes. The tests check small cases, whose time is mostly
compilation: on a fresh clone (empty compilation cache, 2 cores) the suite took 380 s at the
default level and 284 s at level 0. The programs compute the same mathematics; their roundings
may differ (fusion and vectorisation change), which the tests' tolerances allow. One
difference found a fragile gradient: ``h.max``'s gradient counts the positions equal to the
maximum by comparing ``h``, recomputed in another kernel, with it, and that count came out 0
(``xfmr.causal.amortised`` now pools with an argmax). The pages (every profile) compile at the
default level: level 0 slows their training and moved one borderline ci verdict
(``pfn_bayesopt.pfn_minus_gp_forrester_area``), so a page's numbers are always the default
compiler's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

THREADS = 2
CACHE_DIR = "_build/jax-cache"  # under the repository root

SETTINGS = {
    "JAX_PLATFORMS": "cpu",
    "OMP_NUM_THREADS": str(THREADS),
    "OPENBLAS_NUM_THREADS": str(THREADS),
    "MKL_NUM_THREADS": str(THREADS),
    "OPENBLAS_THREAD_TIMEOUT": "4",
    "PYTHONHASHSEED": "0",
    "TQDM_DISABLE": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "XLA_FLAGS": "",
}


# The unit tests' compiler setting (see the module's docstring); pages never get it.
TEST_SETTINGS = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}


def settings(root: str | os.PathLike, *, tests: bool = False) -> dict[str, str]:
    """The environment variables of a run in the repository at ``root``: :data:`SETTINGS`,
    the compilation cache ``<root>/_build/jax-cache`` and, for the unit tests (``tests``),
    :data:`TEST_SETTINGS`."""
    values = {**SETTINGS, "JAX_COMPILATION_CACHE_DIR": str(Path(root).resolve() / CACHE_DIR)}
    return {**values, **TEST_SETTINGS} if tests else values


def apply(root: str | os.PathLike, environ: MutableMapping[str, str] | None = None, *,
          tests: bool = False) -> dict[str, str]:
    """Set :func:`settings` in ``environ`` (default ``os.environ``, which every process started
    afterwards inherits); returns the variables whose value changed, with their old values
    (``""`` where unset). ``tests``: the unit tests' settings (:data:`TEST_SETTINGS` too).

    Thread counts and the platform take effect in processes started afterwards (the kernels)
    and in this one only if numpy and jax are imported after the call.
    """
    environ = os.environ if environ is None else environ
    changed = {}
    for name, value in settings(root, tests=tests).items():
        if environ.get(name) != value:
            changed[name] = environ.get(name, "")
            environ[name] = value
    return changed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for name, value in settings(args[0] if args else os.getcwd()).items():
        print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
