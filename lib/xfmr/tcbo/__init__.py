"""Part V, transition-constrained Bayesian optimisation; pages in ``book/tcbo/``.

- :mod:`tcbo`  grid MDPs, the DP path planner, the weight-space GP, the design utility with its Danskin gradient, Frank-Wolfe, TC-BO and baselines, a runner over seeds
"""
