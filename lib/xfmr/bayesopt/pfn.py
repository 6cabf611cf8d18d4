"""A prior-data fitted network (PFN): a transformer trained on datasets drawn from a prior,
whose output is the posterior predictive distribution (Mueller et al., ICLR 2022).

Training objective: draw a dataset from the prior, split it into a context D (the first
``n_ctx`` points) and queries (x, y) (the rest); minimise E[-log q_theta(y | x, D)] with
q_theta a bar distribution (:mod:`xfmr.bayesopt.bar`). Its minimiser is the posterior predictive
p(y | x, D): the expected loss is E[KL(p(.|x,D) || q_theta(.|x,D))] plus a constant.

Architecture (one dataset of N points, the first ``n_ctx`` of them the context):

- token i = W_x x_i + [i < n_ctx] W_y y_i (no positional encoding: the model cannot know the
  order of the context);
- attention mask: token i may attend to token j iff j < n_ctx (a context token) or j == i, so
  context tokens see the context, and each query sees the context and itself but never another
  query: all queries are predicted in one pass, independently;
- pre-LayerNorm transformer layers (multi-head attention, GELU MLP), output projections
  initialised at zero; decoder LayerNorm -> Linear -> GELU -> Linear to B bucket logits.

Prior sampling: x uniform on [0, 1]^d, y = f(x) + eps with f ~ GP(0, RBF(l, s^2)) and
eps ~ N(0, sigma^2); ``lengthscale``/``outputscale`` may be one per dataset (a hyper-prior).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.bayesopt import bar
from xfmr.core.validate import check_array, check_finite, check_int

__all__ = ["PFNConfig", "init_params", "forward", "predict", "sample_gp_datasets", "loss_fn", "fit",
           "loguniform_lengthscale", "fit_with_hyperprior",
           "make_sampler", "n_parameters", "seconds_per_step", "paper_config", "paper_seconds_per_step",
           "paper_cost_text"]


class PFNConfig(NamedTuple):
    """Sizes of a PFN. ``max_context``: the longest context it is trained on (and accepts);
    ``n_points``: points per training dataset (context + queries), > max_context."""

    d_in: int = 1
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 128
    n_buckets: int = 100
    max_context: int = 30
    n_points: int = 40


_F32 = jnp.float32


def _dense(key, n_in, n_out, scale=None, zero=False):
    if zero:
        return {"w": jnp.zeros((n_in, n_out), _F32), "b": jnp.zeros(n_out, _F32)}
    scale = 1.0 / np.sqrt(n_in) if scale is None else scale
    return {"w": (scale * jax.random.normal(key, (n_in, n_out), _F32)).astype(_F32), "b": jnp.zeros(n_out, _F32)}


def _ln(n):
    return {"g": jnp.ones(n, _F32), "b": jnp.zeros(n, _F32)}


def init_params(key, config: PFNConfig) -> dict:
    """Parameters (a float32 pytree, also when x64 is enabled); attention and MLP output
    projections start at zero."""
    c = config
    for name in ("d_in", "d_model", "n_heads", "n_layers", "d_ff", "n_buckets", "max_context", "n_points"):
        check_int(getattr(c, name), f"config.{name}", minimum=1)
    if c.d_model % c.n_heads:
        raise ValueError(f"config.d_model ({c.d_model}) must be a multiple of config.n_heads ({c.n_heads})")
    if c.n_points <= c.max_context:
        raise ValueError(f"config.n_points ({c.n_points}) must exceed config.max_context ({c.max_context})")
    keys = iter(jax.random.split(key, 4 + 4 * c.n_layers))
    layers = []
    for _ in range(c.n_layers):
        layers.append({"ln1": _ln(c.d_model), "qkv": _dense(next(keys), c.d_model, 3 * c.d_model),
                       "out": _dense(next(keys), c.d_model, c.d_model, zero=True),
                       "ln2": _ln(c.d_model), "ff1": _dense(next(keys), c.d_model, c.d_ff),
                       "ff2": _dense(next(keys), c.d_ff, c.d_model, zero=True)})
    return {"x_enc": _dense(next(keys), c.d_in, c.d_model, scale=1.0),
            "y_enc": _dense(next(keys), 1, c.d_model, scale=1.0),
            "layers": layers, "ln_f": _ln(c.d_model),
            "dec1": _dense(next(keys), c.d_model, c.d_ff),
            "dec2": _dense(next(keys), c.d_ff, c.n_buckets, zero=True)}


def n_parameters(params) -> int:
    """Number of scalar parameters."""
    return int(sum(np.size(p) for p in jax.tree_util.tree_leaves(params)))


def _layer_norm(p, h):
    mu = jnp.mean(h, -1, keepdims=True)
    var = jnp.var(h, -1, keepdims=True)
    return (h - mu) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]


def _apply(p, h):
    return h @ p["w"] + p["b"]


def forward(params, config: PFNConfig, x, y, n_ctx, n_keys: int | None = None) -> jax.Array:
    """Bucket logits (N, B) for every point of one dataset x (N, d), y (N,).

    Points 0..n_ctx-1 are the context (their y is read); points n_ctx..N-1 are queries (their y
    is ignored). Rows of the output at context points are not predictions. ``n_ctx`` may be
    traced. Traceable; no argument checks (see :func:`predict`).

    ``n_keys`` (static, optional): a bound n_ctx <= n_keys known at trace time. Then only the
    first n_keys tokens can be attended to (besides each token itself), and each layer computes
    an (N, n_keys + 1) score matrix instead of (N, N): the same outputs up to float32 rounding
    (the dropped entries have weight exp(-1e30) = 0), O(N n_keys) instead of O(N^2) attention
    work. ``None``: the full (N, N) masked attention.
    """
    c = config
    N = x.shape[0]
    idx = jnp.arange(N)
    is_ctx = (idx < n_ctx).astype(x.dtype)
    h = _apply(params["x_enc"], x) + is_ctx[:, None] * _apply(params["y_enc"], y[:, None])
    S = N if n_keys is None else min(int(n_keys), N)
    # token i may attend to key j < S iff j < n_ctx or j == i; a token i >= S also to itself
    allowed = (idx[None, :S] < n_ctx) | (idx[:, None] == idx[None, :S])
    split = S < N
    hd = c.d_model // c.n_heads
    for lp in params["layers"]:
        z = _layer_norm(lp["ln1"], h)
        q, k, v = jnp.split(_apply(lp["qkv"], z), 3, axis=-1)
        q, k, v = (t.reshape(N, c.n_heads, hd) for t in (q, k, v))
        scale = float(hd) ** -0.5   # a Python float: keeps float32
        s = jnp.where(allowed[None], jnp.einsum("ihd,jhd->hij", q, k[:S]) * scale, -1e30)
        if split:   # one more column: each token's score with itself, kept for tokens i >= S
            s_self = jnp.where(idx >= S, jnp.einsum("ihd,ihd->hi", q, k) * scale, -1e30)
            a = jax.nn.softmax(jnp.concatenate([s, s_self[..., None]], axis=-1), axis=-1)
            o = jnp.einsum("hij,jhd->ihd", a[..., :S], v[:S]) + jnp.transpose(a[..., S])[..., None] * v
        else:
            o = jnp.einsum("hij,jhd->ihd", jax.nn.softmax(s, axis=-1), v)
        h = h + _apply(lp["out"], o.reshape(N, c.d_model))
        z = _layer_norm(lp["ln2"], h)
        h = h + _apply(lp["ff2"], jax.nn.gelu(_apply(lp["ff1"], z)))
    z = _layer_norm(params["ln_f"], h)
    return _apply(params["dec2"], jax.nn.gelu(_apply(params["dec1"], z)))


def predict(params, config: PFNConfig, x_ctx, y_ctx, x_query) -> jax.Array:
    """Logits (m, B) of the posterior predictive at x_query (m, d) given the context
    x_ctx (n, d), y_ctx (n,), with 0 <= n <= config.max_context."""
    x_ctx = check_finite(check_array(x_ctx, "x_ctx", ndim=2, kind="number"), "x_ctx")
    y_ctx = check_finite(check_array(y_ctx, "y_ctx", ndim=1, kind="number"), "y_ctx")
    x_query = check_finite(check_array(x_query, "x_query", ndim=2, kind="number"), "x_query")
    for name, arr in (("x_ctx", x_ctx), ("x_query", x_query)):
        if arr.shape[1] != config.d_in:
            raise ValueError(f"{name} must have d = {config.d_in} columns (the input dimension the "
                             f"model was trained for), got shape {arr.shape}")
    if y_ctx.shape[0] != x_ctx.shape[0]:
        raise ValueError(f"y_ctx must have one entry per row of x_ctx ({x_ctx.shape[0]}), got {y_ctx.shape}")
    n = x_ctx.shape[0]
    if n > config.max_context:
        raise ValueError(f"the context has {n} points, longer than the model was trained for "
                         f"(config.max_context = {config.max_context})")
    return _predict(params, config, x_ctx.astype(jnp.float32), y_ctx.astype(jnp.float32),
                    x_query.astype(jnp.float32))


def _predict(params, config, x_ctx, y_ctx, x_query):
    x = jnp.concatenate([x_ctx, x_query])
    y = jnp.concatenate([y_ctx, jnp.zeros(x_query.shape[0], y_ctx.dtype)])
    n = x_ctx.shape[0]
    return _forward_jit(params, config, x, y, n, n)[n:]


_forward_jit = jax.jit(forward, static_argnums=(1, 4, 5))


def sample_gp_datasets(key, batch: int, n_points: int, d: int, *, lengthscale, outputscale, noise):
    """x (batch, n_points, d) uniform on [0,1]^d and y (batch, n_points) from the GP prior
    with noise; lengthscale/outputscale scalars or (batch,) arrays (a hyper-prior)."""
    kx, kf = jax.random.split(key)
    x = jax.random.uniform(kx, (batch, n_points, d))
    ls = jnp.broadcast_to(jnp.asarray(lengthscale, x.dtype), (batch,))
    os_ = jnp.broadcast_to(jnp.asarray(outputscale, x.dtype), (batch,))

    def one(k, xi, l, s):
        d2 = jnp.sum((xi[:, None, :] - xi[None, :, :]) ** 2, -1)
        K = s * jnp.exp(-d2 / (2 * l**2)) + (noise + 1e-5 * s) * jnp.eye(n_points)
        return jnp.linalg.cholesky(K) @ jax.random.normal(k, (n_points,))

    y = jax.vmap(one)(jax.random.split(kf, batch), x, ls, os_)
    return x, y


def make_sampler(config: PFNConfig, batch: int, *, lengthscale, outputscale, noise, hyperprior=None):
    """``sample_batch(key) -> (x, y, n_ctx)`` for :func:`xfmr.core.train.train`: one context size per
    batch, uniform on 0..max_context. ``hyperprior(key, batch) -> (lengthscale, outputscale)``
    (arrays of shape (batch,)) overrides the fixed values when given. The datasets are drawn in
    the default float type (float64 under x64) and returned as float32, the model's type."""
    def sample_batch(key):
        kn, kh, kd = jax.random.split(key, 3)
        n_ctx = jax.random.randint(kn, (), 0, config.max_context + 1)
        ls, os_ = (lengthscale, outputscale) if hyperprior is None else hyperprior(kh, batch)
        x, y = sample_gp_datasets(kd, batch, config.n_points, config.d_in,
                                  lengthscale=ls, outputscale=os_, noise=noise)
        return x.astype(_F32), y.astype(_F32), n_ctx
    return sample_batch


