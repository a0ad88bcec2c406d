"""Yamb's hand-written turn planners: each turn solved exactly (every reroll, every box, and
whether to announce) against a *box valuation*, with the within-turn recurrences of the "How The
AI Works" page over histograms (:class:`~yamblab.oracle.yamb.turn.TurnPlanner`). They differ
only in the valuation:

``greedy``     the points the box adds to the card total now (bonus and middle term included
               when they are completed by this box): turn-perfect play against a zero valuation
               of the future (the field's definition of greedy).
``heuristic``  points now, minus the box's **par** (what a turn devoted to that row scores on
               average, :func:`~yamblab.oracle.yamb.turn.row_par`), plus a projected upper bonus
               (a logistic estimate of reaching the threshold with par play in the rest of the
               column) and the projected middle term Ones × (Max − Min) from the known or par
               values of the other two boxes. A box in a down or up column costs less par than
               one in a free column: its order is forced, so its par is what a forced turn gets.

They are the registry's ``greedy`` and ``heuristic`` agents (:mod:`yamblab.agents.yamb_bots`),
and the heuristic plays the opening of the games whose endgames make Yamb's decision set.
"""

from __future__ import annotations

import numpy as np

from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, YambRules
from yamblab.oracle.yamb.turn import TurnPlanner, row_par


class GreedyAgent(TurnPlanner):
    """Most points now: turn-perfect play for the points this turn adds (module docstring)."""

    name = "greedy"

    def box_values(self, batch, games):
        return self._immediate_gain(batch, games)


class HeuristicAgent(TurnPlanner):
    """Hand-written strategy: par per row, a projected upper bonus, the projected middle term.

    Args:
        forced_par: the share of a row's par charged for a box in a down or up column (its
            order is forced, so using it now costs less flexibility).
    """

    name = "heuristic"

    def __init__(self, rules: YambRules, seed: int = 0, forced_par: float = 0.8):
        super().__init__(rules, seed)
        self.par = row_par(rules)
        self.forced_par = forced_par
        kinds = np.array(rules.columns)
        self.col_par = np.where(np.isin(kinds, ("down", "up")), forced_par, 1.0)

    def box_values(self, batch, games):
        r = self.rules
        card = batch.card[games].astype(np.int64)
        B, C, R = card.shape
        s = np.arange(self.smax + 1, dtype=np.float64)
        filled = card >= 0
        sc = np.where(filled, card, 0).astype(np.float64)
        par = self.par
        v = np.zeros((B, C, R, self.smax + 1))
        # rows with direct points, minus par
        for row in list(range(6)) + list(range(8, R)):
            v[:, :, row] = s - par[row] * self.col_par[None, :, None]
        # upper bonus projection
        T, bonus = r.upper_bonus_threshold, r.upper_bonus
        up = sc[:, :, :6].sum(2)
        faces = np.arange(1, 7, dtype=np.float64)
        open_up = ~filled[:, :, :6]
        if bonus > 0:
            for row in range(6):
                rest = open_up.copy()
                rest[:, :, row] = False
                par_rest = (rest * 3 * faces).sum(2)                 # (B, C)
                n_rest = rest.sum(2)
                sigma = 0.5 + 2.5 * np.sqrt(n_rest)
                after = _logistic((up[:, :, None] + s + par_rest[:, :, None] - T) / sigma[:, :, None])
                before = _logistic((up + 3 * faces[row] + par_rest - T) / sigma)
                secured = (up >= T)[:, :, None]
                v[:, :, row] += np.where(secured, 0.0, bonus * (after - before[:, :, None]))
        # middle term Ones × (Max − Min), projected
        o_est = np.where(filled[:, :, ONES_ROW], sc[:, :, ONES_ROW], par[ONES_ROW])
        mx_est = np.where(filled[:, :, MAX_ROW], sc[:, :, MAX_ROW], par[MAX_ROW])
        mn_est = np.where(filled[:, :, MIN_ROW], sc[:, :, MIN_ROW], par[MIN_ROW])
        d_est = mx_est - mn_est
        if r.middle_clamp:
            d_est = np.maximum(d_est, 0.0)
        v[:, :, ONES_ROW] += (s - par[ONES_ROW]) * d_est[:, :, None]
        v[:, :, MAX_ROW] = o_est[:, :, None] * (s - par[MAX_ROW])
        v[:, :, MIN_ROW] = -o_est[:, :, None] * (s - par[MIN_ROW])
        return v


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


__all__ = ["GreedyAgent", "HeuristicAgent"]
