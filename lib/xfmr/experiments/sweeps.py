"""Part I's experiments: the GPT + addition curvature problem and the embedding-scale sweep.

:func:`gpt_problem` turns blocks of a :mod:`xfmr.experiments.gpt` model into a :class:`xfmr.experiments.curvature.Problem`
(``theta -> loss``); :func:`addition_problem` is that problem on a batch of the digit-addition
task (:mod:`xfmr.experiments.addition`), with the loss on the answer digits; :func:`sigma_sweep` estimates
the block norms of ``H``, ``H_o`` and ``H_f`` over a range of embedding scales ``sigma``, one
seed at a time, each seed's model and batch given by :func:`sweep_instance` (so that a page can
look at exactly the models the sweep measured).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.experiments.addition import answer_positions, make_batch, seq_len
from xfmr.experiments.curvature import (CURVATURES, Problem, cross_entropy_loss, get_path, hutchinson_samples,
                            mean_squared_error_loss, set_path)
from xfmr.experiments.gpt import GPTConfig, embed, forward_from_embedding, head, init_params
from xfmr.core.validate import check_callable, check_choice, check_instance, check_int

__all__ = ["gpt_problem", "linear_head_applies", "addition_problem", "SweepInstance",
           "sweep_instance", "sigma_sweep", "LOSSES"]

LOSSES = ("ce", "mse")


def linear_head_applies(config: GPTConfig, paths: Sequence[Sequence]) -> bool:
    """Whether :func:`gpt_problem`'s ``linear_head`` is exact for these blocks: no LayerNorm,
    ReLU, and every path in an attention block ``("blocks", l, "attn", ...)``."""
    return config.layer_norm == "none" and config.activation == "relu" and all(
        len(p) >= 3 and p[0] == "blocks" and p[2] == "attn" for p in paths)


def gpt_problem(params: dict, config: GPTConfig, x: jax.Array, paths: Sequence[Sequence],
                loss_fn: Callable, positions=None, linear_head: bool = False) -> Problem:
    """The problem ``theta -> loss`` for the blocks ``paths`` of a :mod:`xfmr.experiments.gpt` model.

    Args:
        params: GPT parameters; the blocks at ``paths`` become ``theta`` (others fixed).
        config: its ``GPTConfig``.
        x: the embedded input ``(B, n, d)`` (e.g. ``sigma * base_embedding``), held fixed.
        paths: e.g. ``[("blocks", 0, "attn", "W_Q"), ("blocks", 0, "attn", "W_V")]``.
        loss_fn: a function of the logits at ``positions``.
        positions: output positions (e.g. the answer positions of the addition task).
        linear_head: a faster, equivalent problem when the part of the network after the
            last attention is piecewise linear (ReLU MLP, no LayerNorm) and every path is an
            attention block (of any layer), so that the head's own weights are fixed. The
            output becomes the residual ``r`` right after the last attention, and the loss
            ``L(z_0 + M (r - r_0))`` uses the per-token Jacobian ``M_t = dz_t / dr_t``
            (``V x d``) of the head at the current point. Since the head has zero curvature
            almost everywhere, ``H``, ``H_o = J^T M^T (d^2 L) M J`` and
            ``H_f = sum (M^T g)_k d^2 r_k`` are unchanged, while every probe skips the last
            MLP (it is traversed ``V`` times once, to build ``M``, instead of twice per
            probe).
    """
    check_instance(config, "config", GPTConfig)
    if len(paths) == 0:
        raise ValueError("paths must name at least one parameter block, got none")
    check_callable(loss_fn, "loss_fn")
    theta = tuple(get_path(params, p) for p in paths)

    def with_theta(th):
        p = params
        for path, t in zip(paths, th):
            p = set_path(p, path, t)
        return p

    if not linear_head:
        def out_fn(th):
            return forward_from_embedding(with_theta(th), x, config, positions=positions)

        return Problem(out_fn, loss_fn, theta)

    if not linear_head_applies(config, paths):
        raise ValueError("linear_head needs layer_norm='none', activation='relu' and every "
                         "path in an attention block ('blocks', l, 'attn', ...), got "
                         f"{config.layer_norm!r}, {config.activation!r}, {list(paths)}")

    def out_fn(th):
        return forward_from_embedding(with_theta(th), x, config, positions=positions,
                                      stop_after_last_attention=True)

    r0 = out_fn(theta)
    token_head = lambda r: head(params, r, config)  # noqa: E731
    z0 = token_head(r0)
    M = jax.vmap(jax.vmap(jax.jacrev(token_head)))(r0)          # (B, m, V, d)

    def lin_loss(r):
        return loss_fn(z0 + jnp.einsum("bmvd,bmd->bmv", M, r - r0))

    return Problem(out_fn, lin_loss, theta)


def addition_problem(params: dict, config: GPTConfig, tokens: jax.Array, paths: Sequence[Sequence],
                     *, embed_scale=1.0, loss: str = "ce", n_digits: int = 5,
                     linear_head: bool = False) -> Problem:
    """:func:`gpt_problem` on a batch of the addition task, the loss on the answer digits.

    The input is the embedding ``embed_scale * (W_E[tokens] + W_pos)``; the loss is the
    mean cross-entropy (``loss="ce"``) or the mean squared error to the one-hot targets
    (``loss="mse"``) of the ``n_digits + 1`` answer digits ``tokens[:, 2 n + 2:]``, from the
    logits at :func:`xfmr.experiments.addition.answer_positions`.
    """
    check_instance(config, "config", GPTConfig)
    check_choice(loss, "loss", LOSSES)
    n_digits = check_int(n_digits, "n_digits", minimum=1)
    if tokens.ndim != 2 or tokens.shape[1] != seq_len(n_digits):
        raise ValueError(f"tokens must have shape (B, {seq_len(n_digits)}), got {tokens.shape}")
    x = embed(params, tokens, embed_scale)
    targets = tokens[:, 2 * n_digits + 2:]
    loss_fn = cross_entropy_loss(targets) if loss == "ce" else mean_squared_error_loss(
        jax.nn.one_hot(targets, config.vocab_size, dtype=x.dtype))
    return gpt_problem(params, config, x, paths, loss_fn, positions=answer_positions(n_digits),
                       linear_head=linear_head)


class SweepInstance(NamedTuple):
    """One seed of :func:`sigma_sweep`: the model, the batch and the probe key."""

    params: dict
    tokens: jax.Array
    probe_key: jax.Array


def sweep_instance(
    config: GPTConfig,
    seed_index: int,
    *,
    batch_size: int,
    dtype=jnp.float64,
    base_seed: int = 1234,
    n_digits: int = 5,
) -> SweepInstance:
    """The model, batch and probe key of seed ``seed_index`` of
    :func:`sigma_sweep`.

    From the key ``base_seed + seed_index``: the GPT initialisation in
    ``dtype``, with a *fixed*
    base embedding ``W_E, W_pos ~ N(0, 1)`` (the sweep scales it by
    ``sigma``), a batch of
    ``batch_size`` addition sequences (digits drawn in the integer type
    as wide as ``dtype``:
    int64 for float64, int32 for float32), and the key of the Hutchinson
    probes.
    """
    check_instance(config, "config", GPTConfig)
    seed_index = check_int(seed_index, "seed_index", minimum=0)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    kp, ke, kx, kb, kq = jax.random.split(
        jax.random.key(base_seed + seed_index), 5
    )
    params = init_params(kp, config, dtype)
    params["embed"] = {
        "W_E": jax.random.normal(
            ke, params["embed"]["W_E"].shape, dtype
        ),
        "W_pos": jax.random.normal(
            kx, params["embed"]["W_pos"].shape, dtype
        ),
    }
    digits = jnp.int64 if jnp.dtype(dtype).itemsize == 8 else jnp.int32
    return SweepInstance(
        params, make_batch(kb, batch_size, n_digits, dtype=digits), kq
    )


def sigma_sweep(
    config: GPTConfig,
    sigmas,
    paths: Sequence[Sequence],
    *,
    n_seeds: int,
    batch_size: int,
    n_probes: int,
    dtype=jnp.float64,
    loss: str = "ce",
    base_seed: int = 1234,
    n_digits: int = 5,
    linear_head: bool | None = None,
    blocks: str = "all",
) -> dict[str, np.ndarray]:
    """Hutchinson block norms of ``H, H_o, H_f`` of a GPT on the
    addition task versus ``sigma``.

    Protocol, per seed ``r``: the model, base embedding and batch of
    :func:`sweep_instance`; for every ``sigma`` the model sees ``sigma *
    (W_E[tok] + W_pos)``
    and the SAME ``n_probes`` Rademacher probes (common random numbers
    across ``sigma``), with
    the loss of :func:`addition_problem`.

    ``linear_head`` (see :func:`gpt_problem`) defaults to True where it
    applies (no LN,
    ReLU, every path an attention block): same result, faster.

    ``blocks="all"`` estimates every block ``(a, b)``;
    ``blocks="diagonal"`` only the
    diagonal blocks ``(a, a)``, each from its own problem ``theta =
    (theta_a,)`` with the
    same probes: the same numbers as the diagonal of ``"all"``, but a
        probe on a block of
    layer ``l`` is then propagated backwards only down to layer ``l``
    (the deep sweeps'
    saving). Off-diagonal entries are then NaN.

    Returns ``{"sigmas": (S,), "H"|"H_o"|"H_f": (n_seeds, S, nb, nb)}``
    with ``nb = len(paths)``
    and entry ``[r, s, a, b]`` the estimate of ``||M_ab||_F``.
    """
    check_instance(config, "config", GPTConfig)
    check_choice(loss, "loss", LOSSES)
    check_choice(blocks, "blocks", ("all", "diagonal"))
    n_seeds = check_int(n_seeds, "n_seeds", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    n_probes = check_int(n_probes, "n_probes", minimum=1)
    n_digits = check_int(n_digits, "n_digits", minimum=1)
    if len(paths) == 0:
        raise ValueError(
            "paths must name at least one parameter block, got none"
        )
    sig = np.asarray(sigmas, dtype=float)
    if (
        sig.ndim != 1
        or sig.size == 0
        or np.any(~(sig > 0))
        or np.any(~np.isfinite(sig))
    ):
        raise ValueError(
            "sigmas must be a non-empty 1-D array of finite positive "
            f"numbers, got {sig}"
        )
    if config.max_len < seq_len(n_digits):
        raise ValueError(
            f"config.max_len must be >= {seq_len(n_digits)}, got "
            f"{config.max_len}"
        )
    if linear_head is None:
        linear_head = linear_head_applies(config, paths)
    nb = len(paths)

    @jax.jit
    def unit(params, tokens, sigma, key):
        def estimate(block_ids):
            problem = addition_problem(
                params,
                config,
                tokens,
                [paths[i] for i in block_ids],
                embed_scale=sigma,
                loss=loss,
                n_digits=n_digits,
                linear_head=linear_head,
            )
            q = hutchinson_samples(
                problem, key, n_probes, key_ids=block_ids
            )
            return {k: jnp.sqrt(jnp.mean(v, -1)) for k, v in q.items()}

        if blocks == "all":
            return estimate(tuple(range(nb)))
        out = {
            k: jnp.full((nb, nb), jnp.nan, dtype) for k in CURVATURES
        }
        for i in range(nb):
            est = estimate((i,))
            out = {
                k: out[k].at[i, i].set(est[k][0, 0]) for k in CURVATURES
            }
        return out

    res = {k: np.zeros((n_seeds, len(sig), nb, nb)) for k in CURVATURES}
    for r in range(n_seeds):
        inst = sweep_instance(
            config,
            r,
            batch_size=batch_size,
            dtype=dtype,
            base_seed=base_seed,
            n_digits=n_digits,
        )
        for s, sigma in enumerate(sig):
            out = unit(
                inst.params,
                inst.tokens,
                jnp.asarray(sigma, dtype),
                inst.probe_key,
            )
            for k in CURVATURES:
                res[k][r, s] = np.asarray(out[k])
    res["sigmas"] = sig
    return res
