"""bookkit: the book's tooling, kept apart from the verified kernels of :mod:`xfmr`.

- :mod:`bookkit.book`   the pipeline: execute pages with papermill, render with Jupyter Book,
  check the rendered site in a real browser
- :mod:`bookkit.bench`  benchmarks (``make bench``), written to ``book/_data/benchmarks.json``

Its dependencies are the ``[book]`` extra of ``pyproject.toml``; no kernel module of
:mod:`xfmr` imports it (``tests/test_layout.py`` checks).
"""
