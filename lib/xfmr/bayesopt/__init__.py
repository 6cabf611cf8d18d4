"""Part IV, transformers and Bayesian optimisation; pages in ``book/bayesopt/``.

- :mod:`acquisition`  expected improvement, UCB and Thompson sampling
- :mod:`objectives`   test functions (Forrester, Branin, Hartmann-3) and GP prior samples
- :mod:`loop`         the fixed-shape BayesOpt loop (one ``lax.scan``, vmapped over seeds)
- :mod:`bar`          the bar (Riemann) distribution: borders, density, closed-form EI
- :mod:`pfn`          prior-fitted networks: prior sampling, the masked transformer, training
- :mod:`gp`           exact Gaussian-process regression (Parts IV and V)
"""
