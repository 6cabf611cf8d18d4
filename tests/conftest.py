"""Test-session setup: the book's process settings (:mod:`bookkit.environment`: CPU JAX, thread
counts, compilation cache) with the unit tests' compiler setting (XLA's CPU backend at
optimisation level 0: the tests' time is mostly compilation), then float64 JAX, so that closed forms can be compared with
autodiff to 1e-9 relative; and hypothesis derandomized, so that every run draws the same
examples (a test that passes here passes in CI, and a failure is reproduced by rerunning it)."""

from pathlib import Path

from bookkit import environment

environment.apply(Path(__file__).resolve().parents[1], tests=True)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from hypothesis import settings  # noqa: E402

settings.register_profile("book", derandomize=True, database=None, print_blob=True)
settings.load_profile("book")
