"""Yamb's agents by name: random, greedy (most points now), the hand-written heuristic bot (the
turn planners of :mod:`yamblab.oracle.yamb.planners`) and, on a single down, up or free column,
the exact oracle.

All agents act on a :class:`~yamblab.games.yamb.engine.YambBatch` through ``act(batch)``, which
returns an int64 (n,) array of engine actions (-1 for finished games).
"""

from __future__ import annotations

import numpy as np

from yamblab.agents.agent import Agent
from yamblab.games.yamb.rules import YambRules
from yamblab.oracle.yamb.planners import GreedyAgent, HeuristicAgent
from yamblab.oracle.yamb.turn import TurnPlanner, row_par


class RandomAgent(Agent):
    """Uniformly random legal actions (reproducible from ``seed``)."""

    name = "random"

    def __init__(self, rules: YambRules, seed: int = 0):
        self.rules = rules
        self.seed = int(seed)
        self._step = 0

    def act(self, batch) -> np.ndarray:
        self._step += 1
        return batch.core.random_actions(self.seed, self._step)


def _random(game, table=None, seed=0, **_):
    return RandomAgent(game.rules, seed)


def _greedy(game, table=None, seed=0, **_):
    return GreedyAgent(game.rules, seed)


def _heuristic(game, table=None, seed=0, **_):
    return HeuristicAgent(game.rules, seed)


def _oracle(game, table=None, seed=0, **_):
    """Optimal play of a single down, up or free column (its exact oracle)."""
    from yamblab.oracle.yamb.oracles import column_oracle

    oracle = column_oracle(game.rules)
    if game.rules.columns[0] == "free":
        from yamblab.oracle.yamb.free import FreeColumnOracleAgent

        return FreeColumnOracleAgent(oracle)
    from yamblab.oracle.yamb.column import ColumnOracleAgent

    return ColumnOracleAgent(oracle)


def play(agent, batch, max_steps: int = 100000):
    """Let ``agent`` play every game of ``batch`` to the end; returns the batch."""
    for _ in range(max_steps):
        if batch.done.all():
            return batch
        batch.step(agent.act(batch))
    raise RuntimeError("games did not finish")  # pragma: no cover


#: Yamb's agents by name (:mod:`yamblab.agents.base`)
AGENTS = {"random": _random, "greedy": _greedy, "heuristic": _heuristic, "oracle": _oracle}

__all__ = ["RandomAgent", "GreedyAgent", "HeuristicAgent", "TurnPlanner", "AGENTS", "play",
           "row_par"]
