"""Policy targets from search, value targets as bin distributions, exploration noise.

Policy targets (the YoloYamb post, "The KL Breakthrough"):

* plain: ``softmax(Q / T)`` over the legal actions;
* KL-regularised: ``softmax(log prior + Q / T)``. This is the solution of
  ``max_π  E_π[Q] / T − KL(π ‖ prior)`` (Grill et al. 2020, "Monte-Carlo tree search as
  regularized policy optimization"): small, noisy Q gaps only nudge the prior, while a move
  the search finds clearly better still wins.

``Q`` and ``T`` are in points.
"""

from __future__ import annotations

import numpy as np
import torch

PRIOR_FLOOR = 1e-8


def policy_targets(q: np.ndarray, prior: np.ndarray | None, temperature: float, kl: bool) -> np.ndarray:
    """Search policy targets over the shared actions.

    Args:
        q: float64 (n, A) action values in points, ``-inf`` on illegal actions.
        prior: float (n, A) policy-head probabilities (needed when ``kl``).
        temperature: ``T`` in points (> 0).
        kl: use ``softmax(log prior + Q/T)`` instead of ``softmax(Q/T)``.

    Returns:
        float32 (n, A), zero on illegal actions, rows summing to 1 (all-zero rows for
        positions without a legal action).

    Raises:
        ValueError: ``temperature`` ≤ 0, or ``kl`` without a prior.
    """
    if temperature <= 0:
        raise ValueError(f"temperature {temperature} must be positive")
    legal = np.isfinite(q)
    z = np.where(legal, q, 0.0) / temperature
    if kl:
        if prior is None:
            raise ValueError("KL-regularised targets need the prior")
        z = z + np.log(np.maximum(prior.astype(np.float64), PRIOR_FLOOR))
    z = np.where(legal, z, -np.inf)
    zmax = np.max(np.where(legal, z, -1e300), axis=1, keepdims=True)
    e = np.where(legal, np.exp(z - zmax), 0.0)
    s = e.sum(axis=1, keepdims=True)
    return (e / np.where(s > 0, s, 1.0)).astype(np.float32)


def add_dirichlet_noise(prior: np.ndarray, legal: np.ndarray, fraction: float, alpha: float,
                        rng: np.random.Generator) -> np.ndarray:
    """Mix Dirichlet noise into a prior over the legal actions (AlphaZero; YoloYamb: 15 %).

    Args:
        prior: float (n, A); legal: bool (n, A); fraction: weight of the noise in 0..1;
        alpha: Dirichlet concentration; rng: the generator.

    Returns:
        float64 (n, A): ``(1 − fraction) · prior + fraction · Dir(alpha)`` on the legal actions.
    """
    if fraction <= 0:
        return prior.astype(np.float64)
    g = rng.gamma(alpha, 1.0, size=prior.shape) * legal
    s = g.sum(axis=1, keepdims=True)
    noise = g / np.where(s > 0, s, 1.0)
    return (1.0 - fraction) * prior + fraction * noise


def two_hot(values: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """Points as a distribution over bins: all mass on the two nearest centres, linearly.

    Args:
        values: float (B,) points; centers: float (bins,) evenly spaced bin centres.

    Returns:
        float (B, bins) whose mean is ``values`` clipped to the centres' range.
    """
    n = centers.numel()
    lo_c, hi_c = centers[0], centers[-1]
    x = values.clamp(lo_c, hi_c)
    pos = (x - lo_c) / (hi_c - lo_c) * (n - 1)
    lo = pos.floor().long().clamp(0, n - 1)
    hi = (lo + 1).clamp(max=n - 1)
    w_hi = pos - lo.to(pos.dtype)
    out = torch.zeros(values.shape[0], n, dtype=values.dtype, device=values.device)
    out.scatter_add_(1, lo[:, None], (1 - w_hi)[:, None])
    out.scatter_add_(1, hi[:, None], w_hi[:, None])
    return out
