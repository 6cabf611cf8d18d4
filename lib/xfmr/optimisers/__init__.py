"""Part I, curvature and optimisers; pages in ``book/optimisers/``.

- :mod:`lanczos`       Lanczos with full reorthogonalisation, stochastic Lanczos quadrature
- :mod:`blockwise`     per-block Hessian-vector products, block spectra, per-block step sizes
- :mod:`addition_mlp`  the MLP of similar size on the addition task (the contrast model)
- :mod:`block_steps`   Adam's effective step per block, block Frobenius norms from SLQ, spreads
"""
