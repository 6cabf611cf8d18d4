"""xfmr: the small verified library behind the companion book.

One idea per module; every closed form is tested against JAX autodiff in float64.

Part I, the Hessian of self-attention (theory)

- :mod:`xfmr.attention`        the single self-attention layer of the paper, its square loss,
  and the autodiff reference for its Hessian and the Gauss-Newton split
- :mod:`xfmr.matrix_calculus`  row-major vectorisation, Kronecker rules, commutation matrix
- :mod:`xfmr.softmax`          first and second derivatives of the softmax
- :mod:`xfmr.moments`          attention moments (mean, covariance, third moment) and ``Z_1``
- :mod:`xfmr.hessian`          closed-form Hessian blocks (Theorems 3.1, 3.2) and block norms

Part I, experiments

- :mod:`xfmr.gpt`              a GPT-2-style decoder written for the book
- :mod:`xfmr.addition`         the paper's digit-addition task
- :mod:`xfmr.curvature`        dense ``H``, ``H_o``, ``H_f`` of any ``Problem`` and Hutchinson
  block-norm estimates
- :mod:`xfmr.sweeps`           the GPT + addition curvature problem and the embedding-scale sweep
- :mod:`xfmr.slopes`           log-log slopes with an uncertainty over seeds
- :mod:`xfmr.gap_factors`      the query-value gap of the Hessian as a product of four factors

Part I, curvature and optimisers

- :mod:`xfmr.lanczos`          Lanczos with full reorthogonalisation, stochastic Lanczos quadrature
- :mod:`xfmr.blockwise`        per-block Hessian-vector products, block spectra, per-block step sizes
- :mod:`xfmr.addition_mlp`     the MLP of similar size on the addition task (the contrast model)
- :mod:`xfmr.ensemble`         K independent models trained in one call
- :mod:`xfmr.block_steps`      Adam's effective step per block, block Frobenius norms from SLQ, spreads

Part II, cross-entropy

- :mod:`xfmr.losses`           cross-entropy, Brier, squared error on values
- :mod:`xfmr.divergences`      distributions on a finite alphabet and divergences between them
- :mod:`xfmr.sources`          Markov-chain sources with exact conditionals
- :mod:`xfmr.bigram`           a tiny next-token model
- :mod:`xfmr.train`            the small deterministic training loop (optax) reused by later parts
- :mod:`xfmr.train_cache`      a long run's trained parameters kept on disk, loaded for equal settings

Part III, K-hop induction heads

- :mod:`xfmr.khop`             the task: pointer maps ``find^e``, ``hop_k``, the paper's data
- :mod:`xfmr.khop_construction` the explicit log-depth transformer that computes ``hop_k``
- :mod:`xfmr.khop_strategy`    trained attention against the pointer maps of composition and doubling

Part IV, transformers and Bayesian optimisation

- :mod:`xfmr.acquisition`      expected improvement, UCB and Thompson sampling
- :mod:`xfmr.objectives`       test functions (Forrester, Branin, Hartmann-3) and GP prior samples
- :mod:`xfmr.bayesopt`         the fixed-shape BayesOpt loop (one ``lax.scan``, vmapped over seeds)
- :mod:`xfmr.bar`              the bar (Riemann) distribution: borders, density, closed-form EI
- :mod:`xfmr.pfn`              prior-fitted networks: prior sampling, the masked transformer, training

Part V, transition-constrained Bayesian optimisation

- :mod:`xfmr.tcbo`             grid MDPs, the DP path planner, the weight-space GP, the design
  utility with its Danskin gradient, Frank-Wolfe, TC-BO and baselines, a runner over seeds

Part VI, standardized causal models

- :mod:`xfmr.dags`             random DAGs (Erdos-Renyi, scale-free variants, trees) and edge weights
- :mod:`xfmr.scm`              linear SCM, standardized SCM and iSCM: samplers and population covariances
- :mod:`xfmr.sortability`      Var-, R^2- and CEV-sortability (as CausalDisco) and sort-and-regress
- :mod:`xfmr.notears`          linear NOTEARS (JAX objective, closed-form gradient, SciPy L-BFGS-B)
- :mod:`xfmr.amortised`        amortised causal discovery: an AVICI-style transformer trained with
  binary cross-entropy on simulated graphs, its batch sampler and edge metrics

Shared

- :mod:`xfmr.validate`         argument checks every module uses (TypeError for a type, ValueError for a value)
- :mod:`xfmr.gp`               exact Gaussian-process regression (Parts IV and V)

The book's tooling is not in this package: the pipeline (execute, render, browser check) and
the benchmarks are the package ``bookkit`` (``lib/bookkit``), which imports ``xfmr``, never
the other way round.
"""

__version__ = "0.1.0"
