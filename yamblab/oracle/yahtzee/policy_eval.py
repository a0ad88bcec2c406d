"""Exact policy evaluation of turn-perfect agents (the Best Values post's method).

A turn-perfect agent plays each turn exactly against a valuation of boundary states. Its
expected score is computed with no sampling noise by the backward pass run with the agent's
own choices and the true rewards (:func:`yamblab.oracle.yahtzee._occupancy.evaluate`, the same policy
and numbers as :func:`yamblab.oracle.yahtzee._kernels.evaluate_policy`, about three times as fast:
the turn runs on blocks of 8 upper subtotals in vector registers).
"""

from __future__ import annotations

import numpy as np

from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules
from yamblab.oracle.yahtzee import _occupancy


def evaluate_policy(valuation: np.ndarray, rules: YahtzeeRules = OFFICIAL, n_threads: int = 0) -> np.ndarray:
    """Exact expected points still to come, per boundary state, of the turn-perfect agent.

    Args:
        valuation: float64 (4096, 3, 64) (the oracle table, zeros for greedy, a formula …).
            Ties go to the first box in card order and to the lowest keep index.
        n_threads: OpenMP threads (0: all cores).

    Returns:
        float64 (4096, 3, 64); entry ``[0, 0, 0]`` is the expected score of a new game.

    Raises:
        ValueError: a valuation of the wrong shape or with NaN where the agent looks.
    """
    W = np.ascontiguousarray(valuation, dtype=np.float64)
    if W.shape != (4096, 3, 64):
        raise ValueError(f"valuation must have shape (4096, 3, 64), got {W.shape}")
    W = np.nan_to_num(W, nan=0.0)  # entries beyond the reachable upper subtotals are never read
    return _occupancy.evaluate(W, rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus, n_threads)


def expected_score(valuation: np.ndarray, rules: YahtzeeRules = OFFICIAL) -> float:
    """Exact expected score of a new game for the turn-perfect agent of ``valuation``, in points."""
    return float(evaluate_policy(valuation, rules)[0, 0, 0])
