"""xfmr: the small verified library behind the companion book.

One idea per module:

- :mod:`xfmr.attention`  the single self-attention layer of the paper, its loss, and the
  autodiff reference for its Hessian and the Gauss-Newton split.
- :mod:`xfmr.book`       the book's pipeline (execute pages, render, check in a browser).
"""

__version__ = "0.1.0"
