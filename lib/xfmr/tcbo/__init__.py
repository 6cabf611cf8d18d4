"""Part V, transition-constrained Bayesian optimisation; pages in ``book/tcbo/``.

- :mod:`mdp`        grid MDPs (move tables), backward induction and the DP path planner, brute force
- :mod:`weight_gp`  the GP in weight space: features, prior, update, prediction, pair variances
- :mod:`design`     candidates, the design utility with its Danskin gradient, Frank-Wolfe over paths
- :mod:`runner`     TC-BO and its baselines over whole episodes, vmapped over seeds
"""
