"""Benchmarks of the book's kernels (``make bench``).

Every module of this package may define functions named ``bench_*``; each takes no argument
and returns a list of rows ``{"benchmark", "size", "seconds", "goal", "note", ...}``.
``python -m bookkit.bench`` runs them all and writes one JSON table that the book's performance
page renders. Speed and memory goals live here, never in timed tests.
"""
