"""Advice: the exact expected final score of every legal keep and box in a position.

A position is a scorecard (boundary state and points already scored), the five dice in
their physical order, and the number of rolls left this turn (0, 1 or 2). The value of an
action is the optimal expected final score after taking it: points already on the card,
plus points scored this turn, plus the oracle's value of what is left (seed 001; the advice
endpoint of seed 002).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from yamblab.errors import InvalidDiceError, UnreachablePositionError
from yamblab.games.dice import KEEP_OFFSET, hold_to_keep, keep_faces, roll_index, validate_dice
from yamblab.games.yahtzee.rules import BOX_LABELS, BoundaryState
from yamblab.oracle import _kernels
from yamblab.oracle.table import OracleTable


@dataclass(frozen=True)
class Advice:
    """One legal action and its exact value.

    Attributes:
        kind: ``"keep"`` (hold these dice and reroll the rest) or ``"box"`` (score now).
        label: human-readable action, e.g. ``"keep 5 5"`` or ``"score Full House"``.
        expected_final: optimal expected final score after this action, in points.
        loss: points of expected score given away against the best action (0 for the best).
        hold_mask: for keeps, a 5-bit mask over the dice as given (bit i holds die i).
        box: for boxes, the box index 0..12 in card order.
        keep: for keeps, the keep index 0..461.
    """

    kind: str
    label: str
    expected_final: float
    loss: float
    hold_mask: int | None = None
    box: int | None = None
    keep: int | None = None


def advise(table: OracleTable, state: BoundaryState, dice, rolls_left: int,
           score_so_far: int = 0) -> list[Advice]:
    """Rank every legal action of a position by its exact expected final score.

    Args:
        table: the oracle table of the rules in play.
        state: the scorecard's boundary state (must not be a full card).
        dice: five faces 1..6 in their physical order.
        rolls_left: 0, 1 or 2 rerolls left this turn.
        score_so_far: points already on the card (bonuses included), added to every value.

    Returns:
        Actions, best first (equivalent holds of equal dice appear once).

    Raises:
        InvalidDiceError: impossible dice.
        UnreachablePositionError: a full card, or rolls_left outside 0..2.
    """
    arr = validate_dice(dice)
    if rolls_left not in (0, 1, 2):
        raise UnreachablePositionError(f"rolls left must be 0, 1 or 2, got {rolls_left}")
    if state.is_terminal:
        raise UnreachablePositionError("the scorecard is full: there is nothing left to decide")
    rules = table.rules
    args = (rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus)
    s = np.array([[state.mask12(), state.ystate, state.upper]], dtype=np.int64)
    r = roll_index(arr)
    box = _kernels.box_values(table.values, *args, s, np.array([r], dtype=np.int64))[0]
    actions: list[tuple[str, str, float, int | None, int | None, int | None]] = []
    for b in range(13):
        if np.isfinite(box[b]):
            actions.append(("box", f"score {BOX_LABELS[b]}", float(box[b]), None, b, None))
    if rolls_left > 0:
        e1, e2 = _kernels.turn_solutions(table.values, *args, s)
        E = (e1 if rolls_left == 2 else e2)[0]
        seen = set()
        for h in range(32):
            k = hold_to_keep(arr, h)
            if k in seen:
                continue
            seen.add(k)
            faces = keep_faces(k)
            if k == r + int(KEEP_OFFSET[5]):
                label = "keep all (reroll nothing)"
            elif not faces:
                label = "reroll all"
            else:
                label = "keep " + " ".join(map(str, faces))
            actions.append(("keep", label, float(E[k]), h, None, k))
    best = max(a[2] for a in actions)
    out = [Advice(kind=a[0], label=a[1], expected_final=score_so_far + a[2], loss=best - a[2],
                  hold_mask=a[3], box=a[4], keep=a[5]) for a in actions]
    out.sort(key=lambda a: (-a.expected_final, a.kind != "box"))
    return out


__all__ = ["Advice", "advise", "InvalidDiceError"]
