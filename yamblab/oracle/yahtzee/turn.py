"""The per-turn pass of Yahtzee against a valuation of boundary states (the recurrences of
"How The AI Works").

A turn starts at a boundary state (filled boxes, upper subtotal capped at 63, Yahtzee box) and
ends at one of the at most 44 boundary states it can reach. Given any **valuation** ``W`` of
boundary states (points still to come: the oracle's table, a rule of thumb, a network's
values), the within-turn pass (:func:`yamblab.oracle.yahtzee._kernels.turn_solutions`) gives the value
of every keep with two and with one roll left; :func:`yamblab.oracle.yahtzee._kernels.box_values`
gives the value of scoring the dice in each box. :class:`TurnValues` caches the keep values of
each game's current turn; :func:`hold_values` turns them into the value of each hold mask.
"""

from __future__ import annotations

import numpy as np

from yamblab.oracle.yahtzee import _kernels

__all__ = ["TurnValues", "hold_values"]


def hold_values(E1: np.ndarray, E2: np.ndarray, keeps: np.ndarray, rolls_left: np.ndarray) -> np.ndarray:
    """Value of each hold mask from the turn's keep values.

    Args:
        E1: float64 (n, 462) keep values with two rolls left (after the first roll).
        E2: float64 (n, 462) keep values with one roll left (after the second roll).
        keeps: int (n, 32) keep index each hold mask makes of the dice as they lie.
        rolls_left: int (n,) rolls left (2, 1 or 0).

    Returns:
        float64 (n, 32): expected points still to come after each hold; ``-inf`` where no roll
        is left.
    """
    rl = np.asarray(rolls_left)
    E = np.where((rl == 2)[:, None], E1, E2)
    hold = np.take_along_axis(E, np.asarray(keeps, dtype=np.int64), axis=1)
    hold[rl == 0] = -np.inf
    return hold


class TurnValues:
    """Per-game cache of the keep values of the current turn for a valuation table.

    Args:
        valuation: float64 (4096, 3, 64) table of points still to come per boundary state
            (mask of the 12 non-Yahtzee boxes, Yahtzee box 0 open / 1 zero / 2 fifty, upper
            subtotal capped at 63).
        rules: the :class:`~yamblab.games.yahtzee.rules.YahtzeeRules` variant.
    """

    def __init__(self, valuation: np.ndarray, rules):
        self.W = np.ascontiguousarray(valuation, dtype=np.float64)
        self.rules = rules
        self._turn = None

    def _args(self):
        r = self.rules
        return r.joker_code, r.upper_bonus, r.yahtzee_bonus

    def update(self, batch) -> None:
        """Compute the turn's keep values for games that started a new turn."""
        n = batch.n
        if self._turn is None or self._turn.shape[0] != n:
            self._turn = np.full(n, -1, dtype=np.int64)
            self.E1 = np.zeros((n, 462))
            self.E2 = np.zeros((n, 462))
        turn = batch.turn.astype(np.int64)
        need = np.flatnonzero((turn < 13) & (turn != self._turn))
        if need.size:
            states = np.ascontiguousarray(batch.boundary_states()[need])
            e1, e2 = _kernels.turn_solutions(self.W, *self._args(), states)
            self.E1[need] = e1
            self.E2[need] = e2
            self._turn[need] = turn[need]

    def action_values(self, batch):
        """Values of every action now: ``(box_values (n, 13), hold_values (n, 32), keeps (n, 32))``.

        ``box_values`` are points now plus the valuation of the next state (``-inf`` if
        illegal); ``hold_values`` the expected value of each hold mask (``-inf`` with no roll
        left); ``keeps`` the keep index each hold mask makes.
        """
        self.update(batch)
        box = _kernels.box_values(self.W, *self._args(), batch.boundary_states(), batch.roll_indices())
        keeps = batch.hold_keeps()
        return box, hold_values(self.E1, self.E2, keeps, batch.rolls_left), keeps
