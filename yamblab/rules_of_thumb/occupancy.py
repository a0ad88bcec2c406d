"""Exact forward occupancy of a turn-perfect agent, and where its points are lost (the Best Values post).

That post sampled 200,000 games per rule of thumb to see where the points go. Here nothing is
sampled: the forward pass (:func:`yamblab.oracle.yahtzee._occupancy.forward`) pushes the probability of
every boundary state through each turn of the turn-perfect agent of a valuation ``W`` and adds
up, exactly, the probability that a game visits each boundary state, each box's mean score and
zero rate, the upper-bonus rate, the expected Yahtzee-bonus points, and, against the oracle
table, the expected regret per game of each decision kind (first keep, second keep, box) and of
the box decisions by box, charged as :func:`yamblab.oracle.yahtzee.grading.grade` charges played games.
The regrets add up to the oracle's value minus the agent's exact expected score (the sum of a
game's regrets telescopes to its expected shortfall).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from yamblab.games.yahtzee.rules import BOX_LABELS, OFFICIAL, YahtzeeRules
from yamblab.oracle.yahtzee import _occupancy
from yamblab.vocabulary import decision_names

DECISIONS = decision_names(3)

__all__ = ["DECISIONS", "Occupancy", "forward_occupancy"]


@dataclass(frozen=True)
class Occupancy:
    """Exact statistics of the turn-perfect agent of a valuation over a whole game.

    Attributes:
        rules: the variant.
        visits: float64 (4096, 3, 64) probability that a game passes through each boundary
            state ``(mask12, ystate, upper)``; each of the 14 layers (0 … 13 boxes filled)
            sums to 1.
        expected_score: expected final score, points (bonuses included).
        box_means: float64 (13,) expected points of each box (its own score, no bonuses), in
            card order.
        box_zero_rate: float64 (13,) probability that each box is scored zero.
        upper_bonus_rate: probability of the upper bonus (0 when the variant has none).
        yahtzee_bonus_points: expected Yahtzee-bonus points.
        regret_by_decision: expected oracle regret per game of each decision kind
            (:data:`DECISIONS`), points; empty without an oracle table.
        regret_by_box: expected regret per game of the box decisions, by the box chosen
            (labels of :data:`~yamblab.games.yahtzee.rules.BOX_LABELS`); empty without a table.
    """

    rules: YahtzeeRules
    visits: np.ndarray = field(repr=False)
    expected_score: float
    box_means: np.ndarray
    box_zero_rate: np.ndarray
    upper_bonus_rate: float
    yahtzee_bonus_points: float
    regret_by_decision: dict[str, float]
    regret_by_box: dict[str, float]

    @property
    def regret(self) -> float:
        """Expected regret per game, points (NaN without an oracle table)."""
        return float(sum(self.regret_by_decision.values())) if self.regret_by_decision else float("nan")

    def visited(self, threshold: float = 0.0) -> np.ndarray:
        """bool (4096, 3, 64): boundary states visited with probability above ``threshold``."""
        return self.visits > threshold


def forward_occupancy(valuation: np.ndarray, rules: YahtzeeRules = OFFICIAL,
                      oracle: np.ndarray | None = None, progress: bool = False,
                      n_threads: int = 0, turns: int = 13) -> Occupancy:
    """Run the turn-perfect agent of ``valuation`` forward from a new game, exactly.

    Args:
        valuation: float64 (4096, 3, 64) points still to come per boundary state (NaN entries,
            for unreachable upper subtotals, are read as 0).
        rules: the variant.
        oracle: float64 (4096, 3, 64) the oracle table of ``rules`` (to charge regrets), or
            ``None``.
        progress: show a progress bar over the 13 turns.
        n_threads: OpenMP threads (0: all cores).
        turns: follow only the first ``turns`` turns (1..13; statistics cover those turns).

    Returns:
        :class:`Occupancy`. Cost: about three backward passes (seconds on two cores).

    Raises:
        ValueError: a table of the wrong shape, or ``turns`` outside 1..13.
    """
    W = _table(valuation, "valuation")
    V = _table(oracle, "oracle table") if oracle is not None else None
    bar = cb = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=int(sum(len(_occupancy.layer_groups(n)) for n in range(13))),
                   desc="forward occupancy", unit="state groups")
        cb = bar.update
    try:
        visits, st = _occupancy.forward(W, V, rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus,
                                        n_threads, cb, turns)
    finally:
        if bar is not None:
            bar.close()
    S = _occupancy
    reg_dec, reg_box = {}, {}
    if V is not None:
        reg_dec = {k: float(st[S.S_REGRET + i]) for i, k in enumerate(DECISIONS)}
        reg_box = {BOX_LABELS[b]: float(st[S.S_REGRET_BOX + b]) for b in range(13)}
    return Occupancy(
        rules=rules, visits=visits, expected_score=float(st[S.S_POINTS]),
        box_means=st[S.S_BOX_POINTS:S.S_BOX_POINTS + 13].copy(),
        box_zero_rate=st[S.S_BOX_ZERO:S.S_BOX_ZERO + 13].copy(),
        upper_bonus_rate=float(st[S.S_UPPER_BONUS]), yahtzee_bonus_points=float(st[S.S_YAHTZEE_BONUS]),
        regret_by_decision=reg_dec, regret_by_box=reg_box,
    )


def _table(x, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (4096, 3, 64):
        raise ValueError(f"{what} must have shape (4096, 3, 64), got {a.shape}")
    return np.ascontiguousarray(np.nan_to_num(a, nan=0.0))
