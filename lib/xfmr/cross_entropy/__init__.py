"""Part II, cross-entropy learns distributions; pages in ``book/cross_entropy/``.

- :mod:`losses`       cross-entropy, Brier, squared error on values
- :mod:`divergences`  distributions on a finite alphabet and divergences between them
- :mod:`sources`      Markov-chain sources with exact conditionals
- :mod:`bigram`       a tiny next-token model
"""
