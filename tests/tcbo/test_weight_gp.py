"""xfmr.tcbo.weight_gp: the weight-space posterior against the function-space GP of
xfmr.bayesopt.gp over drawn histories, and the pair variances against their definition."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xfmr.bayesopt import gp
from xfmr.tcbo import mdp, weight_gp

COORDS, _ = mdp.grid_states(4, 4)
PHI = weight_gp.features(COORDS, lengthscale=0.4, rel_tol=1e-12)
N_MEASURED = 6


def test_features_reproduce_the_kernel():
    K = gp.rbf_kernel(COORDS, COORDS, lengthscale=0.4, outputscale=1.0)
    assert float(jnp.max(jnp.abs(PHI @ PHI.T - K))) < 1e-10
    # a long lengthscale makes K nearly low-rank: fewer features than states, still K up to ~rel_tol
    K_long = gp.rbf_kernel(COORDS, COORDS, lengthscale=3.0, outputscale=1.0)
    Phi_long = weight_gp.features(COORDS, lengthscale=3.0)
    assert Phi_long.shape[1] < 16 and float(jnp.max(jnp.abs(Phi_long @ Phi_long.T - K_long))) < 1e-8


def _history(idx, y, noise_sd):
    post = weight_gp.prior(PHI.shape[1])
    for i, yi in zip(idx, y):
        post = weight_gp.update(post, PHI[int(i)], float(yi), noise_sd)
    return post


@settings(max_examples=25, deadline=None)
@given(idx=hnp.arrays(np.int64, (N_MEASURED,), elements=st.integers(0, 15)),
       y=hnp.arrays(np.float64, (N_MEASURED,), elements=st.floats(-3, 3)),
       noise_sd=st.sampled_from([0.05, 0.3, 1.0]))
def test_weight_space_posterior_equals_function_space_gp(idx, y, noise_sd):
    # repeated states included: the same state measured twice is two measurements in both views
    mean, var = weight_gp.predict_states(_history(idx, y, noise_sd), PHI)
    ref_mean, ref_var = gp.posterior(COORDS[idx], jnp.asarray(y), COORDS, lengthscale=0.4, outputscale=1.0,
                                     noise=noise_sd**2)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-8)
    np.testing.assert_allclose(var, ref_var, atol=1e-8)


@settings(max_examples=15, deadline=None)
@given(idx=hnp.arrays(np.int64, (N_MEASURED,), elements=st.integers(0, 15)))
def test_pair_variances_are_variances_of_differences(idx):
    post = _history(idx, np.zeros(N_MEASURED), 0.2)
    D = np.asarray(weight_gp.pair_variances(post.precision, PHI))
    cov = np.asarray(PHI) @ np.linalg.inv(np.asarray(post.precision)) @ np.asarray(PHI).T  # Cov[f(z), f(z')]
    d = np.diag(cov)
    np.testing.assert_allclose(D, d[:, None] + d[None, :] - 2 * cov, atol=1e-10)


def test_prior_and_argument_errors():
    post = weight_gp.prior(3, dtype=jnp.float32)
    assert post.precision.dtype == jnp.float32 and post.shift.dtype == jnp.float32
    with pytest.raises(ValueError, match="n_features"):
        weight_gp.prior(0)
    with pytest.raises(ValueError, match="dtype"):
        weight_gp.prior(3, dtype=jnp.int32)
    with pytest.raises(ValueError, match="rel_tol"):
        weight_gp.features(COORDS, lengthscale=0.4, rel_tol=2.0)
