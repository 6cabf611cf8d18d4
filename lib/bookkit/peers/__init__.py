"""Side by side with the paper's own tools: PyTorch and curvlinops (``make peers``).

This package needs the peer environment ``.venv-peers`` (PyTorch 2.13.0 CPU and
``curvlinops-for-pytorch``, see ``requirements-peers.lock``); nothing else in the book imports
it, and the kernels (``xfmr``) never do.

- :mod:`bookkit.peers.torch_gpt`: the Part I decoder of :mod:`xfmr.experiments.gpt` written once more in
  PyTorch, with the JAX weights loaded into it, and the bare attention layer of
  :mod:`xfmr.hessian.attention`.
- :mod:`bookkit.peers.curvature`: exact blocks and Hutchinson estimates from curvlinops'
  linear operators.
- :mod:`bookkit.peers.bench`: the growth-rate unit timed with both pipelines in one run
  (``make bench-peers``, rows in ``book/_data/peers.json``).
"""
