"""Yahtzee's oracle service: the exact table built or loaded once, and recorded decisions graded
against it for whoever asks (the evaluator in a run; a Ray actor, or a plain object when the
run's roles share one process). The ``table`` of Yahtzee's registration (:data:`yamblab.games.protocol.GAMES`)."""

from __future__ import annotations

import numpy as np

from yamblab.oracle.yahtzee.grading import grade_decisions, service_regret_fn
from yamblab.oracle.yahtzee.table import OracleTable, timed_build


def load_table(game) -> OracleTable:
    """The cached exact table of ``game``'s rules (built once, then read from the cache)."""
    return OracleTable.get(game.rules)


def yardstick_seconds() -> float:
    """Seconds the official rules' table takes to build on one thread, the faster of two builds
    after an untimed one (what ``benchmarks/oracle_build.py`` times)."""
    timed_build(1)                          # untimed: the first pass warms caches and pages
    return min(timed_build(1) for _ in range(2))


class TableService:
    """Builds or loads the exact table once and grades decisions for whoever asks.

    The table is put in the object store once (:meth:`table_ref`), so actors on the same node
    read it without copies.
    """

    def __init__(self, game):
        self.rules = game.rules
        self.table = load_table(game)
        self._ref = None
        self.graded = 0

    def table_ref(self) -> list:
        """``[ObjectRef]`` of the (4096, 3, 64) float64 table (wrapped in a list so Ray
        passes the reference, not the array)."""
        import ray

        if self._ref is None:
            self._ref = ray.put(self.table.values)
        return [self._ref]

    def new_game_value(self) -> float:
        return self.table.new_game_value

    def grade(self, states, rolls, rolls_left, keeps, actions) -> np.ndarray:
        """Regret of each recorded decision (:func:`~yamblab.oracle.yahtzee.grading.grade_decisions`)."""
        self.graded += len(actions)
        return grade_decisions(self.table, states, rolls, rolls_left, keeps, actions)


__all__ = ["TableService", "load_table", "service_regret_fn", "yardstick_seconds"]
