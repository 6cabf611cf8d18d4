"""Hessian blocks of a loss ``l(theta) = L(f(theta))``: exact dense blocks and Hutchinson
estimates of block Frobenius norms, for the Hessian ``H``, the generalised Gauss-Newton
``G = J^T (d^2 L) J`` (the paper's outer-product Hessian ``H_o``) and ``H - G`` (its
functional Hessian ``H_f = sum_k dL/df_k * d^2 f_k``).

A *problem* is a triple ``(out_fn, loss_fn, theta)``: ``theta`` is a tuple of arrays (the
parameter blocks, e.g. ``(W_Q, W_K, W_V)``), ``out_fn(theta)`` the model output (any shape),
``loss_fn(out)`` a scalar. Block ``(a, b)`` of a matrix ``M`` is the sub-matrix with rows in
block ``a`` and columns in block ``b``, in the row-major (C-order) flattening of each block.

Hutchinson: for a Rademacher probe ``v`` supported on block ``b``
(``E[v v^T] = I``), ``E ||(M v)_a||^2 = ||M_{ab}||_F^2``, so with ``S`` probes
``||M_{ab}||_F ~ sqrt(mean_s ||(M v_s)_a||^2)``. All three matrices are estimated from the
SAME probes, and ``H_f v`` is computed directly as the directional derivative of
``J(theta)^T g`` with ``g = dL/df`` held fixed (not as a difference of two estimates):

.. math::

    G v = J^\\top \\big(\\nabla^2 L\\, (J v)\\big),\\qquad
    H_f v = \\frac{d}{d\\epsilon}\\Big|_0 J(\\theta + \\epsilon v)^\\top g,\\qquad
    H v = G v + H_f v .

One probe costs one forward-tangent + reverse pass with its tangent, and one more reverse
pass; under ``vmap`` over probes the primal computations are shared.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from xfmr.losses import softmax_cross_entropy

__all__ = [
    "get_path", "set_path", "cross_entropy", "mean_squared_error", "gpt_problem",
    "dense_matrices", "exact_block_norms", "products", "hutchinson_samples",
    "hutchinson_block_norms", "sigma_sweep", "KINDS",
]

KINDS = ("H", "G", "Hf")
Problem = tuple  # (out_fn, loss_fn, theta)


# ----------------------------------------------------------------------------- pytree paths
def get_path(tree, path: Sequence):
    """``tree[path[0]][path[1]]...``, e.g. ``("blocks", 0, "attn", "W_Q")``."""
    for p in path:
        tree = tree[p]
    return tree


def set_path(tree, path: Sequence, value):
    """A copy of ``tree`` (dicts and lists copied along ``path`` only) with the leaf replaced."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(tree, dict):
        new = dict(tree)
    elif isinstance(tree, (list, tuple)):
        new = list(tree)
    else:
        raise TypeError(f"path must index dicts/lists, got {type(tree).__name__} at {head!r}")
    new[head] = set_path(tree[head], rest, value)
    return type(tree)(new) if isinstance(tree, tuple) else new


# ----------------------------------------------------------------------------- losses
def cross_entropy(targets: jax.Array) -> Callable[[jax.Array], jax.Array]:
    """``L(z) = -mean_{b,t} log softmax(z_{b,t})[y_{b,t}]`` for logits ``z`` ``(..., V)``."""
    targets = jnp.asarray(targets)

    def loss(logits):
        return jnp.mean(softmax_cross_entropy(logits, targets))

    return loss


def mean_squared_error(targets: jax.Array) -> Callable[[jax.Array], jax.Array]:
    """``L(F) = ||F - Y||_F^2 / numel(F)`` (so ``d^2 L = 2 I / numel``)."""
    targets = jnp.asarray(targets)

    def loss(out):
        return jnp.mean(jnp.square(out - targets))

    return loss


