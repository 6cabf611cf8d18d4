"""The design utility of TC-BO, its Danskin gradient, and Frank-Wolfe over paths.

After Folch, Tsay, Lee, Shafei, Ormaniec, Krause, van der Wilk, Misener, Mutny (NeurIPS 2024,
arXiv 2402.08406), rebuilt from the paper's description (the official code is not used).

**Candidates.** Z = {s : UCB(s) >= max_s' LCB(s')} with UCB = mean + sqrt(beta) sd and
LCB = mean - sqrt(beta) sd (``xfmr.bayesopt.acquisition.upper_confidence_bound``, the one UCB
convention of Parts IV and V).

**The utility.** For a design d (a visitation distribution over measurement types i with
scaled features psi_i = phi_i / sigma_i) and n remaining measurements,
V(d) = V_hist + n sum_i d_i psi_i psi_i^T and

    U(d) = max_{z, z' in Z} (phi_z - phi_z')^T V(d)^-1 (phi_z - phi_z').

U is convex in d; by Danskin's theorem its gradient at a d with a unique maximising pair
(Delta = phi_z - phi_z') is dU/dd_i = -n (psi_i^T V(d)^-1 Delta)^2.

**The planner.** Minimising the linearisation of U over the visitation distributions of paths
is a longest-path problem with reward r_i = (psi_i^T V^-1 Delta)^2, solved exactly by backward
induction (``xfmr.tcbo.mdp``). Frank-Wolfe mixes such paths (:func:`frank_wolfe`); the
receding-horizon policy the authors run (``xfmr.tcbo.runner``) takes one Frank-Wolfe step
linearised at the history, executes the first move of the planned path and re-plans after
every measurement.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.bayesopt.acquisition import upper_confidence_bound
from xfmr.core.validate import check_int
from xfmr.tcbo.mdp import backward_induction, check_neighbours, edge_rewards, rollout, terminal_values
from xfmr.tcbo.weight_gp import pair_variances

__all__ = [
    "candidates",
    "masked_max_pair",
    "hardest_pair",
    "linearised_reward",
    "utility",
    "utility_gradient",
    "frank_wolfe",
]


def candidates(mean, sd, beta) -> jax.Array:
    """Bool mask (S,) of the possible maximisers: UCB(s) >= max_s' LCB(s').

    UCB = mean + sqrt(beta) sd (``upper_confidence_bound``), LCB = mean - sqrt(beta) sd.
    """
    lower = -upper_confidence_bound(-mean, sd, beta)
    return upper_confidence_bound(mean, sd, beta) >= jnp.max(lower)


def masked_max_pair(D, mask) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(D[z, z2], z, z2)``: the largest entry of D (S, S) over pairs with mask[z] and mask[z2]."""
    D = jnp.where(mask[:, None] & mask[None, :], D, -jnp.inf)
    k = jnp.argmax(D)
    return D.reshape(-1)[k], k // D.shape[0], k % D.shape[0]


@jax.jit
def hardest_pair(precision, Phi, mask):
    """``(variance, z, z2)``: the candidate pair whose difference f(z) - f(z2) has the largest
    variance (phi_z - phi_z2)^T V^-1 (phi_z - phi_z2) under the precision V, mask (S,) bool."""
    return masked_max_pair(pair_variances(precision, Phi), mask)


@jax.jit
def linearised_reward(precision, Phi, mask) -> jax.Array:
    """The TC-BO reward per state (before dividing by the noise variance), shape (S,):
    r(s) = (phi_s^T V^-1 Delta)^2 with Delta = phi_z - phi_z2 the :func:`hardest_pair`."""
    _, z, z2 = hardest_pair(precision, Phi, mask)
    return (Phi @ jnp.linalg.solve(precision, Phi[z] - Phi[z2])) ** 2


def _design_precision(design, Psi, precision_hist, n_remaining):
    return precision_hist + n_remaining * (Psi.T * design) @ Psi


@jax.jit
def utility(design, Psi, Phi, precision_hist, mask, n_remaining) -> jax.Array:
    """U(d) = max over candidate pairs of the variance of f(z) - f(z') under V(d).

    Args:
        design: (n,) weights d_i >= 0 on measurement types (a visitation distribution).
        Psi: (n, m) scaled features psi_i = phi_i / sigma_i of the measurement types.
        Phi: (S, m) features of the states; mask (S,) bool, the candidate set Z.
        precision_hist: (m, m) V_hist; n_remaining: number of measurements the design spreads.
    """
    V = _design_precision(design, Psi, precision_hist, n_remaining)
    return masked_max_pair(pair_variances(V, Phi), mask)[0]


@jax.jit
def utility_gradient(design, Psi, Phi, precision_hist, mask, n_remaining):
    """``(U, grad)``: U(d) and its Danskin gradient -n (psi_i^T V(d)^-1 Delta)^2, shape (n,)."""
    V = _design_precision(design, Psi, precision_hist, n_remaining)
    value, z, z2 = masked_max_pair(pair_variances(V, Phi), mask)
    u = jnp.linalg.solve(V, Phi[z] - Phi[z2])
    return value, -n_remaining * (Psi @ u) ** 2


def frank_wolfe(Phi, noise_sd, precision_hist, mask, neighbours, start, horizon, n_steps):
    """Frank-Wolfe over the visitation distributions of paths (state design, noise per state).

    d_0 is the visitation of the oracle path linearised at the history (the receding-horizon
    plan); step k: g = grad U(d_k), oracle path p_k = best_path(-g), gap_k = <g, d_k - d(p_k)>
    (an upper bound on U(d_k) - min U), d_{k+1} = (1 - gamma_k) d_k + gamma_k d(p_k),
    gamma_k = 2 / (k + 2).

    Returns ``(utilities (n_steps + 1,), gaps (n_steps,), design (S,))``.
    """
    nb = jnp.asarray(check_neighbours(neighbours))
    start = check_int(start, "start", minimum=0, maximum=nb.shape[0] - 1)
    horizon = check_int(horizon, "horizon", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=1)
    Psi = Phi / jnp.broadcast_to(noise_sd, (Phi.shape[0],))[:, None]
    n_states = Phi.shape[0]
    terminal = terminal_values(n_states, None, Phi.dtype)

    def oracle(grad):
        edge = edge_rewards(-grad, nb)
        _, policy = backward_induction(jnp.broadcast_to(edge, (horizon,) + edge.shape), nb, terminal)
        states = rollout(policy, nb, jnp.asarray(start))
        return jnp.zeros(n_states, Phi.dtype).at[states].add(1.0 / horizon)

    _, g0 = utility_gradient(jnp.zeros(n_states, Phi.dtype), Psi, Phi, precision_hist, mask, horizon)
    d = oracle(g0)
    utilities, gaps = [], []
    for k in range(n_steps):
        value, g = utility_gradient(d, Psi, Phi, precision_hist, mask, horizon)
        p = oracle(g)
        utilities.append(value)
        gaps.append(jnp.dot(g, d - p))
        gamma = 2.0 / (k + 2.0)
        d = (1.0 - gamma) * d + gamma * p
    utilities.append(utility(d, Psi, Phi, precision_hist, mask, horizon))
    return jnp.stack(utilities), jnp.stack(gaps), d
