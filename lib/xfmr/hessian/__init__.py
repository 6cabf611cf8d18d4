"""Part I, the Hessian of self-attention (theory); pages in ``book/hessian/``.

- :mod:`attention`        the single self-attention layer of the paper, its square loss, and the autodiff reference for its Hessian and the Gauss-Newton split
- :mod:`matrix_calculus`  row-major vectorisation, Kronecker rules, commutation matrix
- :mod:`softmax`          first and second derivatives of the softmax
- :mod:`moments`          attention moments (mean, covariance, third moment) and ``Z_1``
- :mod:`blocks`           closed-form Hessian blocks (Theorems 3.1, 3.2) and block norms
"""
