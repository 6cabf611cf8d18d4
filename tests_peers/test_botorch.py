"""Part IV's GP and EI against BoTorch (``SingleTaskGP``, ``ExpectedImprovement``,
``LogExpectedImprovement``) on the same data, in float64.

BoTorch's ``SingleTaskGP`` defaults are not the textbook GP of ``xfmr.bayesopt.gp``: it
standardizes the outcomes (an outcome transform), uses an RBF kernel without an outputscale
and a dimension-scaled lengthscale prior, and a constant mean that it fits. We pass
``outcome_transform=None``, an explicit ``ScaleKernel(RBFKernel())``, a ``ZeroMean`` and set
lengthscale, outputscale and noise by hand (no fit) as float64 tensors, ``model.eval()``, and
give ``best_f`` as a float64 tensor (BoTorch stores a Python float as a float32 buffer, which
moves EI by about 1e-6 relative); then the posterior
mean and latent variance, and the analytic EI and log-EI with the same ``best_f``, agree
with ours to 1e-8 (absolute on mean, variance and log-EI; relative on EI), d = 1 to 5.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("botorch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from botorch.acquisition.analytic import (  # noqa: E402
    ExpectedImprovement,
    LogExpectedImprovement,
)
from botorch.models import SingleTaskGP  # noqa: E402
from gpytorch.kernels import RBFKernel, ScaleKernel  # noqa: E402
from gpytorch.likelihoods import GaussianLikelihood  # noqa: E402
from gpytorch.means import ZeroMean  # noqa: E402

from xfmr.bayesopt import acquisition, gp, pfn_prior  # noqa: E402

TOL = 1e-8


def _data(d, n, m, seed, lengthscale, outputscale, noise):
    """n training points and m test points in [0, 1]^d, y from the GP prior (float64)."""
    x, y = pfn_prior.sample_gp_datasets(jax.random.key(seed), 1, n + m, d, lengthscale=lengthscale,
                                        outputscale=outputscale, noise=noise)
    return x[0, :n], y[0, :n], x[0, n:]


def _botorch_model(X, y, lengthscale, outputscale, noise):
    """``SingleTaskGP`` with the textbook kernel and the given hyperparameters, in eval mode."""
    Xt = torch.tensor(np.asarray(X), dtype=torch.float64)
    yt = torch.tensor(np.asarray(y), dtype=torch.float64)[:, None]
    likelihood = GaussianLikelihood().double()
    model = SingleTaskGP(Xt, yt, likelihood=likelihood, covar_module=ScaleKernel(RBFKernel()),
                         mean_module=ZeroMean(), outcome_transform=None, input_transform=None).double()
    # as float64 tensors: a Python float would pass through torch's default float32 first
    as64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    model.covar_module.base_kernel.lengthscale = as64(lengthscale)
    model.covar_module.outputscale = as64(outputscale)
    model.likelihood.noise = as64(noise)
    model.eval()
    return model


@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("hyper", [(0.2, 1.0, 0.01), (0.6, 2.5, 1e-3)])
def test_posterior_and_ei_match_botorch(d, hyper):
    lengthscale, outputscale, noise = hyper
    X, y, Xs = _data(d, 12, 9, d, lengthscale, outputscale, noise)
    model = _botorch_model(X, y, lengthscale, outputscale, noise)
    # the hyperparameters BoTorch holds are the ones we set (its constraints transform them)
    assert model.covar_module.base_kernel.lengthscale.item() == pytest.approx(lengthscale, rel=1e-12)
    assert model.covar_module.outputscale.item() == pytest.approx(outputscale, rel=1e-12)
    assert model.likelihood.noise.item() == pytest.approx(noise, rel=1e-12)

    mean, var = gp.posterior(X, y, Xs, lengthscale=lengthscale, outputscale=outputscale, noise=noise)
    Xst = torch.tensor(np.asarray(Xs), dtype=torch.float64)
    with torch.no_grad():
        post = model.posterior(Xst)
        t_mean = post.mean.squeeze(-1).numpy()
        t_var = post.variance.squeeze(-1).numpy()
    np.testing.assert_allclose(np.asarray(mean), t_mean, rtol=0, atol=TOL)
    np.testing.assert_allclose(np.asarray(var), t_var, rtol=0, atol=TOL)

    best = float(jnp.max(y))
    ei = acquisition.expected_improvement(mean, jnp.sqrt(var), best)
    log_ei = acquisition.log_expected_improvement(mean, jnp.sqrt(var), best)
    best_t = torch.tensor(best, dtype=torch.float64)  # a float would be stored as float32
    with torch.no_grad():
        t_ei = ExpectedImprovement(model, best_f=best_t)(Xst[:, None, :]).numpy()
        t_log_ei = LogExpectedImprovement(model, best_f=best_t)(Xst[:, None, :]).numpy()
    np.testing.assert_allclose(np.asarray(ei), t_ei, rtol=TOL, atol=1e-300)
    # log EI reaches -1e4 far from the incumbent (z near -140), where the rounding of z^2 / 2
    # alone is about 1e-12 relative: 1e-8 absolute or 1e-11 relative
    np.testing.assert_allclose(np.asarray(log_ei), t_log_ei, rtol=1e-11, atol=TOL)


def test_log_ei_far_below_the_incumbent_matches_botorch():
    """Where EI underflows (z far below -38), both log-EIs stay finite and agree."""
    mean = np.array([-40.0, -60.0, -100.0, -300.0])
    std = np.ones(4)
    ours = np.asarray(acquisition.log_expected_improvement(jnp.asarray(mean), jnp.asarray(std), 0.0))
    from botorch.acquisition.analytic import _log_ei_helper

    theirs = _log_ei_helper(torch.tensor(mean / std, dtype=torch.float64)).numpy()
    assert np.all(np.isfinite(ours))
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=0)


def test_log_marginal_likelihood_matches_gpytorch():
    """Our evidence is gpytorch's exact marginal log likelihood times n (it returns the mean)."""
    from gpytorch.mlls import ExactMarginalLogLikelihood

    X, y, _ = _data(3, 15, 1, 7, 0.4, 1.7, 0.02)
    model = _botorch_model(X, y, 0.4, 1.7, 0.02)
    model.train()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    Xt = torch.tensor(np.asarray(X), dtype=torch.float64)
    with torch.no_grad():
        theirs = float(mll(model(Xt), torch.tensor(np.asarray(y), dtype=torch.float64))) * X.shape[0]
    ours = float(gp.log_marginal_likelihood(X, y, lengthscale=0.4, outputscale=1.7, noise=0.02))
    assert ours == pytest.approx(theirs, rel=0, abs=1e-8)
