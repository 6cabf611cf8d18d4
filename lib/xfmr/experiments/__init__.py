"""Part I, experiments on a GPT (the paper's Figures); pages in ``book/experiments/``.

- :mod:`gpt`          a GPT-2-style decoder written for the book
- :mod:`addition`     the paper's digit-addition task
- :mod:`curvature`    dense ``H``, ``H_o``, ``H_f`` of any ``Problem`` and Hutchinson block-norm estimates
- :mod:`sweeps`       the GPT + addition curvature problem and the embedding-scale sweep
- :mod:`slopes`       log-log slopes with an uncertainty over seeds
- :mod:`gap_factors`  the query-value gap of the Hessian as a product of four factors
"""
