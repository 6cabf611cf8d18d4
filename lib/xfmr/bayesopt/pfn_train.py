"""Training a PFN: the bar-distribution NLL of the queries, and the training runs of Part IV.

Objective: draw a dataset from the prior (:mod:`xfmr.bayesopt.pfn_prior`), split it into a
context D (the first ``n_ctx`` points) and queries (x, y) (the rest); minimise
E[-log q_theta(y | x, D)] with q_theta a bar distribution (:mod:`xfmr.bayesopt.bar`). Its
minimiser is the posterior predictive p(y | x, D): the expected loss is
E[KL(p(.|x,D) || q_theta(.|x,D))] plus a constant.

Two pages use the same PFN of a lengthscale hyper-prior; :func:`trained_hyperprior_pfn`
trains it once per cache folder: the first caller trains and stores it
(:func:`xfmr.core.train_cache.cached_arrays`, keyed by every setting and by the source of the
modules that determine the result), a later or concurrent caller waits for the file lock and
loads the same parameters.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xfmr.bayesopt import bar, pfn_prior
from xfmr.bayesopt.pfn_model import Datasets, PFNConfig, forward, init_params
from xfmr.core.train import TrainResult, train
from xfmr.core.train_cache import cached_arrays

__all__ = ["query_nll", "fit_pfn", "fit_pfn_on_hyperprior", "TrainedPFN", "trained_hyperprior_pfn"]


def query_nll(
    config: PFNConfig, borders
) -> Callable[[Any, Datasets], jax.Array]:
    """``loss(params, batch)``: the mean bar-distribution NLL
    (:func:`xfmr.bayesopt.bar.log_density`) over the query points
    (index >= n_ctx) of a batch of
    :class:`~xfmr.bayesopt.pfn_model.Datasets`."""

    def loss(params, batch: Datasets):
        logp = bar.log_density(
            forward(params, batch, config), borders, batch.y
        )
        w = (jnp.arange(batch.x.shape[-2]) >= batch.n_ctx).astype(
            logp.dtype
        )
        return -jnp.sum(logp * w) / (batch.x.shape[0] * jnp.sum(w))

    return loss


def fit_pfn(config: PFNConfig, borders, sampler, key, *, n_steps: int, learning_rate: float,
            warmup_steps: int) -> TrainResult:
    """Train a PFN with :func:`xfmr.core.train.train` on batches from ``sampler``: Adam, linear
    warm-up then cosine decay to learning_rate / 20, gradients clipped at global norm 1."""
    k_init, k_train = jax.random.split(key)
    schedule = optax.warmup_cosine_decay_schedule(0.0, learning_rate, warmup_steps, n_steps, learning_rate / 20)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(schedule))
    return train(query_nll(config, borders), init_params(k_init, config), sampler, optimizer, n_steps, k_train,
                 desc="PFN")


def fit_pfn_on_hyperprior(config: PFNConfig, hyperprior, key, *, noise: float, batch_size: int, n_steps: int,
                          learning_rate: float, warmup_steps: int) -> tuple[jax.Array, TrainResult]:
    """Train a PFN on GP datasets whose (lengthscale, outputscale) come from ``hyperprior``
    (e.g. :func:`xfmr.bayesopt.pfn_prior.loguniform_lengthscale`, outputscale 1) with noise
    variance ``noise``.

    The buckets are :func:`xfmr.bayesopt.bar.normal_borders` for N(0, 1 + noise) (the prior's
    marginal of y at outputscale 1); training is :func:`fit_pfn`. Returns ``(borders, TrainResult)``.
    """
    borders = bar.normal_borders(config.n_buckets, (1.0 + noise) ** 0.5)
    sampler = pfn_prior.gp_dataset_sampler(config, batch_size, lengthscale=None, outputscale=None, noise=noise,
                                           hyperprior=hyperprior)
    return borders, fit_pfn(config, borders, sampler, key, n_steps=n_steps, learning_rate=learning_rate,
                            warmup_steps=warmup_steps)


class TrainedPFN(NamedTuple):
    """A trained PFN: ``params``, its bucket ``borders``, the training ``losses`` (n_steps,) and
    ``cpu_seconds``, the CPU time of the process that trained it (compilation included)."""

    params: Any
    borders: jax.Array
    losses: np.ndarray
    cpu_seconds: float


_SOURCES = ("xfmr.bayesopt.bar", "xfmr.bayesopt.gp", "xfmr.bayesopt.pfn_model", "xfmr.bayesopt.pfn_prior",
            "xfmr.bayesopt.pfn_train", "xfmr.core.linalg", "xfmr.core.nn", "xfmr.core.train")


def _code_digest() -> str:
    """SHA-256 of the modules that determine a trained PFN, and of the JAX and optax versions."""
    h = hashlib.sha256(f"jax {jax.__version__} optax {optax.__version__}".encode())
    for name in _SOURCES:
        h.update(Path(sys.modules[name].__file__).read_bytes())
    return h.hexdigest()[:16]


def _once(directory: str | os.PathLike | None, name: str, settings: dict, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per ``directory`` and ``settings``: under an exclusive lock on
    ``directory / f"{name}.lock"``, :func:`xfmr.core.train_cache.cached_arrays` loads a stored
    result or computes and stores it (its "loaded" line is not printed: both ways give the same
    arrays). ``directory`` None: ``compute()``."""
    if directory is None:
        return jax.tree.map(np.asarray, compute())
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.redirect_stdout(io.StringIO()):
            return cached_arrays(directory, name, settings, compute)


def trained_hyperprior_pfn(config: PFNConfig, *, ls_min: float, ls_max: float, noise: float, seed: int,
                           batch_size: int, n_steps: int, learning_rate: float, warmup_steps: int,
                           cache_dir: str | os.PathLike | None = None) -> TrainedPFN:
    """The PFN of :func:`fit_pfn_on_hyperprior` for the hyper-prior
    :func:`~xfmr.bayesopt.pfn_prior.loguniform_lengthscale` ``(ls_min, ls_max)`` (outputscale
    1), trained from ``jax.random.key(seed)``; once per ``cache_dir`` (module docstring), or
    every call when ``cache_dir`` is None."""
    settings = {**config._asdict(), "ls_min": ls_min, "ls_max": ls_max, "noise": noise, "seed": seed,
                "batch_size": batch_size, "n_steps": n_steps, "learning_rate": learning_rate,
                "warmup_steps": warmup_steps, "code": _code_digest()}

    def compute():
        t0 = time.process_time()
        borders, result = fit_pfn_on_hyperprior(
            config, pfn_prior.loguniform_lengthscale(ls_min, ls_max), jax.random.key(seed), noise=noise,
            batch_size=batch_size, n_steps=n_steps, learning_rate=learning_rate, warmup_steps=warmup_steps)
        jax.block_until_ready(result.params)
        return {"params": result.params, "borders": borders, "losses": result.losses,
                "cpu_seconds": np.float64(time.process_time() - t0)}

    stored = _once(cache_dir, "pfn-hyperprior", settings, compute)
    return TrainedPFN(jax.tree.map(jnp.asarray, stored["params"]), jnp.asarray(stored["borders"]),
                      np.asarray(stored["losses"]), float(stored["cpu_seconds"]))
