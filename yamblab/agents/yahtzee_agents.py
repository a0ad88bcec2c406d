"""Baseline Yahtzee agents: random, greedy, oracle, and turn-perfect play for any valuation.

A **turn-perfect agent** (the Best Values post) plays each turn exactly: every keep and every box
maximises the points scored this turn plus a *valuation* of the boundary state it leaves.
With the oracle table as valuation it is optimal; with the zero valuation it is greedy.
Ties go to the first box in card order and to the keep with the lowest keep index, the same
rules as :func:`yamblab.oracle.yahtzee.policy_eval.evaluate_policy`, so that simulated games and the
exact evaluation follow the same policy.
"""

from __future__ import annotations

import numpy as np

from yamblab.agents.agent import Agent
from yamblab.games.dice import KEEP_OFFSET
from yamblab.games.yahtzee.rules import YahtzeeRules
from yamblab.oracle.yahtzee.turn import TurnValues

KEEP_ALL_HOLD = 31


def turn_perfect_actions(box, hold, keeps, batch) -> np.ndarray:
    """The turn-perfect choice given action values (see :class:`TurnValues`), int64 (n,)."""
    n = batch.n
    rl = batch.rolls_left
    actions = np.argmax(box, axis=1).astype(np.int64)          # first box on ties
    rolling = np.flatnonzero((rl > 0) & (batch.turn < 13))
    if rolling.size:
        h = hold[rolling]
        k = keeps[rolling]
        best = h.max(axis=1, keepdims=True)
        kbest = np.where(h == best, k, 1 << 30).min(axis=1)    # lowest keep index on ties
        hmask = np.argmax(k == kbest[:, None], axis=1)
        keep_all = kbest == (batch.roll_indices()[rolling] + int(KEEP_OFFSET[5]))
        last = rl[rolling] == 1
        act = 13 + hmask
        act = np.where(keep_all & ~last, 13 + KEEP_ALL_HOLD, act)
        act = np.where(keep_all & last, actions[rolling], act)  # nothing to reroll: score now
        actions[rolling] = act
    actions[batch.turn >= 13] = 0
    return actions[:n]


class TurnPerfectAgent(Agent):
    """Plays every turn exactly against a valuation table (the Best Values post).

    Args:
        valuation: float64 (4096, 3, 64): points still to come per boundary state.
        rules: the variant.
        name: the agent's name in reports.
    """

    def __init__(self, valuation: np.ndarray, rules: YahtzeeRules, name: str = "turn-perfect"):
        self.values = TurnValues(valuation, rules)
        self.name = name

    def act(self, batch) -> np.ndarray:
        box, hold, keeps = self.values.action_values(batch)
        return turn_perfect_actions(box, hold, keeps, batch)


class RandomAgent(Agent):
    """Uniformly random legal actions (reproducible from ``seed``)."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = int(seed) & (2**64 - 1)
        self.step = 0

    def reset(self, batch) -> None:
        self.step = 0

    def act(self, batch) -> np.ndarray:
        self.step += 1
        return batch.random_actions(self.seed, self.step)


def zero_valuation() -> np.ndarray:
    """The zero valuation: every boundary state worth 0 (greedy play)."""
    return np.zeros((4096, 3, 64))


def _random(game, table=None, seed=0, **_):
    return RandomAgent(seed)


def _greedy(game, table=None, seed=0, **_):
    return TurnPerfectAgent(zero_valuation(), game.rules, name="greedy")


def _oracle(game, table=None, seed=0, **_):
    from yamblab.oracle.yahtzee.table import OracleTable

    table = table or OracleTable.get(game.rules)
    return TurnPerfectAgent(table.values, game.rules, name="oracle")


#: Yahtzee's agents by name (:mod:`yamblab.agents.base`)
AGENTS = {"random": _random, "greedy": _greedy, "oracle": _oracle}
