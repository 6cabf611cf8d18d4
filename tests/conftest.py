"""Test-session setup: float64 JAX on the CPU, so that closed forms can be compared with
autodiff to 1e-9 relative."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
