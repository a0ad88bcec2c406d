"""Yamb's scoring, the reference every engine and oracle is checked against: a row's points for
a roll, a column's parts (upper sum and bonus, middle term, combinations) and a card's total,
the rows a column takes next, the legal boxes of a position, and the table of every roll's
points (:func:`score_table`)."""

from __future__ import annotations

from functools import lru_cache

from yamblab.errors import ConfigError, IllegalActionError, UnknownVariantError
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, UPPER_ROWS, YambRules


def _dice_list(dice, n_dice: int) -> list[int]:
    from yamblab.games.dice import validate_dice

    return [int(x) for x in validate_dice(dice, n_dice)]


def row_score(rules: YambRules, row: str | int, dice, roll: int = 1) -> int:
    """Points for scoring ``dice`` in ``row`` on roll number ``roll`` (1-based).

    Args:
        rules: the rule set.
        row: a row name or index.
        dice: ``rules.n_dice`` faces 1..6 (any order).
        roll: which roll of the turn made the dice (matters only for straights by roll).

    Returns:
        points (int ≥ 0); only the dice that make the combination count, and with 6 dice the
        best 5 (module docstring).

    Raises:
        InvalidDiceError: wrong number of dice or a bad face.
        IllegalActionError: a row not on the card.
    """
    d = _dice_list(dice, rules.n_dice)
    name = rules.rows[rules.row_index(row)]
    if int(roll) < 1:
        raise IllegalActionError(f"roll number {roll} must be 1 or more")
    return _score(rules, name, tuple(sorted(d)), int(roll))


def _score(rules: YambRules, name: str, d: tuple, roll: int) -> int:
    cnt = [0] * 7
    for f in d:
        cnt[f] += 1
    if name in UPPER_ROWS:
        f = UPPER_ROWS.index(name) + 1
        return f * min(cnt[f], 5)
    if name == "max":
        return sum(d[-5:])
    if name == "min":
        return sum(d[:5])
    if name == "straight":
        large = all(cnt[f] for f in range(2, 7))
        small = all(cnt[f] for f in range(1, 6))
        if not (large or small):
            return 0
        if rules.straight_scoring == "by_roll":
            vals = rules.straight_by_roll
            return vals[min(roll, len(vals)) - 1]
        return max(rules.large_straight if large else 0, rules.small_straight if small else 0)
    if name == "trips":
        faces = [f for f in range(1, 7) if cnt[f] >= 3]
        return 3 * max(faces) + rules.trips_bonus if faces else 0
    if name == "poker":
        faces = [f for f in range(1, 7) if cnt[f] >= 4]
        return 4 * max(faces) + rules.poker_bonus if faces else 0
    if name == "yamb":
        faces = [f for f in range(1, 7) if cnt[f] >= 5]
        return 5 * max(faces) + rules.yamb_bonus if faces else 0
    if name == "two_pairs":
        best = 0
        for a in range(1, 7):
            for b in range(a + 1, 7):
                if cnt[a] >= 2 and cnt[b] >= 2:
                    best = max(best, 2 * a + 2 * b + rules.two_pairs_bonus)
        return best
    if name == "full":
        best = 0
        for a in range(1, 7):
            if cnt[a] < 3:
                continue
            for b in range(1, 7):
                if b != a and cnt[b] >= 2:
                    best = max(best, 3 * a + 2 * b + rules.full_bonus)
            if rules.yamb_is_full and cnt[a] >= 5:
                best = max(best, 5 * a + rules.full_bonus)
        return best
    raise IllegalActionError(f"row {name!r} has no scoring rule")  # pragma: no cover


def column_parts(rules: YambRules, scores) -> dict:
    """The parts of one column's total.

    Args:
        scores: the column's box scores in row order (``None`` or a negative number = open).

    Returns:
        dict of points: ``upper`` (Ones … Sixes), ``bonus`` (upper bonus), ``middle``
        (Ones × (Max − Min), 0 until all three are filled; clamped at 0 when
        ``middle_clamp``), ``lower`` (combination rows), ``total`` (upper + bonus + middle +
        lower; Max and Min count only through the middle term).

    Raises:
        ConfigError: ``scores`` of the wrong length.
    """
    s = [None if (x is None or int(x) < 0) else int(x) for x in scores]
    if len(s) != rules.n_rows:
        raise ConfigError(f"a column has {rules.n_rows} rows, got {len(s)} scores")
    upper = sum(x for x in s[:6] if x is not None)
    bonus = rules.upper_bonus if upper >= rules.upper_bonus_threshold else 0
    middle = 0
    if None not in (s[ONES_ROW], s[MAX_ROW], s[MIN_ROW]):
        middle = s[ONES_ROW] * (s[MAX_ROW] - s[MIN_ROW])
        if rules.middle_clamp:
            middle = max(0, middle)
    lower = sum(x for x in s[8:] if x is not None)
    return {"upper": upper, "bonus": bonus, "middle": middle, "lower": lower,
            "total": upper + bonus + middle + lower}


