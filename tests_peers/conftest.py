"""Cross-framework checks (``make peers``): float64 JAX on the CPU beside PyTorch and curvlinops.

These tests need the peer environment ``.venv-peers``; ``make test`` never collects this folder
(``pytest tests``), and each module skips cleanly where torch or curvlinops is missing.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)


def pytest_configure(config):
    # curvlinops' dependency backpack scripts a function at import; torch 2.13 deprecates that
    config.addinivalue_line("filterwarnings",
                            "ignore:`torch.jit.script` is deprecated:DeprecationWarning")
