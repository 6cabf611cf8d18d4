"""Part VI, standardized structural causal models; pages in ``book/causal/``.

- :mod:`dags`         random DAGs (Erdos-Renyi, scale-free variants, trees) and edge weights
- :mod:`scm`          linear SCM, standardized SCM and iSCM: samplers and population covariances
- :mod:`sortability`  Var-, R^2- and CEV-sortability (as CausalDisco) and sort-and-regress
- :mod:`notears`      linear NOTEARS (JAX objective, closed-form gradient, SciPy L-BFGS-B)
- :mod:`amortised`    amortised causal discovery: an AVICI-style transformer trained with binary cross-entropy on simulated graphs, its batch sampler and edge metrics
"""
