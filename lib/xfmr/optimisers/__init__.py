"""Part I, curvature and optimisers; pages in ``book/optimisers/``.

- :mod:`lanczos`       Lanczos with full reorthogonalisation, stochastic Lanczos quadrature
- :mod:`blockwise`     per-block Hessian-vector products, block spectra, per-block step sizes
- :mod:`addition_mlp`  the MLP of similar size on the addition task (the contrast model)
- :mod:`block_steps`   Adam's per-block rate and update/gradient ratio, block Frobenius norms
- :mod:`block_adam`    block-wise Adam (one second moment per block, as Adam-mini)
- :mod:`block_rates`   block-wise SGD's rates from the curvature, fixed or re-probed
- :mod:`heterogeneity` the JS^0 block-heterogeneity score of Zhang et al. (SLQ densities)
- :mod:`warmup`        linear learning-rate warmup per model, and the sharpness lambda_max
"""