# ----------------------------------------------------------------------------- GPT problem
def gpt_problem(params: dict, config, x: jax.Array, paths: Sequence[Sequence],
                loss_fn: Callable, positions=None, linear_head: bool = False) -> Problem:
    """The problem ``theta -> loss`` for the blocks ``paths`` of a :mod:`xfmr.gpt` model.

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
            almost everywhere, ``H``, ``G = J^T M^T (d^2 L) M J`` and
            ``H_f = sum (M^T g)_k d^2 r_k`` are unchanged, while every probe skips the last
            MLP (it is traversed ``V`` times once, to build ``M``, instead of twice per
            probe).
    """
    from xfmr.gpt import forward_from_embedding, head

    if len(paths) == 0:
        raise ValueError("paths must name at least one parameter block, got none")
    theta = tuple(get_path(params, p) for p in paths)

    def with_theta(th):
        p = params
        for path, t in zip(paths, th):
            p = set_path(p, path, t)
        return p

    if not linear_head:
        def out_fn(th):
            return forward_from_embedding(with_theta(th), x, config, positions=positions)

        return out_fn, loss_fn, theta

    if not _linear_head_applies(config, paths):
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

    return out_fn, lin_loss, theta


def _linear_head_applies(config, paths: Sequence[Sequence]) -> bool:
    """Whether :func:`gpt_problem`'s ``linear_head`` is exact for these blocks."""
    return config.layer_norm == "none" and config.activation == "relu" and all(
        len(p) >= 3 and p[0] == "blocks" and p[2] == "attn" for p in paths)


def _check_problem(out_fn, loss_fn, theta) -> None:
    if not callable(out_fn) or not callable(loss_fn):
        raise TypeError("out_fn and loss_fn must be callables")
    if not isinstance(theta, tuple) or len(theta) == 0:
        raise TypeError(f"theta must be a non-empty tuple of arrays, got {type(theta).__name__}")


# ----------------------------------------------------------------------------- dense
def dense_matrices(out_fn, loss_fn, theta) -> tuple[jax.Array, jax.Array, list[slice]]:
    """Exact dense ``H`` and ``G`` (``P x P``, ``P`` = total size of ``theta``) and the slices
    of each block in the flat order. ``H_f = H - G``. Only for small ``P``.
    """
    _check_problem(out_fn, loss_fn, theta)
    w, unravel = ravel_pytree(theta)
    f = lambda w_: out_fn(unravel(w_))  # noqa: E731

    @jax.jit
    def mats(w_):
        H = jax.hessian(lambda u: loss_fn(f(u)))(w_)
        out = f(w_)
        J = jax.jacfwd(f)(w_).reshape(out.size, w_.size)
        Lam = jax.hessian(loss_fn)(out).reshape(out.size, out.size)
        return H, J.T @ Lam @ J

    H, G = mats(w)
    sizes = np.cumsum([0] + [int(np.prod(t.shape)) for t in theta])
    return H, G, [slice(int(a), int(b)) for a, b in zip(sizes[:-1], sizes[1:])]


def exact_block_norms(out_fn, loss_fn, theta) -> dict[str, np.ndarray]:
    """Exact Frobenius norms of every block: ``{"H"|"G"|"Hf": array (n_blocks, n_blocks)}``."""
    H, G, sl = dense_matrices(out_fn, loss_fn, theta)
    mats = {"H": H, "G": G, "Hf": H - G}
    return {k: np.array([[float(jnp.linalg.norm(M[a, b])) for b in sl] for a in sl])
            for k, M in mats.items()}


# ----------------------------------------------------------------------------- products
def products(out_fn, loss_fn, theta, b: int, v_b: jax.Array):
    """``(G v, H_f v)`` for a direction ``v`` supported on block ``b`` (``v_b`` its entries).

    Returns two tuples shaped like ``theta`` (all rows of column block ``b``).
    """
    out, vjp_fn = jax.vjp(out_fn, theta)
    g = jax.grad(loss_fn)(out)

    def phi(t_b):
        th = theta[:b] + (t_b,) + theta[b + 1:]
        o, vj = jax.vjp(out_fn, th)
        return o, vj(g)[0]

    _, (Jv, Hf_v) = jax.jvp(phi, (theta[b],), (v_b,))
    Lam_Jv = jax.jvp(jax.grad(loss_fn), (out,), (Jv,))[1]
    Gv = vjp_fn(Lam_Jv)[0]
    return Gv, Hf_v


