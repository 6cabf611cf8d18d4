"""Benchmarks of the book's kernels (``make bench``).

Every module of this package may define functions named ``bench_*``; each takes no argument
and returns a list of rows ``{"benchmark", "size", "seconds", "cpu_seconds", "statistic",
"goal", "note", ...}``, timed with :func:`bookkit.bench.timing.measure` (``statistic`` names
what ``seconds`` is: the median of how many calls, compilation in or out). A measurement that
needs its own process (peak memory, a cold start) runs with
:func:`bookkit.bench.isolated.run_isolated`.
``python -m bookkit.bench`` runs them all and writes one JSON table that the book's performance
page renders. Speed and memory goals live here, never in timed tests.
"""
