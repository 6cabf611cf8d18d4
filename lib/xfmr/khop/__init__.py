"""Part III, K-hop induction heads; pages in ``book/khop/``.

- :mod:`task`          the task: pointer maps ``find^e``, ``hop_k``, the paper's data
- :mod:`construction`  the explicit log-depth transformer that computes ``hop_k``
- :mod:`strategy`      trained attention against the pointer maps of composition and doubling
"""
