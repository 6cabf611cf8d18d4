"""Theorems 3.1 and 3.2 (the closed-form blocks of the bare attention layer) against curvlinops.

curvlinops' Hessian and GGN of ``MSELoss(reduction="mean")`` on ``F = A X W_V`` are the book's
``H`` and ``H_o`` (the loss is ``||F - Y||_F^2 / (L d_V)``); ``H - GGN`` is ``H_f``. All six
blocks of each, softmax and linear attention, to 1e-9 relative.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("curvlinops")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from helpers import relative_error  # noqa: E402

from bookkit.peers import curvature as peers  # noqa: E402
from bookkit.peers.torch_gpt import TorchAttentionLayer, to_torch  # noqa: E402
from xfmr.hessian import attention, blocks  # noqa: E402


def _instance(L, d_V, d_K, seed):
    kx, ky, kq, kk, kv = jax.random.split(jax.random.key(seed), 5)
    X = jax.random.normal(kx, (L, d_V), jnp.float64)
    Y = jax.random.normal(ky, (L, d_V), jnp.float64)
    W = [jax.random.normal(k, s, jnp.float64) / np.sqrt(d_V)
         for k, s in ((kq, (d_V, d_K)), (kk, (d_V, d_K)), (kv, (d_V, d_V)))]
    return X, Y, *W


@pytest.mark.parametrize("softmax", [True, False])
@pytest.mark.parametrize("L,d_V,d_K", [(5, 4, 3), (3, 6, 2)])
def test_closed_forms_match_curvlinops(L, d_V, d_K, softmax):
    X, Y, W_Q, W_K, W_V = _instance(L, d_V, d_K, seed=L + d_V)
    layer = TorchAttentionLayer(W_Q, W_K, W_V, softmax=softmax)
    ops = peers.operators(layer, torch.nn.MSELoss(), [layer.W_Q, layer.W_K, layer.W_V],
                          to_torch(X), to_torch(Y))
    H_t, G_t = peers.dense_matrices(*ops)
    theirs = {name: attention.split_blocks(M, d_V, d_K)
              for name, M in (("H", H_t), ("H_o", G_t), ("H_f", H_t - G_t))}
    o = blocks.outer_product_blocks(X, W_Q, W_K, W_V, softmax=softmax)
    f = blocks.functional_blocks(X, Y, W_Q, W_K, W_V, softmax=softmax)
    ours = {"H": {k: o[k] + f[k] for k in o}, "H_o": o, "H_f": f}
    scale = np.linalg.norm(H_t)
    for name in ours:
        for key in blocks.BLOCK_KEYS:
            a, b = np.asarray(ours[name][key]), theirs[name][key]
            # exact zeros of the theorems: H_f(V,V) (F is linear in W_V), and with linear
            # attention every diagonal block of H_f (F is linear in each weight alone)
            zero = name == "H_f" and (key == "VV" or (not softmax and key in blocks.DIAGONAL_KEYS))
            if zero:
                assert np.linalg.norm(a) == 0.0 and np.linalg.norm(b) <= 1e-13 * scale, (name, key)
                continue
            assert np.linalg.norm(a) > 1e-6 * scale, (name, key)  # a real block
            assert relative_error(b, a) <= 1e-9, (name, key, relative_error(b, a))