def open_boxes(cards):
    """int64 (m,): the open boxes (scores below 0) of each card of ``cards`` (m, C, R)."""
    import numpy as np

    cards = np.asarray(cards)
    return (cards < 0).reshape(cards.shape[0], -1).sum(axis=1)


def card_total(rules: YambRules, card) -> int:
    """Total points of a card (columns × rows of scores, open boxes negative or ``None``)."""
    if len(card) != rules.n_columns:
        raise ConfigError(f"a card has {rules.n_columns} columns, got {len(card)}")
    return sum(column_parts(rules, col)["total"] for col in card)


def column_next_rows(kind: str, open_rows) -> list[int]:
    """The rows a column of ``kind`` may take next, by its fill order alone.

    Args:
        kind: a column kind; ``announce`` and ``hand`` are free by order (their extra
            conditions are on the turn, see :func:`legal_boxes`).
        open_rows: a sequence of bools, one per row (True = open).

    Returns:
        sorted row indices.
    """
    rows = [i for i, o in enumerate(open_rows) if o]
    if not rows:
        return []
    if kind == "down":
        return [rows[0]]
    if kind == "up":
        return [rows[-1]]
    if kind in ("free", "announce", "hand"):
        return rows
    upper = [i for i in rows if i <= MAX_ROW]
    lower = [i for i in rows if i >= MIN_ROW]
    if kind == "from_middle":
        out = ([upper[-1]] if upper else []) + ([lower[0]] if lower else [])
    elif kind == "to_middle":
        out = ([upper[0]] if upper else []) + ([lower[-1]] if lower else [])
    else:
        raise UnknownVariantError(f"unknown column kind {kind!r}")
    return sorted(out)


def legal_boxes(rules: YambRules, card, roll: int, announced: int | None,
                pure: bool | None = None) -> list[tuple[int, int]]:
    """Boxes ``(column, row)`` where the dice may be scored now (reference for the engine).

    Args:
        card: columns × rows of scores (open = negative or ``None``).
        roll: the roll number of the turn (1-based).
        announced: the announced row of the announce column, or ``None``.
        pure: whether the current roll threw all the dice at once (the first roll, or a
            reroll of every die); ``None`` means ``roll == 1``. It matters only with
            ``rules.announce_free_on_pure_roll``: the open boxes of the announce column are
            then legal without an announcement, provided announcing is not compulsory, i.e.
            some box outside the announce and hand columns is open (JambNeuralNetwork's
            ``jamb_jax.py``: ``get_valid_score_mask`` and the forced announcement of
            ``get_action_mask``).

    Returns:
        list of (column, row), column-major.

    Raises:
        ConfigError: a card of the wrong shape.
    """
    if len(card) != rules.n_columns or any(len(col) != rules.n_rows for col in card):
        raise ConfigError(f"a card has {rules.n_columns} columns of {rules.n_rows} rows")
    if pure is None:
        pure = int(roll) == 1
    pure_free = False
    if rules.announce_free_on_pure_roll and pure and announced is None:
        pure_free = any(x is None or int(x) < 0
                        for c, kind in enumerate(rules.columns) if kind not in ("announce", "hand")
                        for x in card[c])
    out = []
    for c, kind in enumerate(rules.columns):
        col = card[c]
        open_rows = [x is None or int(x) < 0 for x in col]
        if announced is not None:
            if kind == "announce" and open_rows[announced]:
                out.append((c, announced))
            continue
        if kind == "announce":
            if pure_free:
                out.extend((c, r) for r, o in enumerate(open_rows) if o)
            continue
        if kind == "hand" and roll != 1:
            continue
        out.extend((c, r) for r in column_next_rows(kind, open_rows))
    return out


@lru_cache(maxsize=32)
def score_table(rules: YambRules):
    """Points for every roll, row and roll number: int16 (n_rolls, n_rows, max_rolls).

    Rolls are in the order of :func:`yamblab.games.dice6.dice_tables` for ``rules.n_dice``.
    Built from :func:`row_score` (the reference), so the engine and the oracle agree with it.
    """
    import numpy as np

    from yamblab.games.dice6 import dice_tables

    t = dice_tables(rules.n_dice)
    out = np.zeros((t.n_rolls, rules.n_rows, rules.max_rolls), dtype=np.int16)
    for ri, hist in enumerate(t.rolls):
        d = tuple(f + 1 for f in range(6) for _ in range(int(hist[f])))
        for row, name in enumerate(rules.rows):
            for j in range(rules.max_rolls):
                out[ri, row, j] = _score(rules, name, d, j + 1)
    out.setflags(write=False)
    return out


__all__ = ["row_score", "column_parts", "card_total", "column_next_rows", "legal_boxes", "score_table"]
