r"""Training data of the amortised structure learner (:mod:`xfmr.causal.amortised`): fresh graphs and their data.

Every data set of a batch comes from its own graph: an ER-k DAG with weights
:math:`\pm U[\mathrm{low}, \mathrm{high}]` (:func:`xfmr.causal.dags.erdos_renyi_ordered`,
:func:`xfmr.causal.dags.random_weights`) and ``n`` samples of the SCM, standardized SCM or iSCM
on it (:func:`xfmr.causal.scm.sample_in_order`), all in pure JAX, so a training step draws its
batch inside ``jit``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from xfmr.causal import dags, scm
from xfmr.core.validate import check_choice, check_float_dtype, check_int, check_real

__all__ = ["sample_graphs_and_data"]


def sample_graphs_and_data(key: jax.Array, batch_size: int, d: int, n: int, kind: str = "scm", k: float = 1.0,
                           low: float = 0.5, high: float = 2.0, dtype=jnp.float32) -> tuple[jax.Array, jax.Array]:
    """A training batch: ``batch_size`` fresh ER-k graphs on ``d`` nodes and a data set from each.

    Graph ``b`` and its data come from ``split(key, batch_size)[b]``.

    Returns:
        ``(Xs, As)``: data ``(B, n, d)`` of the given ``kind`` (``"scm"``, ``"standardized"``,
        ``"iscm"``; unit noise variances) and edge indicators ``(B, d, d)``, both of ``dtype``.
    """
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    d = check_int(d, "d", minimum=2)
    n = check_int(n, "n", minimum=2)
    kind = check_choice(kind, "kind", scm.KINDS)
    k = check_real(k, "k", minimum=0.0, strict_minimum=True)
    low = check_real(low, "low", minimum=0.0, strict_minimum=True)
    high = check_real(high, "high", minimum=low)
    dtype = check_float_dtype(dtype)
    return _sample(key, batch_size, d, n, kind, k, low, high, dtype)


@partial(jax.jit, static_argnames=("batch_size", "d", "n", "kind", "k", "low", "high", "dtype"))
def _sample(key, batch_size, d, n, kind, k, low, high, dtype):
    def one(key):
        k_graph, k_weights, k_data = jax.random.split(key, 3)
        A, order = dags.erdos_renyi_ordered(k_graph, d, k, dtype)
        W = dags.random_weights(k_weights, A, low, high, dtype)
        return scm.sample_in_order(k_data, W, order, n, kind), A.astype(dtype)

    return jax.vmap(one)(jax.random.split(key, batch_size))
