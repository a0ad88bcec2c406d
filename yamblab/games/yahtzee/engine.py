"""The batched Yahtzee engine (Cython) and a constructor that takes a rules object.

See :class:`yamblab.games.yahtzee._engine.YahtzeeBatch` for the arrays and the 45-action space
(0..12 score a box, 13 + h reroll the dice not held by hold mask h).
"""

from __future__ import annotations

from yamblab.games.yahtzee._engine import HOLD_OFFSET, N_ACTIONS, YahtzeeBatch
from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules

__all__ = ["YahtzeeBatch", "new_batch", "N_ACTIONS", "HOLD_OFFSET"]


def new_batch(n: int, rules: YahtzeeRules = OFFICIAL, seed: int = 0, first_game: int = 0) -> YahtzeeBatch:
    """Start ``n`` new games under ``rules`` with dice seed ``seed`` (first dice already rolled).

    Game ``i`` is game number ``first_game + i`` of that seed: the same number always gets
    the same dice, whichever agent plays it.

    Raises:
        ValueError: a negative ``n`` or a seed outside 0..2**64-1.
    """
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed {seed} must be between 0 and 2**64-1")
    return YahtzeeBatch(int(n), rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus,
                        int(seed), int(first_game))
