"""Part VI, standardized structural causal models; pages in ``book/causal/``.

- :mod:`dags`         random DAGs (Erdos-Renyi, scale-free variants, trees), edge weights, tree rootings
- :mod:`scm`          linear SCM, standardized SCM and iSCM: samplers and population covariances
- :mod:`sortability`  Var-, R^2- and CEV-sortability (as CausalDisco) and sort-and-regress
- :mod:`notears`      linear NOTEARS (JAX objective, closed-form gradient, SciPy L-BFGS-B)
- :mod:`graph_metrics` scoring an estimated graph: SHD, F1, AUROC, a learner's edge metrics, causal-learn's CPDAG encoding
- :mod:`amortised`    amortised causal discovery: the AVICI-style transformer (``init_params``, ``forward``)
- :mod:`amortised_data` its training batches: fresh ER graphs and their data, in pure JAX
- :mod:`amortised_training` its binary cross-entropy and training, one model per kind of data
"""
