"""Shared by every part: argument checks, the training loop and its cache, independent models trained at once, neural-network pieces, the interval of a comparison.

- :mod:`ensemble`     K independent models trained in one call
- :mod:`train`        the small deterministic training loop (optax) reused by later parts
- :mod:`train_cache`  a long run's trained parameters kept on disk, loaded for equal settings
- :mod:`validate`     argument checks every module uses (TypeError for a type, ValueError for a value)
- :mod:`nn`           dense, LayerNorm and masked multi-head attention shared by the book's transformers,
  and cross-entropy from logits
- :mod:`intervals`    the mean and Student-t interval (paired over seeds) that every comparison's verdict reads
- :mod:`linalg`       Cholesky factor and ordered triangular solves of every Gaussian posterior (safe under vmap)
"""
