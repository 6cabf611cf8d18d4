"""xfmr: the small verified library behind the companion book.

One subpackage per part of the book, named as the part's folder of pages (``book/<part>/``)
and of tests (``tests/<part>/``), plus a shared core. Each subpackage's docstring lists its
modules; one idea per module; every closed form is tested against JAX autodiff in float64.

=========================  ===============================================  =======================
subpackage                 part                                             pages
=========================  ===============================================  =======================
:mod:`xfmr.core`           shared: checks, training loop, network pieces    (every part)
:mod:`xfmr.hessian`        Part I, the Hessian of self-attention             ``book/hessian/``
:mod:`xfmr.experiments`    Part I, experiments                               ``book/experiments/``
:mod:`xfmr.optimisers`     Part I, curvature and optimisers                  ``book/optimisers/``
:mod:`xfmr.cross_entropy`  Part II, cross-entropy learns distributions       ``book/cross_entropy/``
:mod:`xfmr.khop`           Part III, K-hop induction heads                   ``book/khop/``
:mod:`xfmr.bayesopt`       Part IV, transformers and Bayesian optimisation   ``book/bayesopt/``
:mod:`xfmr.tcbo`           Part V, transition-constrained BayesOpt           ``book/tcbo/``
:mod:`xfmr.causal`         Part VI, standardized structural causal models    ``book/causal/``
=========================  ===============================================  =======================

A part imports the core and earlier parts only (in the order above), and no kernel imports
the book's tooling: the pipeline (execute, render, browser check) and the benchmarks are the
package ``bookkit`` (``lib/bookkit``), which imports ``xfmr``, never the other way round
(``tests/test_layout.py`` checks both).
"""

__version__ = "0.1.0"
