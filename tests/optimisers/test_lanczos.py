"""Tests of xfmr.optimisers.lanczos and xfmr.optimisers.blockwise against exact spectra of small dense matrices and
Hessians (float64)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from xfmr.experiments.addition import answer_loss, make_batch
from xfmr.optimisers.blockwise import (all_block_top_eigenvalues, block_hvp, block_spectra, block_top_eigenvalues, leaf_paths,
                            scale_by_block)
from xfmr.experiments.curvature import get_path, set_path
from xfmr.experiments.gpt import GPTConfig, forward, init_params
from xfmr.optimisers.lanczos import lanczos, lanczos_probes, ritz, slq, slq_density, slq_moments, top_eigenvalue


def _sym(P, seed=0):
    A = np.random.default_rng(seed).normal(size=(P, P))
    return jnp.asarray((A + A.T) / 2)


@functools.lru_cache(maxsize=None)
def _gpt_loss(d=4, batch=4):
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=d, init_std=0.8)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), batch)
    def loss(p, batch):
        return answer_loss(forward(p, batch, cfg), batch)

    return loss, params, tokens


@functools.lru_cache(maxsize=None)
def _gpt_dense_block(path):
    """Reference: jax.hessian of _gpt_loss() as a function of the block at ``path`` alone
    (computed once per block for all the tests that need it)."""
    loss, params, tokens = _gpt_loss()
    t0 = get_path(params, path)
    H = jax.jit(jax.hessian(lambda t: loss(set_path(params, path, t), tokens)))(t0)
    return H.reshape(t0.size, t0.size)


def _dense_from_hvp(loss, params, tokens, path):
    """The block assembled from block_hvp (checked against _gpt_dense_block above)."""
    mv, dim = block_hvp(loss, params, path, tokens)
    return np.asarray(jax.jit(jax.vmap(mv))(jnp.eye(dim)))


def test_full_lanczos_recovers_the_spectrum():
    A = _sym(40)
    alpha, beta = lanczos(lambda v: A @ v, jnp.ones(40), 40)
    theta, w = ritz(alpha, beta)
    ev = np.linalg.eigvalsh(np.asarray(A))
    np.testing.assert_allclose(np.asarray(theta), ev, atol=1e-10 * np.abs(ev).max())
    assert abs(float(w.sum()) - 1) < 1e-12


def _lanczos_twice(A, q0, m):
    """Reference: Lanczos with two full reorthogonalisation passes at every step (numpy)."""
    P = len(q0)
    Q = np.zeros((m, P))
    q, q_prev, b_prev = q0 / np.linalg.norm(q0), np.zeros(P), 0.0
    alpha, beta = np.zeros(m), np.zeros(m)
    for j in range(m):
        Q[j] = q
        w = A @ q
        alpha[j] = q @ w
        w = w - alpha[j] * q - b_prev * q_prev
        for _ in range(2):
            w = w - Q.T @ (Q @ w)
        beta[j] = np.linalg.norm(w)
        q_prev, q, b_prev = q, w / beta[j], beta[j]
    return alpha, beta


def test_lanczos_probes_equals_lanczos_per_start_and_twice_reorthogonalised_lanczos():
    """Eigenvalues from 1e-6 to 1e6 (plain Lanczos loses orthogonality within a few steps):
    every row of the batched run is the one-start run, and its Ritz values are those of the
    reference with two projections at every step and the exact eigenvalues."""
    P, m = 60, 60
    U = np.linalg.qr(np.random.default_rng(3).normal(size=(P, P)))[0]
    A = (U * np.geomspace(1e-6, 1e6, P)) @ U.T
    starts = jax.random.normal(jax.random.key(4), (3, P))
    alpha, beta = lanczos_probes(lambda v: jnp.asarray(A) @ v, starts, m)
    ev = np.linalg.eigvalsh(A)
    for s in range(3):
        a1, b1 = lanczos(lambda v: jnp.asarray(A) @ v, starts[s], m)
        # the same to rounding (a start may get the second projection because another needed it)
        np.testing.assert_allclose(alpha[s], a1, atol=1e-12 * ev.max())
        np.testing.assert_allclose(beta[s], b1, atol=1e-12 * ev.max())
        ref = np.asarray(ritz(*_lanczos_twice(A, np.asarray(starts[s]), m))[0])
        theta = np.asarray(ritz(alpha[s], beta[s])[0])
        np.testing.assert_allclose(theta, ref, atol=1e-9 * ev.max())
        np.testing.assert_allclose(theta, ev, atol=1e-9 * ev.max())
    with pytest.raises(ValueError, match="starts"):
        lanczos_probes(lambda v: v, jnp.ones(5), 2)


@pytest.mark.parametrize("m", [1, 3, 6])
def test_gauss_quadrature_is_exact_to_degree_2m_minus_1(m):
    A = _sym(30, seed=1)
    q = jax.random.normal(jax.random.key(2), (30,))
    q = q / jnp.linalg.norm(q)
    theta, w = ritz(*lanczos(lambda v: A @ v, q, m))
    for p in range(2 * m):
        exact = float(q @ jnp.linalg.matrix_power(A, p) @ q)
        quad = float(jnp.sum(w * theta ** p))
        assert abs(quad - exact) < 1e-10 * max(1.0, float(jnp.linalg.norm(A, 2)) ** p)
    if m < 15:  # and not beyond, for a generic matrix
        p = 2 * m
        exact = float(q @ jnp.linalg.matrix_power(A, p) @ q)
        assert abs(float(jnp.sum(w * theta ** p)) - exact) > 1e-6 * exact


def test_block_hvp_matches_dense_hessian_block():
    loss, params, tokens = _gpt_loss()
    for path in [("blocks", 0, "attn", "W_Q")]:
        H = _gpt_dense_block(path)
        mv, dim = block_hvp(loss, params, path, tokens)
        mv = jax.jit(mv)
        assert dim == H.shape[0]
        V = jax.random.normal(jax.random.key(3), (3, dim))
        for v in V:
            np.testing.assert_allclose(np.asarray(mv(v)), np.asarray(H @ v),
                                       rtol=1e-10, atol=1e-12 * float(jnp.abs(H).max()))


def test_full_lanczos_on_a_gpt_hessian_block_finds_its_eigenvalues():
    """A Hessian block may have repeated eigenvalues (Lanczos finds each distinct one once):
    every node of positive weight is an eigenvalue, and every eigenvalue seen by the start
    vector is a node."""
    loss, params, tokens = _gpt_loss()
    path = ("blocks", 0, "attn", "W_Q")
    H = np.asarray(_gpt_dense_block(path))
    ev, U = np.linalg.eigh(H)
    mv, dim = block_hvp(loss, params, path, tokens)
    q = jax.random.rademacher(jax.random.key(4), (dim,), dtype=jnp.float64)
    theta, w = map(np.asarray, ritz(*jax.jit(lambda q: lanczos(mv, q, dim))(q)))
    scale = np.abs(ev).max()
    for t in theta[w > 1e-10]:
        assert np.abs(ev - t).min() < 1e-8 * scale
    seen = (U.T @ np.asarray(q / jnp.linalg.norm(q))) ** 2
    for lam in ev[seen > 1e-6]:
        assert np.abs(theta[w > 1e-12] - lam).min() < 1e-8 * scale
    # the quadrature measure is the spectral measure seen from q: same moments
    for p in range(1, 5):
        np.testing.assert_allclose(np.sum(w * theta ** p), np.sum(seen * ev ** p),
                                   rtol=1e-8, atol=1e-12 * scale ** p)
    # the block-level helpers: n_steps capped at the block size (exact); top eigenvalue
    res = block_spectra(loss, params, [path], jax.random.key(8), 2, 10 * dim, tokens)[0]
    assert res.nodes.shape == (2, dim)
    assert abs(res.nodes.max() - ev.max()) < 1e-8 * scale
    lam, bound = block_top_eigenvalues(loss, params, [path], jax.random.key(9), 12, tokens)
    assert lam[0] <= ev.max() + 1e-10 * scale
    assert np.abs(ev - lam[0]).min() <= bound[0] + 1e-10 * scale


def test_slq_moments_and_density_match_exact_trace_moments():
    """Rademacher SLQ is unbiased for tr(H^p)/P; the tolerance is 4 exact standard errors,
    Var(v^T M v) = 2 (||M||_F^2 - sum_i M_ii^2) for M = H^p."""
    loss, params, tokens = _gpt_loss()
    path = ("blocks", 0, "mlp", "W_out")
    H = _dense_from_hvp(loss, params, tokens, path)
    P = H.shape[0]
    mv, dim = block_hvp(loss, params, path, tokens)
    n_probes, width = 40, 1e-3 * np.abs(np.linalg.eigvalsh(H)).max()
    res = slq(mv, dim, jax.random.key(5), n_probes, 12)
    assert res.nodes.shape == (n_probes, 12) and np.allclose(res.weights.sum(1), 1)
    lo, hi = res.nodes.min() - 8 * width, res.nodes.max() + 8 * width
    grid = np.linspace(lo, hi, 20001)
    dens = slq_density(res, grid, width)
    dx = grid[1] - grid[0]
    assert abs(dens.sum() * dx - 1) < 1e-6
    for p in (1, 2, 3):
        M = np.linalg.matrix_power(H, p)
        exact = np.trace(M) / P
        se = np.sqrt(2 * (np.sum(M ** 2) - np.sum(np.diag(M) ** 2))) / P / np.sqrt(n_probes)
        est, est_se = slq_moments(res, p)
        assert abs(est - exact) < 4 * se, (p, est, exact, se)
        assert 0.5 * se < est_se < 2 * se        # the reported SE is the right size
        # the smoothed density has the same first moment and second moment + width^2
        dens_p = np.sum(dens * grid ** p) * dx
        corr = {1: 0.0, 2: width ** 2, 3: 3 * width ** 2 * slq_moments(res, 1)[0]}[p]
        assert abs(dens_p - corr - est) < 1e-6 * max(abs(est), 1e-120) + 1e-12


def test_top_eigenvalue_and_its_bound():
    rng = np.random.default_rng(6)
    U = np.linalg.qr(rng.normal(size=(120, 120)))[0]
    ev = np.concatenate([rng.uniform(-1, 1, 119), [3.0]])
    A = jnp.asarray(U @ np.diag(ev) @ U.T)
    th, bound = top_eigenvalue(lambda v: A @ v, 120, jax.random.key(7), 30)
    assert th <= 3.0 + 1e-10 and abs(th - 3.0) < 1e-8 and abs(th - 3.0) <= bound + 1e-10
    th5, bound5 = top_eigenvalue(lambda v: A @ v, 120, jax.random.key(7), 3)
    # few steps: a lower bound of lambda_max, and SOME eigenvalue lies within the bound
    assert th5 <= 3.0 + 1e-12 and np.abs(ev - th5).min() <= bound5 + 1e-10


def test_leaf_paths_and_scale_by_block():
    _, params, _ = _gpt_loss()
    paths = leaf_paths(params)
    assert len(paths) == len(jax.tree_util.tree_leaves(params))
    assert ("blocks", 0, "attn", "W_Q") in paths
    leaves = jax.tree_util.tree_leaves(params)
    for p, leaf in zip(paths, leaves):
        assert get_path(params, p) is leaf
    scales = jax.tree_util.tree_map(lambda x: float(x.size), params)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    opt = optax.chain(optax.sgd(0.1), scale_by_block(scales))
    upd, _ = opt.update(grads, opt.init(params), params)
    for u, x in zip(jax.tree_util.tree_leaves(upd), leaves):
        np.testing.assert_allclose(np.asarray(u), -0.1 * x.size * np.ones(x.shape))


def test_errors():
    A = _sym(5)
    with pytest.raises(ValueError, match="n_steps"):
        lanczos(lambda v: A @ v, jnp.ones(5), 6)
    with pytest.raises(ValueError, match="q0"):
        lanczos(lambda v: A @ v, jnp.ones((5, 1)), 2)
    res = slq(lambda v: A @ v, 5, jax.random.key(0), 2, 3)
    with pytest.raises(ValueError, match="width"):
        slq_density(res, np.zeros(3), 0.0)
    with pytest.raises(TypeError, match="n_probes"):
        slq(lambda v: A @ v, 5, jax.random.key(0), 2.0, 3)
    with pytest.raises(TypeError, match="loss"):
        block_hvp("not callable", {"a": jnp.ones(2)}, ("a",))


def test_addition_mlp_shapes_and_loss():
    from xfmr.optimisers.addition_mlp import init_mlp, mlp_logits, mlp_loss
    params = init_mlp(jax.random.key(0), 4, 8, depth=3, dtype=jnp.float64)
    tokens = make_batch(jax.random.key(1), 3)
    z = mlp_logits(params, tokens)
    assert z.shape == (3, 6, 12)
    ref = -np.mean([np.asarray(jax.nn.log_softmax(z[b, t]))[int(tokens[b, 12 + t])]
                    for b in range(3) for t in range(6)])
    assert abs(float(mlp_loss(params, tokens)) - ref) < 1e-12
    # the answer digits are not an input: changing them leaves the logits unchanged
    z2 = mlp_logits(params, tokens.at[:, 12:].set(0))
    assert float(jnp.abs(z - z2).max()) == 0.0
    with pytest.raises(ValueError, match="width"):
        init_mlp(jax.random.key(0), 4, 0)


def test_ensemble_training_equals_independent_runs():
    from xfmr.core.ensemble import per_model, stack, train_models, unstack
    from xfmr.core.train import train
    X = jax.random.normal(jax.random.key(0), (16, 3))
    y = X @ jnp.array([1.0, -2.0, 0.5])

    def loss(p, batch):
        idx = batch
        return jnp.mean((X[idx] @ p["w"] + p["b"] - y[idx]) ** 2)

    inits = [{"w": jnp.full((3,), 0.1 * i), "b": jnp.array(0.2 * i)} for i in range(2)]
    lrs = np.array([0.01, 0.1])
    sample = lambda k: jax.random.randint(k, (5,), 0, 16)  # noqa: E731
    sample_all = lambda k: jax.vmap(lambda i: sample(jax.random.fold_in(k, i)))(jnp.arange(2))  # noqa
    st = stack(inits)
    opt = optax.chain(optax.scale_by_adam(), scale_by_block(per_model(-lrs, st)))
    res = train_models(loss, st, sample_all, opt, 20, jax.random.key(1), chunk=7)
    for i, p in enumerate(unstack(res.params)):
        ref = train(loss, inits[i], lambda k, i=i: sample(jax.random.fold_in(k, i)),
                    optax.adam(lrs[i]), 20, jax.random.key(1))
        for a, b in zip(jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(ref.params)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_all_block_top_eigenvalues_match_dense_blocks():
    cfg = GPTConfig(vocab_size=12, max_len=18, d_model=2, init_std=0.8, mlp=False)
    params = init_params(jax.random.key(0), cfg, jnp.float64)
    tokens = make_batch(jax.random.key(1), 3)

    def loss(p, batch):
        return answer_loss(forward(p, batch, cfg), batch)

    paths, lam, bound = all_block_top_eigenvalues(loss, params, jax.random.key(2), 40, tokens)
    assert paths == leaf_paths(params) and lam.shape == (len(paths),)
    from jax.flatten_util import ravel_pytree
    flat, unravel = ravel_pytree(params)
    H = np.asarray(jax.jit(jax.hessian(lambda w: loss(unravel(w), tokens)))(flat))
    start = 0
    for p, l, b in zip(paths, lam, bound):
        n = get_path(params, p).size
        ev = np.linalg.eigvalsh(H[start:start + n, start:start + n])
        start += n
        # (b_K has an exactly zero block: softmax ignores a shift common to all keys)
        assert abs(l - ev.max()) < 1e-8 * np.abs(H).max(), (p, l, ev.max())


def test_block_and_masked_routes_give_the_same_runs():
    """The block-coordinate route (block_spectra, block_top_eigenvalues) and the masked route
    (all_block_top_eigenvalues, block_rates) run Lanczos from the same starts on the same
    operator H_bb: for blocks larger than the number of steps the same nodes, weights and
    bounds up to rounding; for a block smaller than it (b_V, 4 coordinates, resolved exactly)
    the same quadrature measure (moments) and top node. (The masked route's extra steps there
    run on rounding noise and may add nodes of weight near zero; the block route stops at
    P_b steps.)"""
    from xfmr.optimisers.blockwise import _block_runs, _masked_runs

    loss, params, tokens = _gpt_loss()
    paths = [("blocks", 0, "attn", "W_Q"), ("embed", "W_E"), ("blocks", 0, "attn", "b_V")]
    key = jax.random.key(5)
    steps = 10  # fewer than W_Q's 16 and W_E's 48 coordinates, more than b_V's 4
    theta_b, w_b, bound_b = (np.asarray(x) for x in _block_runs(loss, params, paths, key, 3, steps, tokens))
    theta_m, w_m, bound_m = (np.asarray(x) for x in _masked_runs(loss, params, paths, key, 3, steps, tokens))
    assert theta_b.shape == theta_m.shape == (3, 3, steps) and bound_b.shape == (3, 3)
    scale = np.abs(theta_m).max()
    np.testing.assert_allclose(theta_b[:2], theta_m[:2], atol=1e-9 * scale)
    np.testing.assert_allclose(w_b[:2], w_m[:2], atol=1e-8)
    np.testing.assert_allclose(bound_b[:2], bound_m[:2], atol=1e-8 * scale)
    for p in range(4):
        np.testing.assert_allclose((w_b[2] * theta_b[2] ** p).sum(-1), (w_m[2] * theta_m[2] ** p).sum(-1),
                                   rtol=1e-8, atol=1e-10 * scale ** p)
    np.testing.assert_allclose(theta_b[2].max(-1), theta_m[2].max(-1), rtol=1e-9)
    lam, _ = block_top_eigenvalues(loss, params, paths, key, steps, tokens)
    np.testing.assert_allclose(lam, theta_b[:, 0].max(-1), rtol=1e-12)


def test_route_is_checked_and_auto_picks_by_size():
    from xfmr.optimisers import blockwise

    loss, params, tokens = _gpt_loss()
    path = [("blocks", 0, "attn", "W_Q")]
    with pytest.raises(ValueError, match="route"):
        block_spectra(loss, params, path, jax.random.key(0), 1, 4, tokens, route="fast")
    assert blockwise._route_runs("auto", params) is blockwise._masked_runs
    big = {"w": jnp.zeros((blockwise.BLOCK_ROUTE_MIN_PARAMS,))}
    assert blockwise._route_runs("auto", big) is blockwise._block_runs
    a = block_spectra(loss, params, path, jax.random.key(0), 2, 6, tokens, route="block")[0]
    b = block_spectra(loss, params, path, jax.random.key(0), 2, 6, tokens, route="masked")[0]
    np.testing.assert_allclose(a.nodes, b.nodes, atol=1e-9 * np.abs(b.nodes).max())
