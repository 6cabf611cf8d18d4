r"""Amortised causal discovery: a small permutation-equivariant transformer (AVICI-style).

The model of Lorch et al. (2022, "Amortized inference for causal structure learning") reads a
data set :math:`X \in \mathbb{R}^{n \times d}` and returns edge logits :math:`L \in
\mathbb{R}^{d \times d}`, :math:`\sigma(L_{ij})` the predicted probability of the edge
:math:`i \to j`. It is trained with binary cross-entropy on edge indicators of simulated
graphs, so it learns a distribution over edges given data (a product of Bernoullis):

.. math::

    \ell(\theta) = \mathbb{E}_{G, X}\Big[\tfrac{1}{d(d-1)} \sum_{i \ne j}
    \mathrm{BCE}\big(\sigma(L_\theta(X)_{ij}),\, A_{ij}\big)\Big].

Architecture (no positional information along either axis):

1. embed every entry :math:`x_{si}` by a small MLP :math:`\mathbb{R} \to \mathbb{R}^D`,
   giving tokens ``(n, d, D)``;
2. ``n_layers`` layers, each: pre-LayerNorm multi-head attention **across variables** (for
   every sample), an MLP, attention **across samples** (for every variable), an MLP, all residual;
3. LayerNorm, then max- (or mean-) pool over samples: ``(d, D)``;
4. bilinear edge logits :math:`L_{ij} = u_i^\top v_j / \sqrt{D} + b` with
   :math:`u = z U`, :math:`v = z V`; the diagonal is excluded from loss and metrics.

Permuting the variables (columns of ``X``) permutes rows and columns of ``L`` alike
(equivariance); permuting the samples (rows of ``X``) leaves ``L`` unchanged (invariance).

Training data: ER graphs with ``k`` expected edges per node and weights
:math:`\pm U[\mathrm{low}, \mathrm{high}]` drawn in pure JAX (:func:`random_dag`, the
distribution of :func:`xfmr.causal.dags.erdos_renyi` and :func:`xfmr.causal.dags.random_weights`), data from
:func:`xfmr.causal.scm.sample_in_order` (SCM, standardized SCM or iSCM).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xfmr.causal import dags, scm
from xfmr.core.train import TrainResult, train
from xfmr.core.validate import check_array, check_choice, check_int, check_real, is_concrete

__all__ = [
    "Config",
    "init",
    "apply",
    "apply_batch",
    "random_dag",
    "sample_batch",
    "loss",
    "train_models",
    "auroc",
    "edge_metrics",
]


class Config(NamedTuple):
    """Static hyperparameters of the model.

    Attributes:
        d_max: largest number of variables the model accepts (the size it was trained for).
        width: token width ``D``.
        n_layers: layers (each: variable attention, MLP, sample attention, MLP).
        n_heads: attention heads (``width`` must be divisible by it).
        pool: ``"max"`` or ``"mean"`` over samples.
    """

    d_max: int
    width: int = 32
    n_layers: int = 2
    n_heads: int = 4
    pool: str = "max"


def _check_config(config: Config) -> Config:
    if not isinstance(config, Config):
        raise TypeError(f"config must be an amortised.Config, got {type(config).__name__}")
    check_int(config.d_max, "config.d_max", minimum=2)
    check_int(config.width, "config.width", minimum=1)
    check_int(config.n_layers, "config.n_layers", minimum=1)
    check_int(config.n_heads, "config.n_heads", minimum=1)
    check_choice(config.pool, "config.pool", ("max", "mean"))
    if config.width % config.n_heads:
        raise ValueError(f"config.width ({config.width}) must be divisible by config.n_heads ({config.n_heads})")
    return config


def _dense(key, fan_in: int, fan_out: int) -> dict:
    return {"w": jax.random.normal(key, (fan_in, fan_out), jnp.float32) / np.sqrt(fan_in),
            "b": jnp.zeros((fan_out,), jnp.float32)}


def _ln(width: int) -> dict:
    return {"g": jnp.ones((width,), jnp.float32), "b": jnp.zeros((width,), jnp.float32)}


def _block(key, D: int) -> dict:
    k = jax.random.split(key, 4)
    return {"ln1": _ln(D), "qkv": _dense(k[0], D, 3 * D), "out": _dense(k[1], D, D),
            "ln2": _ln(D), "ff1": _dense(k[2], D, 2 * D), "ff2": _dense(k[3], 2 * D, D)}


def init(key: jax.Array, config: Config) -> dict:
    """Initial parameters (float32 pytree) of the model described by ``config``."""
    config = _check_config(config)
    D = config.width
    k_emb1, k_emb2, k_u, k_v, k_layers = jax.random.split(key, 5)
    layers = [{"var": _block(k1, D), "smp": _block(k2, D)}
              for k1, k2 in (jax.random.split(k) for k in jax.random.split(k_layers, config.n_layers))]
    return {"emb1": _dense(k_emb1, 1, D), "emb2": _dense(k_emb2, D, D), "layers": layers,
            "ln_out": _ln(D), "u": _dense(k_u, D, D), "v": _dense(k_v, D, D),
            "bias": jnp.zeros((), jnp.float32)}


def _lin(p, x):
    return x @ p["w"] + p["b"]


def _layer_norm(p, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def _attend(p, h, n_heads: int):
    """Pre-LN multi-head self-attention over axis -2 of ``h (..., T, D)``, then an MLP; residual."""
    D = h.shape[-1]
    q, k, v = jnp.split(_lin(p["qkv"], _layer_norm(p["ln1"], h)), 3, axis=-1)
    split = lambda a: a.reshape(a.shape[:-1] + (n_heads, D // n_heads))   # noqa: E731
    q, k, v = split(q), split(k), split(v)
    a = jax.nn.softmax(jnp.einsum("...thc,...shc->...hts", q, k) / np.sqrt(D // n_heads), axis=-1)
    o = jnp.einsum("...hts,...shc->...thc", a, v).reshape(h.shape)
    h = h + _lin(p["out"], o)
    return h + _lin(p["ff2"], jax.nn.gelu(_lin(p["ff1"], _layer_norm(p["ln2"], h))))


def _forward(params, X, n_heads: int, pool: str):
    """``X (n, d)`` -> logits ``(d, d)``."""
    h = _lin(params["emb2"], jax.nn.gelu(_lin(params["emb1"], X[..., None])))      # (n, d, D)
    for layer in params["layers"]:
        h = _attend(layer["var"], h, n_heads)                                        # across variables
        h = jnp.swapaxes(_attend(layer["smp"], jnp.swapaxes(h, 0, 1), n_heads), 0, 1)  # across samples
    h = _layer_norm(params["ln_out"], h)
    z = h.max(0) if pool == "max" else h.mean(0)                                     # (d, D)
    u, v = _lin(params["u"], z), _lin(params["v"], z)
    return u @ v.T / np.sqrt(z.shape[-1]) + params["bias"]


def _check_data(X, config: Config, batched: bool):
    X = check_array(X, "X", ndim=3 if batched else 2, kind="float").astype(jnp.float32)
    n, d = X.shape[-2:]
    if n < 2:
        raise ValueError(f"X needs n >= 2 samples, got n = {n}")
    if d < 2:
        raise ValueError(f"X needs d >= 2 variables, got d = {d}")
    if d > config.d_max:
        raise ValueError(f"X has d = {d} variables, more than the model was trained for (config.d_max = {config.d_max})")
    if is_concrete(X) and not bool(jnp.all(jnp.isfinite(X))):
        raise ValueError("X must be finite")
    return X


def apply(params: dict, X, config: Config) -> jnp.ndarray:
    """Edge logits ``(d, d)`` for one data set ``X (n, d)``; ``[i, j]`` for the edge ``i -> j``.

    Raises:
        ValueError: ``X`` not 2-D, ``n < 2``, ``d < 2``, ``d > config.d_max``, or not finite.
    """
    config = _check_config(config)
    return _jit_forward(params, _check_data(X, config, False), config.n_heads, config.pool)


def apply_batch(params: dict, Xs, config: Config) -> jnp.ndarray:
    """Edge logits ``(B, d, d)`` for a batch ``Xs (B, n, d)`` (vmapped :func:`apply`)."""
    config = _check_config(config)
    return _jit_forward_batch(params, _check_data(Xs, config, True), config.n_heads, config.pool)


_jit_forward = jax.jit(_forward, static_argnames=("n_heads", "pool"))
_jit_forward_batch = jax.jit(jax.vmap(_forward, in_axes=(None, 0, None, None)), static_argnames=("n_heads", "pool"))


def random_dag(key: jax.Array, d: int, k: float, low: float = 0.5, high: float = 2.0):
    r"""An ER-k DAG with weights, in pure JAX (jit-compatible for static ``d``).

    Same distribution as :func:`xfmr.causal.dags.erdos_renyi` followed by :func:`xfmr.causal.dags.random_weights`:
    every pair joined with probability :math:`\min(2k/(d-1), 0.99)`, oriented along a uniformly
    random order, weight :math:`\pm U[\mathrm{low}, \mathrm{high}]`.

    Returns:
        ``(W, order)``: weights ``(d, d)`` (``W[i, j]`` for ``i -> j``) and a topological order ``(d,)``.
    """
    k_e, k_m, k_s, k_p = jax.random.split(key, 4)
    p = min(2.0 * k / (d - 1), 0.99)
    U = jnp.triu(jax.random.bernoulli(k_e, p, (d, d)), 1)
    mag = jax.random.uniform(k_m, (d, d), jnp.float32, low, high)
    sign = jnp.where(jax.random.bernoulli(k_s, 0.5, (d, d)), 1.0, -1.0)
    order = jax.random.permutation(k_p, d)          # order[a] is the node at position a
    Wo = jnp.where(U, sign * mag, 0.0)
    W = jnp.zeros((d, d), jnp.float32).at[order[:, None], order[None, :]].set(Wo)
    return W, order


def sample_batch(key: jax.Array, batch_size: int, d: int, n: int, kind: str = "scm", k: float = 1.0,
                 low: float = 0.5, high: float = 2.0) -> tuple[jnp.ndarray, jnp.ndarray]:
    """A training batch: ``batch_size`` fresh graphs (:func:`random_dag`) and their data.

    Returns:
        ``(Xs, As)``: data ``(B, n, d)`` float32 of the given ``kind`` (``"scm"``,
        ``"standardized"``, ``"iscm"``) and edge indicators ``(B, d, d)`` float32.
    """
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    d = check_int(d, "d", minimum=2)
    n = check_int(n, "n", minimum=2)
    kind = check_choice(kind, "kind", scm.KINDS)
    k = check_real(k, "k", minimum=0.0, strict_minimum=True)
    low = check_real(low, "low", minimum=0.0, strict_minimum=True)
    high = check_real(high, "high")
    if low > high:
        raise ValueError(f"the weight range needs low <= high, got low = {low} > high = {high}")

    def one(key):
        k_g, k_x = jax.random.split(key)
        W, order = random_dag(k_g, d, k, low, high)
        return scm.sample_in_order(k_x, W, order, n, kind), (W != 0).astype(jnp.float32)

    return jax.vmap(one)(jax.random.split(key, batch_size))


def _bce(logits, A):
    d = A.shape[-1]
    off = 1.0 - jnp.eye(d, dtype=logits.dtype)
    return (optax.sigmoid_binary_cross_entropy(logits, A) * off).sum((-2, -1)) / (d * (d - 1))


def loss(params: dict, batch: tuple, config: Config) -> jnp.ndarray:
    """Mean binary cross-entropy over the off-diagonal edges of a batch ``(Xs (B, n, d), As (B, d, d))``."""
    Xs, As = batch
    logits = jax.vmap(_forward, in_axes=(None, 0, None, None))(params, Xs, config.n_heads, config.pool)
    return _bce(logits, As).mean()


def train_models(key: jax.Array, config: Config, kinds: tuple[str, ...], *, n_steps: int, batch_size: int,
                 n: int, k: float = 1.0, low: float = 0.5, high: float = 2.0, learning_rate: float = 1e-3,
                 chunk: int = 100) -> tuple[dict, TrainResult]:
    """Train one model per data ``kind`` on ``config.d_max`` variables, all in one :func:`xfmr.core.train.train` call.

    The models do not interact: the objective is the sum of their losses, each on its own
    batch of its own kind (the batch keys are split from the step key), and Adam's update is per
    parameter. Training them together compiles the step once. Adam with a linear warm-up over the
    first 5 % of the steps, then cosine decay to 10 % of ``learning_rate``. ``key`` splits into
    the initialisation key and the training key; model ``m`` starts from ``init(split(k_init, M)[m])``.

    Returns:
        ``(params, result)``: ``params[kind]`` the trained parameters of each model and the
        :class:`~xfmr.core.train.TrainResult` (``result.losses`` the per-step BCE summed over the models).
    """
    config = _check_config(config)
    if isinstance(kinds, str) or not kinds:
        raise ValueError(f"kinds must be a non-empty tuple of data kinds, got {kinds!r}")
    for kind in kinds:
        sample_batch(jax.random.PRNGKey(0), 1, config.d_max, n, kind, k, low, high)   # argument checks
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"kinds must not repeat, got {kinds!r}")
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    learning_rate = check_real(learning_rate, "learning_rate", minimum=0.0, strict_minimum=True)
    k_init, k_train = jax.random.split(key)
    params = {kind: init(ki, config) for kind, ki in zip(kinds, jax.random.split(k_init, len(kinds)))}
    warm = max(1, n_steps // 20)
    sched = optax.warmup_cosine_decay_schedule(0.0, learning_rate, warm, max(n_steps, warm + 1),
                                               0.1 * learning_rate)

    def batches(key):
        return {kind: sample_batch(kb, batch_size, config.d_max, n, kind, k, low, high)
                for kind, kb in zip(kinds, jax.random.split(key, len(kinds)))}

    def total(params, batch):
        return sum(loss(params[kind], batch[kind], config) for kind in kinds)

    result = train(total, params, batches, optax.adam(sched), n_steps, k_train, desc="amortised", chunk=chunk)
    return result.params, result


def auroc(labels, scores) -> float:
    """Area under the ROC curve of ``scores`` for boolean ``labels`` (1-D), ties counted 1/2.

    The probability that a random positive scores above a random negative (Mann-Whitney).

    Raises:
        ValueError: shapes differ, or ``labels`` lacks a positive or a negative.
    """
    y = np.asarray(labels).astype(bool).ravel()
    s = np.asarray(scores, dtype=float).ravel()
    if y.shape != s.shape:
        raise ValueError(f"labels and scores must have the same size, got {y.size} and {s.size}")
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        raise ValueError(f"auroc needs both classes, got {pos.size} positives and {neg.size} negatives")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def edge_metrics(W_true, logits, threshold: float = 0.5) -> dict:
    """Per-graph metrics of edge logits ``(d, d)`` against the true graph ``W_true`` ``(d, d)``.

    Returns a dict with ``bce`` (mean off-diagonal binary cross-entropy, nats), ``auroc``
    (off-diagonal entries; nan if the graph has no edge), ``f1`` and ``shd``
    (:func:`xfmr.causal.dags.edge_f1`, :func:`xfmr.causal.dags.shd` of the edges with probability
    ``> threshold``) and ``orient``: the share of true edges ``i -> j`` with
    ``logits[i, j] > logits[j, i]`` (ties 1/2; nan if no edge), which the skeleton does not decide.
    """
    A = np.asarray(W_true) != 0
    L = np.asarray(logits, dtype=float)
    if L.ndim != 2 or L.shape != A.shape:
        raise ValueError(f"logits must have the shape of W_true {A.shape}, got {L.shape}")
    threshold = check_real(threshold, "threshold", minimum=0.0, maximum=1.0)
    d = A.shape[0]
    off = ~np.eye(d, dtype=bool)
    # BCE(sigmoid(l), a) = softplus(l) - a l, stably
    bce = float(np.mean((np.logaddexp(0.0, L) - A * L)[off]))
    est = (1.0 / (1.0 + np.exp(-L)) > threshold) & off
    has_edge = A.any()
    auc = auroc(A[off], L[off]) if has_edge and (~A[off]).any() else float("nan")
    if has_edge:
        i, j = np.nonzero(A)
        orient = float(np.mean((L[i, j] > L[j, i]) + 0.5 * (L[i, j] == L[j, i])))
    else:
        orient = float("nan")
    return {"bce": bce, "auroc": auc, "f1": dags.edge_f1(A, est), "shd": dags.shd(A, est), "orient": orient}
