"""Part IV, transformers and Bayesian optimisation; pages in ``book/bayesopt/``.

- :mod:`gp`           exact Gaussian-process regression: the RBF Gram function, masked
                      posteriors, type-II maximum likelihood (Parts IV and V)
- :mod:`acquisition`  expected improvement and log-EI, UCB, Thompson sampling; EI of a bar distribution
- :mod:`objectives`   test functions (Forrester, Branin, Hartmann-3) and GP prior samples
- :mod:`loop`         the fixed-shape BayesOpt loop (one ``lax.scan``, vmapped over seeds)
- :mod:`bar`          the bar (Riemann) distribution: borders, density, moments, KL from bucket masses
- :mod:`pfn_model`    the prior-data fitted network: the masked transformer and its predictions
- :mod:`pfn_prior`    the GP prior it is trained on (datasets, hyper-priors, the batch sampler)
- :mod:`pfn_train`    its loss and training runs
- :mod:`pfn_eval`     a PFN against the GP posterior predictive: NLLs, bucket floor, KL per context size
- :mod:`model_average` the exact model average over the hyperparameters (quadrature or
                      importance sampling) and the plug-in, on buckets
"""