def loss_fn(config: PFNConfig, borders):
    """``loss(params, (x, y, n_ctx))``: mean bar-distribution NLL over the query points."""
    def loss(params, batch):
        x, y, n_ctx = batch
        logits = jax.vmap(lambda xi, yi: forward(params, config, xi, yi, n_ctx))(x, y)
        logp = bar.log_density(logits, borders, y)
        w = (jnp.arange(x.shape[1]) >= n_ctx).astype(logp.dtype)
        return -jnp.sum(logp * w) / (x.shape[0] * jnp.sum(w))
    return loss


def loguniform_lengthscale(ls_min: float, ls_max: float, outputscale: float = 1.0):
    """A hyper-prior for :func:`make_sampler`: lengthscale log-uniform on [ls_min, ls_max],
    outputscale fixed. Returns ``hyperprior(key, batch) -> (lengthscale (batch,), outputscale (batch,))``."""
    if not 0 < ls_min < ls_max:
        raise ValueError(f"need 0 < ls_min < ls_max, got ls_min={ls_min}, ls_max={ls_max}")

    def hyperprior(key, batch):
        u = jax.random.uniform(key, (batch,))
        return jnp.exp(np.log(ls_min) + u * (np.log(ls_max) - np.log(ls_min))), jnp.full((batch,), outputscale)
    return hyperprior


