"""Yahtzee as a :class:`~yamblab.games.protocol.Game` (one column of 13 boxes, 5 dice, 3 rolls).

Every position is encoded from its canonical card (:mod:`yamblab.games.yahtzee.canonical`):
positions with the same state, dice and rolls left look the same to the network.
"""

from __future__ import annotations

import numpy as np

from yamblab.games.encoding import EncodedBatch, encode_yahtzee, shared_action_to_yahtzee, \
    yahtzee_action_to_shared
from yamblab.games.yahtzee.canonical import canonical_card
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import UPPER_BONUS_THRESHOLD, YahtzeeRules


class _Cards:
    """Duck-typed Yahtzee positions for :func:`encode_yahtzee`: the canonical cards of any
    cards, with any dice (and ``legal``, bool (m, 45), or no legal action)."""

    def __init__(self, box_scores, upper_raw, dice, rolls_left, rules, legal=None):
        self.box_scores, self.upper_raw = canonical_card(box_scores, upper_raw, rules)
        self.n = self.box_scores.shape[0]
        self.dice = np.asarray(dice, np.int8)
        self.rolls_left = np.asarray(rolls_left, np.int8)
        self._legal = legal

    def legal_actions(self):
        return np.zeros((self.n, 45), np.bool_) if self._legal is None else self._legal


def encode_yahtzee_positions(box_scores: np.ndarray, upper_raw: np.ndarray, dice: np.ndarray,
                             rolls_left: np.ndarray, rules: YahtzeeRules) -> EncodedBatch:
    """Encode arbitrary Yahtzee positions from their canonical cards (search leaves; the legal
    mask is left empty).

    Args:
        box_scores: int (m, 13) points per box, −1 for open boxes.
        upper_raw: int (m,) upper-section sum (uncapped, points).
        dice: int (m, 5) faces 1..6, or 0 for a boundary position (no dice).
        rolls_left: int (m,) 0..3 (3: a boundary position, before the turn's first roll).
        rules: the variant.
    """
    return encode_yahtzee(_Cards(box_scores, upper_raw, dice, rolls_left, rules), rules)


def encode_yahtzee_boundary(box_scores: np.ndarray, upper_raw: np.ndarray, rules: YahtzeeRules) -> EncodedBatch:
    """Encode boundary positions (start of a turn, before the roll) from their canonical cards:
    no dice, rolls-left slot 3."""
    m = np.asarray(box_scores).shape[0]
    return encode_yahtzee_positions(box_scores, upper_raw, np.zeros((m, 5), np.int8), np.full(m, 3), rules)


class YahtzeeGame:
    """Solitaire Yahtzee under a rule variant (see :mod:`yamblab.games.protocol`).

    Args:
        rules: the :class:`YahtzeeRules` variant.
    """

    name = "yahtzee"
    n_dice = 5
    n_turns = 13
    idle_action = 0
    solved = True

    def __init__(self, rules: YahtzeeRules):
        self.rules = rules
        self.label = rules.name
        self.digest = rules.digest

    def __repr__(self) -> str:
        return f"YahtzeeGame({self.label})"

    def new_batch(self, n: int, seed: int, first_game: int = 0):
        return new_batch(n, self.rules, seed=seed, first_game=first_game)

    def encode(self, batch) -> EncodedBatch:
        return encode_yahtzee(_Cards(batch.box_scores, batch.upper_raw, batch.dice, batch.rolls_left,
                                     self.rules, batch.legal_actions()), self.rules)

    def encode_boundary(self, batch, games: np.ndarray) -> EncodedBatch:
        g = np.asarray(games, np.int64)
        return encode_yahtzee_boundary(batch.box_scores[g], batch.upper_raw[g], self.rules)

    def to_engine(self, shared: np.ndarray) -> np.ndarray:
        return shared_action_to_yahtzee(shared)

    def to_shared(self, actions: np.ndarray) -> np.ndarray:
        return yahtzee_action_to_shared(actions)

    def turn_start(self, batch) -> np.ndarray:
        return (np.asarray(batch.rolls_left) == 2) & ~np.asarray(batch.done)

    def rolls_left(self, batch) -> np.ndarray:
        return np.asarray(batch.rolls_left, np.int64)

    def bonus_reached(self, batch) -> np.ndarray:
        return (np.asarray(batch.upper_raw) >= UPPER_BONUS_THRESHOLD).astype(np.float32)


def from_options(rules: str | None = None) -> YahtzeeGame:
    """The game of a run config's Yahtzee options (:data:`yamblab.games.protocol.GAMES`; no
    rules, or empty ones: the official ``forced``)."""
    return YahtzeeGame(YahtzeeRules.parse(rules or "forced"))


__all__ = ["YahtzeeGame", "from_options", "encode_yahtzee_positions", "encode_yahtzee_boundary"]
