"""Advice: the exact expected final score of every legal keep and box in a position.

A position is a scorecard (boundary state and points already scored), the five dice in
their physical order, and the number of rolls left this turn (0, 1 or 2). The value of an
action is the optimal expected final score after taking it: points already on the card,
plus points scored this turn, plus the oracle's value of what is left ("How The AI Works";
the advice endpoint of timpalpant/yahtzee).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from yamblab.errors import IllegalActionError, InvalidDiceError, UnreachablePositionError
from yamblab.games.dice import KEEP_OFFSET, hold_to_keep, keep_faces, roll_index, validate_dice
from yamblab.games.yahtzee.rules import (BOX_LABELS, BOX_NAMES, UPPER_BONUS, UPPER_BONUS_THRESHOLD,
                                         YAHTZEE_BONUS, BoundaryState, YahtzeeRules, parse_card)
from yamblab.oracle.yahtzee import _kernels
from yamblab.oracle.yahtzee.table import OracleTable


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


_BONUS_KEYS = ("yahtzee_bonuses", "bonuses", "ybonus")


def card_position(card, rules: YahtzeeRules, yahtzee_bonuses: int | None = None
                  ) -> tuple[BoundaryState, int, dict[int, int], int]:
    """A scorecard checked against a rule variant: its boundary state and points so far.

    The card is written with box names, never bare indexes (``"5=20"`` would be ambiguous:
    Fives or Sixes?): a ``box=points`` text (``"ones=3,full_house=25,yahtzee=50"``, the form
    ``yamblab advise --card`` takes) or a mapping ``{box name: points}``. ``yahtzee_bonuses``
    (or a ``yahtzee_bonuses=N`` entry) is the number of 100-point bonuses earned.

    Unlike :func:`~yamblab.games.yahtzee.rules.parse_card`, which knows no variant, the points
    so far include the 35-point upper bonus only when ``rules`` pays it, and a card with
    Yahtzee bonuses is refused under a variant without them.

    Args:
        card: text or mapping (``None`` or empty: a new game).
        rules: the variant in play.
        yahtzee_bonuses: bonuses earned, if not given in ``card``.

    Returns:
        ``(state, score_so_far, box_scores, yahtzee_bonuses)``: the boundary state, the points
        on the card (int, bonuses included), scores by box index 0..12, the bonus count.

    Raises:
        IllegalActionError: an unknown box name, or a bare number where a box name belongs.
        UnreachablePositionError: a score a box cannot hold, a box named twice, bonuses the
            variant does not pay or the card cannot hold.
    """
    if card is None:
        items: list[tuple[str, object]] = []
    elif isinstance(card, str):
        items = []
        for part in [p.strip() for p in card.replace(";", ",").split(",") if p.strip()]:
            if "=" not in part:
                raise UnreachablePositionError(f"scorecard entry {part!r} must look like box=points")
            name, _, value = part.partition("=")
            items.append((name, value))
    elif isinstance(card, dict):
        items = list(card.items())
    else:
        raise UnreachablePositionError("a scorecard is a 'box=points,…' text or a {box: points} mapping")
    parts = []
    for name, value in items:
        key = str(name).strip()
        if key.lstrip("+-").isdigit():
            raise IllegalActionError(
                f"scorecard entry {key}={value}: name the box ({', '.join(BOX_NAMES)}), not a number")
        if key.lower().replace("-", "_") in _BONUS_KEYS:
            if yahtzee_bonuses is not None:
                raise UnreachablePositionError("the Yahtzee bonus count is given twice")
        parts.append(f"{key}={str(value).strip()}")
    if yahtzee_bonuses is not None:
        if int(yahtzee_bonuses) < 0:
            raise UnreachablePositionError(f"Yahtzee bonus count {yahtzee_bonuses} is negative")
        if yahtzee_bonuses:
            parts.append(f"yahtzee_bonuses={int(yahtzee_bonuses)}")
    state, _, scores = parse_card(",".join(parts))
    bonuses = 0
    for p in parts:
        k, _, v = p.partition("=")
        if k.strip().lower().replace("-", "_") in _BONUS_KEYS:
            bonuses = int(v)
    if bonuses and not rules.yahtzee_bonus:
        raise UnreachablePositionError(
            f"the card has {bonuses} Yahtzee bonus(es), but rules {rules.name} pay none")
    raw_upper = sum(v for b, v in scores.items() if b < 6)
    so_far = sum(scores.values()) + YAHTZEE_BONUS * bonuses
    if rules.upper_bonus and raw_upper >= UPPER_BONUS_THRESHOLD:
        so_far += UPPER_BONUS
    return state, so_far, scores, bonuses


__all__ = ["Advice", "advise", "card_position", "InvalidDiceError"]
