"""xfmr.tcbo.design: the candidate set (UCB = mean + sqrt(beta) sd), the utility against its
definition, the Danskin gradient against autodiff over drawn designs and candidate sets, and
Frank-Wolfe's duality gap as a certified bound."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.strategies import distributions
from xfmr.tcbo import design, mdp, weight_gp

COORDS, NB = mdp.grid_states(3, 3)
PHI = weight_gp.features(COORDS, lengthscale=0.5)
NOISE = 0.3


def _precision(seed):
    post = weight_gp.prior(PHI.shape[1])
    for i in np.random.default_rng(seed).integers(0, 9, size=3):
        post = weight_gp.update(post, PHI[i], 0.0, NOISE)
    return post.precision


def test_candidates():
    mean = jnp.array([0.0, 1.0, 0.5, -3.0])
    sd = jnp.array([0.1, 0.1, 0.3, 0.5])
    # beta = 4: two sds. max LCB = 1 - 0.2 = 0.8; UCBs 0.2, 1.2, 1.1, -2
    np.testing.assert_array_equal(design.candidates(mean, sd, 4.0), [False, True, True, False])
    # beta = 1: one sd. max LCB = 0.9; UCBs 0.1, 1.1, 0.8, -2.5
    np.testing.assert_array_equal(design.candidates(mean, sd, 1.0), [False, True, False, False])


@settings(max_examples=30, deadline=None)
@given(design_weights=distributions(9), mask=hnp.arrays(bool, (9,)), seed=st.integers(0, 3))
def test_utility_and_danskin_gradient(design_weights, mask, seed):
    V = _precision(seed)
    d = jnp.asarray(design_weights)
    n = 7
    Psi = PHI / NOISE
    value, grad = design.utility_gradient(d, Psi, PHI, V, jnp.asarray(mask), n)
    # U(d) from its definition: the largest variance of a difference over candidate pairs
    V_d = np.asarray(V) + n * np.asarray(Psi).T @ np.diag(design_weights) @ np.asarray(Psi)
    cov = np.asarray(PHI) @ np.linalg.inv(V_d) @ np.asarray(PHI).T
    pairs = [(z, w) for z in np.flatnonzero(mask) for w in np.flatnonzero(mask)]
    variances = sorted({round(cov[z, z] + cov[w, w] - 2 * cov[z, w], 12) for z, w in pairs if z < w}, reverse=True)
    ref = max((cov[z, z] + cov[w, w] - 2 * cov[z, w] for z, w in pairs), default=-np.inf)
    np.testing.assert_allclose(float(value), ref, rtol=1e-9, atol=1e-12)
    # Danskin's gradient is the gradient where the maximising pair is unique (a symmetric
    # design on the symmetric grid ties mirrored pairs: U has a kink there, no gradient)
    if len(variances) >= 2 and variances[0] - variances[1] > 1e-6 * variances[0]:
        auto = jax.grad(design.utility)(d, Psi, PHI, V, jnp.asarray(mask), n)
        np.testing.assert_allclose(grad, auto, rtol=1e-8, atol=1e-12)


def test_hardest_pair_and_reward():
    V = _precision(0)
    mask = jnp.array([True, False, True, False, True, False, False, True, True])
    value, z, z2 = (np.asarray(v) for v in design.hardest_pair(V, PHI, mask))
    D = np.asarray(weight_gp.pair_variances(V, PHI))
    assert mask[z] and mask[z2] and value == D[np.ix_(mask, mask)].max()
    delta = np.asarray(PHI[z] - PHI[z2])
    reward = (np.asarray(PHI) @ np.linalg.solve(np.asarray(V), delta)) ** 2
    np.testing.assert_allclose(design.linearised_reward(V, PHI, mask), reward, rtol=1e-10)


def test_frank_wolfe_gap_bounds_the_optimum():
    V = _precision(2)
    mask = jnp.array([True, False, True, False, True, False, False, True, True])
    horizon = 4
    utilities, gaps, d = design.frank_wolfe(PHI, NOISE, V, mask, NB, 0, horizon, 12)
    assert bool(jnp.all(gaps >= -1e-12))  # the DP oracle minimises <g, d(p)> over paths
    assert abs(float(jnp.sum(d)) - 1.0) < 1e-12
    # the best single path (brute force over all paths) cannot beat U(d_k) - gap_k
    best_path_utility = np.inf
    for actions in itertools.product(range(NB.shape[1]), repeat=horizon):
        s, states = 0, []
        for a in actions:
            s = NB[s, a]
            if s < 0:
                break
            states.append(s)
        else:
            dp = jnp.zeros(9).at[jnp.array(states)].add(1.0 / horizon)
            best_path_utility = min(best_path_utility, float(design.utility(dp, PHI / NOISE, PHI, V, mask, horizon)))
    lower = float(jnp.max(utilities[:-1] - gaps))
    assert lower <= best_path_utility + 1e-12
    assert float(utilities[-1]) < float(utilities[0])
