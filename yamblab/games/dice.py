"""Dice tables shared by every game: the 252 rolls, the 462 keeps, and exact transition odds.

A **roll** is an unordered histogram of five dice; a **keep** is the multiset of dice held,
from zero to five dice. Both are indexed once, here, and every other module uses these
indices. Keeps are ordered by size, then lexicographically by their sorted faces, so that
the five-dice keeps (indices ``KEEP_OFFSET[5]`` … 461) are exactly the rolls in roll order.

The physical dice keep their positions (for the policy head's hold votes): a **hold mask**
is a 5-bit integer whose bit ``i`` says that die ``i`` is held.

Source: the histogram representation and the counts 252 / 462 follow the
"How The AI Works" page and timpalpant/yahtzee; ``P(roll | keep)`` is the multinomial probability
of the rerolled dice ("How The AI Works").
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from math import factorial

import numpy as np

from yamblab.errors import InvalidDiceError

N_DICE = 5
N_FACES = 6
N_ROLLS = 252
N_KEEPS = 462
N_HOLDS = 32

#: ``KEEP_OFFSET[n]`` is the index of the first keep holding ``n`` dice; ``KEEP_OFFSET[6]`` = 462.
KEEP_OFFSET = np.array([0, 1, 7, 28, 84, 210, 462], dtype=np.int64)


def _histograms(n_dice: int) -> list[tuple[int, ...]]:
    out = []
    for faces in itertools.combinations_with_replacement(range(1, N_FACES + 1), n_dice):
        h = [0] * N_FACES
        for f in faces:
            h[f - 1] += 1
        out.append(tuple(h))
    return out


def _build():
    keeps: list[tuple[int, ...]] = []
    for n in range(N_DICE + 1):
        keeps.extend(_histograms(n))
    keeps_arr = np.array(keeps, dtype=np.int8)
    index = {k: i for i, k in enumerate(keeps)}
    rolls_arr = keeps_arr[KEEP_OFFSET[5]:].copy()

    add = np.full((N_KEEPS, N_FACES), -1, dtype=np.int32)
    sub = np.full((N_KEEPS, N_FACES), -1, dtype=np.int32)
    for i, k in enumerate(keeps):
        for f in range(N_FACES):
            if sum(k) < N_DICE:
                kk = list(k)
                kk[f] += 1
                add[i, f] = index[tuple(kk)]
            if k[f] > 0:
                kk = list(k)
                kk[f] -= 1
                sub[i, f] = index[tuple(kk)]

    # P(roll | keep): the rerolled dice form the difference histogram d = roll - keep, with
    # probability multinomial(d) / 6^|d|.
    p = np.zeros((N_KEEPS, N_ROLLS), dtype=np.float64)
    for i, k in enumerate(keeps):
        for r, roll in enumerate(rolls_arr):
            d = roll.astype(np.int64) - np.array(k)
            if (d < 0).any():
                continue
            m = int(d.sum())
            ways = factorial(m)
            for x in d:
                ways //= factorial(int(x))
            p[i, r] = ways / N_FACES**m

    # Distinct sub-keeps of every roll, ascending by keep index.
    sub_keeps = np.full((N_ROLLS, N_HOLDS), -1, dtype=np.int32)
    n_sub = np.zeros(N_ROLLS, dtype=np.int32)
    for r, roll in enumerate(rolls_arr):
        subs = sorted(
            index[tuple(c)]
            for c in itertools.product(*[range(int(x) + 1) for x in roll])
        )
        n_sub[r] = len(subs)
        sub_keeps[r, : len(subs)] = subs
    return keeps_arr, rolls_arr, index, add, sub, p, sub_keeps, n_sub


(KEEPS, ROLLS, _KEEP_INDEX, KEEP_ADD, KEEP_SUB, P_ROLL_GIVEN_KEEP, SUB_KEEPS, N_SUB_KEEPS) = _build()
for _a in (KEEPS, ROLLS, KEEP_ADD, KEEP_SUB, P_ROLL_GIVEN_KEEP, SUB_KEEPS, N_SUB_KEEPS):
    _a.setflags(write=False)

#: ``P_ROLL[r]``: probability of roll ``r`` when all five dice are thrown, float64 (252,).
P_ROLL = P_ROLL_GIVEN_KEEP[0]


def validate_dice(dice, n_dice: int = N_DICE) -> np.ndarray:
    """Check ordered dice and return them as an int8 array.

    Args:
        dice: a sequence of ``n_dice`` faces, each an integer 1..6 (a string such as
            ``"1,1,3,4,6"`` or ``"11346"`` is accepted too).
        n_dice: how many dice the game uses (5 for Yahtzee; 5 or 6 for Yamb).

    Returns:
        int8 array of shape (n_dice,).

    Raises:
        InvalidDiceError: a face that is not an integer 1..6, or the wrong number of dice.
    """
    if isinstance(dice, str):
        text = dice.replace(",", " ").split()
        if len(text) == 1 and len(text[0]) > 1:
            text = list(text[0])
        try:
            dice = [int(t) for t in text]
        except ValueError:
            raise InvalidDiceError(f"dice {dice!r}: every die must be a number 1..6") from None
    try:
        arr = np.asarray(dice)
    except Exception:  # pragma: no cover - defensive
        raise InvalidDiceError(f"dice {dice!r} are not a list of faces") from None
    if arr.ndim != 1 or arr.shape[0] != n_dice:
        raise InvalidDiceError(f"dice {np.ravel(arr).tolist()}: expected exactly {n_dice} dice")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise InvalidDiceError(f"dice {arr.tolist()}: faces must be whole numbers 1..6")
    bad = [int(x) for x in arr if not 1 <= x <= N_FACES]
    if bad:
        raise InvalidDiceError(f"dice {arr.tolist()}: face {bad[0]} is not between 1 and 6")
    return arr.astype(np.int8)


def histogram(dice) -> tuple[int, ...]:
    """Histogram of ordered dice: a tuple of 6 counts (of ones … sixes).

    Raises:
        InvalidDiceError: a face outside 1..6.
    """
    arr = np.asarray(dice, dtype=np.int64)
    if arr.size and (arr.min() < 1 or arr.max() > N_FACES):
        raise InvalidDiceError(f"dice {arr.tolist()}: every face must be between 1 and 6")
    return tuple(int(c) for c in np.bincount(arr, minlength=N_FACES + 1)[1:])


def keep_index(hist) -> int:
    """Index (0..461) of a keep given as a histogram of 6 counts summing to at most 5.

    Raises:
        InvalidDiceError: negative counts or more than five dice.
    """
    key = tuple(int(c) for c in hist)
    try:
        return _KEEP_INDEX[key]
    except KeyError:
        raise InvalidDiceError(f"keep histogram {key} is not 0..5 dice of faces 1..6") from None


def roll_index(dice) -> int:
    """Index (0..251) of the roll made by five ordered dice.

    Raises:
        InvalidDiceError: not five dice of faces 1..6.
    """
    arr = validate_dice(dice)
    return keep_index(histogram(arr)) - int(KEEP_OFFSET[5])


def hold_to_keep(dice, hold_mask: int) -> int:
    """Keep index of the dice held by ``hold_mask`` (bit ``i`` holds die ``i``) in ``dice``.

    Raises:
        InvalidDiceError: bad dice, or a hold mask outside 0..31.
    """
    arr = validate_dice(dice)
    if not 0 <= int(hold_mask) < N_HOLDS:
        raise InvalidDiceError(f"hold mask {hold_mask} must be between 0 and 31")
    held = [int(arr[i]) for i in range(N_DICE) if (int(hold_mask) >> i) & 1]
    return keep_index(histogram(held))


def keep_to_hold(dice, keep: int) -> int:
    """A hold mask over ``dice`` that holds exactly the multiset ``keep`` (lowest positions first).

    Raises:
        InvalidDiceError: the keep is not a sub-multiset of the dice.
    """
    arr = validate_dice(dice)
    need = list(int(c) for c in KEEPS[int(keep)])
    mask = 0
    for i, f in enumerate(arr):
        if need[f - 1] > 0:
            need[f - 1] -= 1
            mask |= 1 << i
    if any(need):
        raise InvalidDiceError(f"keep {keep_faces(keep)} is not part of the dice {arr.tolist()}")
    return mask


def keep_faces(keep: int) -> list[int]:
    """The sorted faces of keep ``keep`` (0..461), e.g. ``[5, 5]``."""
    return [f + 1 for f in range(N_FACES) for _ in range(int(KEEPS[int(keep)][f]))]


def roll_faces(roll: int) -> list[int]:
    """The sorted faces of roll ``roll`` (0..251)."""
    return keep_faces(int(roll) + int(KEEP_OFFSET[5]))


@lru_cache(maxsize=1)
def hold_keep_table() -> np.ndarray:
    """For every roll and hold mask, the keep it makes, given the roll's dice sorted ascending.

    Returns:
        int32 array (252, 32).
    """
    out = np.zeros((N_ROLLS, N_HOLDS), dtype=np.int32)
    for r in range(N_ROLLS):
        faces = roll_faces(r)
        for h in range(N_HOLDS):
            out[r, h] = hold_to_keep(faces, h)
    out.setflags(write=False)
    return out
