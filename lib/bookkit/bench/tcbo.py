"""Benchmarks of Part V (transition-constrained BO): one re-plan of the TC-BO policy.

One re-plan = the posterior from the precision (Cholesky), the candidate set, the hardest
candidate pair, the linearised reward and backward induction over the full horizon (the
policy's action is read off at the current step), exactly as ``xfmr.tcbo.runner`` runs it after
every measurement. Sizes: the 12 x 12 grid of the book's comparison (H = 25) and a 30 x 30
grid (900 states, H = 50). Float64, jit amortised (median of repeated calls on new
histories; the first call, with compilation, is in the note). Goals: 0.2 s and 1 s on 2 cores.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookkit.bench.timing import measure

__all__ = ["bench_tcbo_replan"]


def _replan_fn(n_grid: int, horizon: int, lengthscale: float = 0.15, noise_sd: float = 0.1, beta: float = 4.0):
    from xfmr.tcbo import design, mdp, runner, weight_gp

    coords, nb = mdp.grid_states(n_grid, n_grid)
    Phi = weight_gp.features(coords, lengthscale=lengthscale)
    problem = runner.make_problem(Phi, nb, 0, noise_sd=noise_sd, beta=beta)

    @jax.jit
    def replan(post, s):
        mean, var = weight_gp.predict_states(post, Phi)
        mask = design.candidates(mean, jnp.sqrt(var), beta)
        reward = design.linearised_reward(post.precision, Phi, mask) / noise_sd**2
        valid = problem.neighbours >= 0
        edge = jnp.where(valid, reward[jnp.where(valid, problem.neighbours, 0)], 0.0)
        _, policy = mdp.backward_induction(jnp.broadcast_to(edge, (horizon,) + edge.shape),
                                            problem.neighbours, problem.terminal)
        return policy[0, s]

    def history(seed: int, n: int = 20):
        rng = np.random.default_rng(seed)
        post = weight_gp.prior(Phi.shape[1])
        for i in rng.integers(0, len(coords), size=n):
            post = weight_gp.update(post, Phi[i], float(rng.normal()), noise_sd)
        return post

    return replan, history, Phi.shape


def bench_tcbo_replan(repeats: int = 5) -> list[dict]:
    """Time one TC-BO re-plan on 12 x 12 (H = 25) and 30 x 30 (H = 50) grids."""
    rows = []
    with jax.enable_x64(True):
        for n_grid, horizon, goal in ((12, 25, 0.2), (30, 50, 1.0)):
            replan, history, shape = _replan_fn(n_grid, horizon)
            posteriors = [history(i) for i in range(repeats + 1)]  # built before the clock starts
            timing = measure(lambda i: replan(posteriors[i], 0), repeats)
            rows.append({
                "benchmark": "TC-BO re-plan (posterior, candidates, hardest pair, DP; float64, jit amortised)",
                "size": f"{n_grid} x {n_grid} grid ({shape[0]} states, {shape[1]} features), 5 moves, H = {horizon}",
                **timing.fields(),
                "goal": f"< {goal} s",
                "note": f"a new history for each call; first call incl. compile {timing.first_seconds:.2f} s",
            })
    return rows
