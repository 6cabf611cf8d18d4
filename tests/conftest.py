"""Test-session setup: the book's process settings (:mod:`bookkit.environment`: CPU JAX, thread
counts, compilation cache), then float64 JAX, so that closed forms can be compared with
autodiff to 1e-9 relative."""

from pathlib import Path

from bookkit import environment

environment.apply(Path(__file__).resolve().parents[1])

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