def fit(config: PFNConfig, borders, sampler, key, *, n_steps: int, learning_rate: float, warmup_steps: int):
    """Train a PFN with :func:`xfmr.core.train.train`: Adam, linear warm-up then cosine decay to
    learning_rate / 20, gradients clipped at global norm 1. Returns the ``TrainResult``."""
    import optax

    from xfmr.core.train import train

    k_init, k_train = jax.random.split(key)
    schedule = optax.warmup_cosine_decay_schedule(0.0, learning_rate, warmup_steps, n_steps, learning_rate / 20)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(schedule))
    return train(loss_fn(config, borders), init_params(k_init, config), sampler, optimizer, n_steps, k_train, desc="PFN")


def fit_with_hyperprior(config: PFNConfig, hyperprior, key, *, noise: float, batch_size: int, n_steps: int,
                        learning_rate: float, warmup_steps: int):
    """Train a PFN on GP datasets whose (lengthscale, outputscale) come from ``hyperprior``
    (e.g. :func:`loguniform_lengthscale`, outputscale 1) with noise variance ``noise``.

    The buckets are :func:`xfmr.bayesopt.bar.normal_borders` for N(0, 1 + noise) (the prior's marginal of
    y at outputscale 1); training is :func:`fit`. Returns ``(borders, TrainResult, cpu_seconds)``,
    the last the CPU time of this process spent in training (compilation included).
    """
    borders = bar.normal_borders(config.n_buckets, (1.0 + noise) ** 0.5)
    sampler = make_sampler(config, batch_size, lengthscale=None, outputscale=None, noise=noise, hyperprior=hyperprior)
    t0 = time.process_time()
    result = fit(config, borders, sampler, key, n_steps=n_steps, learning_rate=learning_rate, warmup_steps=warmup_steps)
    return borders, result, time.process_time() - t0