def hutchinson_samples(out_fn, loss_fn, theta, key: jax.Array, n_probes: int,
                       probe_blocks: Sequence[int] | None = None, *,
                       key_ids: Sequence[int] | None = None) -> dict[str, jax.Array]:
    """Per-probe squared norms ``||(M v_s)_a||^2`` for ``M`` in ``H, G, Hf``.

    Returns ``{kind: array (n_blocks, len(probe_blocks), n_probes)}`` where entry
    ``[a, j, s]`` uses probe ``s`` on block ``probe_blocks[j]``. Traceable (jit it).
    The probes of block ``b`` are drawn from ``fold_in(key, key_ids[b])`` (by default
    ``key_ids[b] = b``), so that a problem made of some of the blocks of a larger one can
    reuse the larger problem's probes.
    """
    _check_problem(out_fn, loss_fn, theta)
    if not isinstance(n_probes, int) or n_probes < 1:
        raise ValueError(f"n_probes must be a positive int, got {n_probes!r}")
    nb = len(theta)
    probe_blocks = tuple(range(nb)) if probe_blocks is None else tuple(probe_blocks)
    if any(not 0 <= b < nb for b in probe_blocks):
        raise ValueError(f"probe_blocks must be indices in [0, {nb}), got {probe_blocks}")
    key_ids = tuple(range(nb)) if key_ids is None else tuple(key_ids)
    if len(key_ids) != nb:
        raise ValueError(f"key_ids must have one entry per block ({nb}), got {len(key_ids)}")
    res = {k: [] for k in KINDS}
    for j, b in enumerate(probe_blocks):
        kb = jax.random.fold_in(key, key_ids[b])
        V = jax.random.rademacher(kb, (n_probes,) + theta[b].shape, dtype=theta[b].dtype)
        Gv, Hf_v = jax.vmap(lambda v: products(out_fn, loss_fn, theta, b, v))(V)
        sq = lambda tup: jnp.stack([jnp.sum(jnp.square(t.reshape(n_probes, -1)), 1)  # noqa
                                    for t in tup])
        Hv = tuple(g + h for g, h in zip(Gv, Hf_v))
        res["H"].append(sq(Hv))
        res["G"].append(sq(Gv))
        res["Hf"].append(sq(Hf_v))
    return {k: jnp.stack(v, axis=1) for k, v in res.items()}


