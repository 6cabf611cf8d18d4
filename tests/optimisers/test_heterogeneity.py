"""Tests of xfmr.optimisers.heterogeneity: densities against closed forms, SLQ densities of
small Hessian blocks against dense eigvalsh, the JS distance against its definition and
bounds, the score's ordering, and error paths."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.experiments.addition import answer_loss, answer_positions, make_batch
from xfmr.experiments.gpt import GPTConfig, forward, init_params
from xfmr.optimisers.blockwise import block_hvp, block_spectra
from xfmr.optimisers.heterogeneity import (block_densities, common_grid, dense_density,
                                           heterogeneity_score, js_distance)
from xfmr.optimisers.lanczos import SLQResult

jax.config.update("jax_enable_x64", True)


def test_density_is_the_normalised_gaussian_mixture():
    grid = np.linspace(-1, 2, 30001)
    r = SLQResult(np.array([[0.0, 1.0]]), np.array([[0.25, 0.75]]), 2)
    d = block_densities([r], grid, sigma2=1e-4)[0]
    s = 1e-2
    ref = 0.25 * np.exp(-0.5 * (grid / s) ** 2) + 0.75 * np.exp(-0.5 * ((grid - 1) / s) ** 2)
    np.testing.assert_allclose(d, ref / ref.sum(), atol=1e-12)
    np.testing.assert_allclose(dense_density([0.0, 1.0], grid, 1e-4),
                               block_densities([SLQResult(np.array([[0.0, 1.0]]),
                                                          np.array([[0.5, 0.5]]), 2)],
                                               grid, 1e-4)[0], atol=1e-14)


def test_js_distance_definition_and_bounds():
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.0, 0.5, 0.5])
    m = (p + q) / 2
    kl = lambda a, b: np.sum(a[a > 0] * np.log(a[a > 0] / b[a > 0]))  # noqa: E731
    np.testing.assert_allclose(js_distance(p, q), np.sqrt(0.5 * kl(p, m) + 0.5 * kl(q, m)))
    assert js_distance(p, p) == 0.0
    np.testing.assert_allclose(js_distance([1, 0], [0, 1]), np.sqrt(np.log(2)))
    with pytest.raises(ValueError, match="p and q"):
        js_distance(p, q[:2])


def test_score_orders_alike_and_different_spectra():
    grid = np.linspace(-1, 12, 20001)
    alike = [SLQResult(np.array([[1.0, 2.0]]), np.array([[0.5, 0.5]]), 2) for _ in range(3)]
    apart = [SLQResult(np.array([[1.0 * k, 2.0 * k]]), np.array([[0.5, 0.5]]), 2)
             for k in (1, 3, 5)]
    assert heterogeneity_score(block_densities(alike, grid)) < 1e-12
    assert heterogeneity_score(block_densities(apart, grid)) > 0.8
    with pytest.raises(ValueError, match="n_blocks"):
        heterogeneity_score(block_densities(alike[:1], grid))


@pytest.mark.parametrize("name", ["W_Q", "W_V"])
def test_slq_density_of_a_small_block_matches_dense_eigvalsh(name):
    """Lanczos run to the block's size resolves every eigenvalue; with enough probes the
    weights approach 1/P, and the JS distance to the dense density falls below 0.01."""
    config = GPTConfig(vocab_size=12, max_len=18, d_model=4)
    pos = answer_positions()

    def loss(params, tokens):
        return answer_loss(forward(params, tokens, config, positions=pos), tokens)

    params = init_params(jax.random.key(0), config, jnp.float64)
    tokens = make_batch(jax.random.key(1), 16, dtype=jnp.int64)
    path = ("blocks", 0, "attn", name)
    matvec, P = block_hvp(loss, params, path, tokens)
    H = np.asarray(jax.vmap(matvec)(jnp.eye(P)))
    lam = np.linalg.eigvalsh((H + H.T) / 2)
    res = block_spectra(loss, params, [path], jax.random.key(2), 200, 100, tokens)[0]
    grid = common_grid([res], 50_000, [lam])
    d_slq = block_densities([res], grid)[0]
    d_exact = dense_density(lam, grid)
    assert js_distance(d_slq, d_exact) < 0.01
    # and a different block's spectrum is far (the check can fail)
    other = dense_density(lam * 3 + 0.01, grid)
    assert js_distance(other, d_exact) > 0.1


def test_errors():
    with pytest.raises(ValueError, match="empty"):
        common_grid([])
    r = SLQResult(np.array([[100.0]]), np.array([[1.0]]), 1)
    with pytest.raises(ValueError, match="grid must cover"):
        block_densities([r], np.linspace(0, 1, 10))
    with pytest.raises(ValueError, match="sigma2"):
        block_densities([r], np.linspace(0, 1, 10), sigma2=0.0)