def seconds_per_step(config: PFNConfig, borders, batch: int, *, probe_batch: int = 2, repeats: int = 2) -> float:
    """Measured CPU seconds of one Adam training step of ``config`` at ``batch`` datasets.

    Times ``repeats`` jitted steps (after one compiling call) at ``probe_batch`` datasets and
    scales linearly to ``batch`` (the step's work is linear in the batch), so that a model far
    too large to train here can be costed in seconds. The borders are an argument of the
    compiled step, not a constant in it, so one ``config`` compiles to one program whatever the
    borders (the persistent compilation cache then serves every caller). Returns the estimate
    in CPU seconds of this process (``time.process_time``).
    """
    import optax

    batch = check_int(batch, "batch", minimum=1)
    probe_batch = check_int(probe_batch, "probe_batch", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    borders = bar.check_borders(borders)
    params = init_params(jax.random.key(0), config)
    optimizer = optax.adam(1e-3)
    sampler = make_sampler(config, probe_batch, lengthscale=0.2, outputscale=1.0, noise=0.01)

    @jax.jit
    def step(p, s, key, borders):
        value, grads = jax.value_and_grad(loss_fn(config, borders))(p, sampler(key))
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    state = optimizer.init(params)
    jax.block_until_ready(step(params, state, jax.random.key(1), borders))
    t0 = time.process_time()
    for r in range(repeats):
        params, state, _ = jax.block_until_ready(step(params, state, jax.random.key(2 + r), borders))
    return (time.process_time() - t0) / repeats * batch / probe_batch


def paper_config(n_layers: int = 6, *, max_context: int = 30, n_points: int = 40) -> PFNConfig:
    """The PFN paper's model (Mueller et al. 2022): width 512, 4 heads, feed-forward 1024, 1000
    buckets, ``n_layers`` layers (6 in the paper), on this book's 1-D datasets."""
    return PFNConfig(d_in=1, d_model=512, n_heads=4, n_layers=check_int(n_layers, "n_layers", minimum=1),
                     d_ff=1024, n_buckets=1000, max_context=max_context, n_points=n_points)


PAPER_PROBE_POINTS = 40   # points per dataset at which the paper model's step is timed


def paper_seconds_per_step(n_layers: int, *, max_context: int, n_points: int, batch: int, scale: float) -> float:
    """:func:`seconds_per_step` of :func:`paper_config` at ``batch`` datasets of ``n_points``
    points, ``scale`` the target scale of the equal-mass buckets.

    Timed with one step at one dataset of ``PAPER_PROBE_POINTS`` points (context up to 30),
    whatever the caller's sizes, and scaled linearly to ``n_points``: every page then times the
    same compiled program (shared through the persistent compilation cache), and the step's
    work is linear in the points but for the attention scores, about 2% of a step at width
    512 and 40 points (2 * 40 * 512 of the 2.1M multiply-adds per point and layer).
    """
    n_points = check_int(n_points, "n_points", minimum=2)
    check_int(max_context, "max_context", minimum=1, maximum=n_points - 1)
    config = paper_config(n_layers, max_context=PAPER_PROBE_POINTS - 10, n_points=PAPER_PROBE_POINTS)
    per_probe = seconds_per_step(config, bar.normal_borders(config.n_buckets, scale), batch, probe_batch=1, repeats=1)
    return per_probe * n_points / PAPER_PROBE_POINTS


def paper_cost_text(per_step: float, n_layers: int, batch: int, page_per_step: float, n_steps: int = 50_000) -> str:
    """One line on the paper model's training cost: ``per_step`` CPU-s per step (from
    :func:`paper_seconds_per_step`) of the ``n_layers`` model at ``batch``, this page's own
    ``page_per_step``, and the CPU-days of ``n_steps`` steps."""
    return (f"measured ({n_layers} layers): {per_step:.1f} CPU-s per step at batch {batch} (this page's model: "
            f"{page_per_step:.2f}); {n_steps:,} steps = {per_step * n_steps / 86400:.0f} CPU-days on this machine")