def hutchinson_block_norms(samples: dict[str, jax.Array]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Frobenius-norm estimates from :func:`hutchinson_samples`: ``{kind: (norm, stderr)}``.

    ``norm = sqrt(mean_s q_s)``; ``stderr`` by the delta method,
    ``std_s(q) / sqrt(S) / (2 norm)``. Arrays ``(n_blocks, n_probe_blocks)``.
    """
    out = {}
    for k, q in samples.items():
        q = np.asarray(q)
        if q.ndim != 3:
            raise ValueError(f"samples[{k!r}] must be 3-D (blocks, probe_blocks, probes), "
                             f"got shape {q.shape}")
        S = q.shape[-1]
        m = q.mean(-1)
        norm = np.sqrt(m)
        se = q.std(-1, ddof=1) / np.sqrt(S) / (2 * np.maximum(norm, np.finfo(float).tiny)) \
            if S > 1 else np.full_like(m, np.nan)
        out[k] = (norm, se)
    return out


# ----------------------------------------------------------------------------- sigma sweeps
def sigma_sweep(config, sigmas, paths: Sequence[Sequence], *, n_seeds: int, batch_size: int,
                n_probes: int, dtype=jnp.float64, loss: str = "ce", base_seed: int = 1234,
                n_digits: int = 5, linear_head: bool | None = None,
                blocks: str = "all") -> dict[str, np.ndarray]:
    """Hutchinson block norms of ``H, G, H_f`` of a GPT on the addition task versus ``sigma``.

    Protocol, per seed ``r`` (key ``base_seed + r``): GPT initialisation; a *fixed* base
    embedding ``W_E, W_pos ~ N(0, 1)`` and a batch of ``batch_size`` sequences; for every
    ``sigma`` the model sees ``sigma * (W_E[tok] + W_pos)`` and the SAME ``n_probes``
    Rademacher probes (common random numbers across ``sigma``). The loss is the
    cross-entropy (``loss="ce"``) or the mean squared error to the one-hot targets
    (``loss="mse"``) of the answer digits, from the logits at the answer positions.

    ``linear_head`` (see :func:`gpt_problem`) defaults to True where it applies (no LN,
    ReLU, every path an attention block): same result, faster.

    ``blocks="all"`` estimates every block ``(a, b)``; ``blocks="diagonal"`` only the
    diagonal blocks ``(a, a)``, each from its own problem ``theta = (theta_a,)`` with the
    same probes: the same numbers as the diagonal of ``"all"``, but a probe on a block of
    layer ``l`` is then propagated backwards only down to layer ``l`` (the deep sweeps'
    saving). Off-diagonal entries are then NaN.

    Returns ``{"sigmas": (S,), "H"|"G"|"Hf": (n_seeds, S, nb, nb)}`` with ``nb = len(paths)``
    and entry ``[r, s, a, b]`` the estimate of ``||M_ab||_F``.
    """
    from xfmr.addition import answer_positions, make_batch, seq_len
    from xfmr.gpt import embed, init_params

    if loss not in ("ce", "mse"):
        raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")
    if blocks not in ("all", "diagonal"):
        raise ValueError(f"blocks must be 'all' or 'diagonal', got {blocks!r}")
    sig = np.asarray(sigmas, dtype=float)
    if sig.ndim != 1 or np.any(sig <= 0):
        raise ValueError(f"sigmas must be 1-D and positive, got {sig}")
    if config.max_len < seq_len(n_digits):
        raise ValueError(f"config.max_len must be >= {seq_len(n_digits)}, got {config.max_len}")
    pos = answer_positions(n_digits)
    n_ans = n_digits + 1
    if linear_head is None:
        linear_head = _linear_head_applies(config, paths)
    nb = len(paths)

    @jax.jit
    def unit(params, x_base, tokens, sigma, key):
        tgt = tokens[:, -n_ans:]
        loss_fn = cross_entropy(tgt) if loss == "ce" else mean_squared_error(
            jax.nn.one_hot(tgt, config.vocab_size, dtype=x_base.dtype))

        def estimate(block_ids):
            problem = gpt_problem(params, config, sigma * x_base, [paths[i] for i in block_ids],
                                  loss_fn, positions=pos, linear_head=linear_head)
            q = hutchinson_samples(*problem, key, n_probes, key_ids=block_ids)
            return {k: jnp.sqrt(jnp.mean(v, -1)) for k, v in q.items()}

        if blocks == "all":
            return estimate(tuple(range(nb)))
        out = {k: jnp.full((nb, nb), jnp.nan, x_base.dtype) for k in KINDS}
        for i in range(nb):
            est = estimate((i,))
            out = {k: out[k].at[i, i].set(est[k][0, 0]) for k in KINDS}
        return out

    res = {k: np.zeros((n_seeds, len(sig), len(paths), len(paths))) for k in KINDS}
    for r in range(n_seeds):
        kp, ke, kx, kb, kq = jax.random.split(jax.random.key(base_seed + r), 5)
        params = init_params(kp, config, dtype)
        params["embed"] = {
            "W_E": jax.random.normal(ke, params["embed"]["W_E"].shape, dtype),
            "W_pos": jax.random.normal(kx, params["embed"]["W_pos"].shape, dtype)}
        tokens = make_batch(kb, batch_size, n_digits)
        x_base = embed(params, tokens)
        for s, sigma in enumerate(sig):
            out = unit(params, x_base, tokens, jnp.asarray(sigma, dtype), kq)
            for k in KINDS:
                res[k][r, s] = np.asarray(out[k])
    res["sigmas"] = sig
    return res
