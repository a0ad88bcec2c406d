"""The batched Yamb engine: many games at once under any :class:`~yamblab.games.yamb.rules.YambRules`.

The hot loops are Cython (:mod:`yamblab.games.yamb._engine`); this wrapper builds the rule
tables (scores from the reference :func:`~yamblab.games.yamb.score_table`), validates actions
and explains illegal ones.

Action space of a rule set with ``C`` columns, ``R`` rows and ``n`` dice (``A = C*R + 2**n + R``):

===========================  =====================================================
``c * R + r``                score the dice in box (column ``c``, row ``r``)
``C*R + h``                  reroll the dice not held by hold mask ``h`` (bit ``i``
                             holds die ``i``; h = 0 .. 2**n - 1)
``C*R + 2**n + r``           announce row ``r`` of the announce column
===========================  =====================================================

:func:`yamb_action_to_shared` / :func:`shared_action_to_yamb` map these to the shared layout
of :mod:`yamblab.games.encoding`.

Dice are counter-based (as in the Yahtzee engine): the face on die slot ``d`` at roll ``j``
of turn ``t`` of game ``g`` is a fixed function of ``(seed, g, t, j, d)``; every agent that
plays game ``g`` of a seed sees the same dice wherever it rerolls the same slots.
"""

from __future__ import annotations

import numpy as np

from yamblab.errors import IllegalActionError
from yamblab.games.yamb._engine import YambCore
from yamblab.games.yamb._engine import placement_masks as _placement_masks
from yamblab.games.dice6 import dice_tables
from yamblab.games.yamb.rules import ANNOUNCE_MODES, COLUMN_KINDS, ROW_LABELS, YambRules, get_preset
from yamblab.games.yamb.scoring import score_table

__all__ = ["YambBatch", "new_yamb_batch", "play_random", "yamb_action_to_shared",
           "shared_action_to_yamb", "placement_masks"]


def _kind_codes(rules: YambRules) -> np.ndarray:
    """int8 (C,): each column's kind as the compiled core numbers it (order of COLUMN_KINDS)."""
    return np.array([COLUMN_KINDS.index(k) for k in rules.columns], dtype=np.int8)


def placement_masks(rules: YambRules, card: np.ndarray, first: bool, pure: bool) -> np.ndarray:
    """Boxes where the dice may be scored without an announcement, for many cards at once.

    The engine's own placement rule (compiled; the readable reference is
    ``rules.legal_boxes(rules, card, 1 if first else 2, None, pure)``).

    Args:
        card: int (B, C, R) cards, -1 open.
        first: the first roll of the turn (the hand column takes it only).
        pure: the roll threw every die (under ``rules.announce_free_on_pure_roll`` it may then
            also take the open boxes of the announce column).

    Returns:
        bool (B, C, R).

    Raises:
        ValueError: cards of another number of columns than ``rules``.
    """
    return _placement_masks(np.ascontiguousarray(card, dtype=np.int16), _kind_codes(rules),
                            rules.announce_column, bool(first), bool(pure),
                            bool(rules.announce_free_on_pure_roll))


class YambBatch:
    """``n`` Yamb games; see the module docstring for the action space.

    Args:
        n: number of games.
        rules: the rule set (or a preset name).
        seed: the dice seed (0 .. 2**64 - 1).
        first_game: the game number of game 0 (game ``i`` is game ``first_game + i``).

    Attributes (numpy arrays, live views into the engine): ``dice`` int8 (n, n_dice);
    ``rolls_used`` int8 (n,) (1 after the first roll); ``rolls_max`` int8 (n,) rolls allowed
    this turn; ``turn`` int16 (n,) (``rules.n_turns`` when done); ``card`` int16 (n, C, R)
    box scores in points, -1 while open; ``announced`` int8 (n,) announced row or -1;
    ``pure`` int8 (n,) 1 when the current roll threw every die (the first roll, or a reroll
    with hold mask 0: with ``rules.announce_free_on_pure_roll`` the announce column may then
    be written unannounced);
    ``col_total`` int32 (n, C) and ``total`` int32 (n,) points so far, bonuses included.

    Raises:
        ValueError: a negative ``n`` or a seed outside 0 .. 2**64 - 1.
        UnknownVariantError: an unknown preset name.
    """

    def __init__(self, n: int, rules: YambRules | str = "croatian", seed: int = 0, first_game: int = 0):
        if isinstance(rules, str):
            rules = get_preset(rules)
        if not 0 <= int(seed) < 2**64:
            raise ValueError(f"seed {seed} must be between 0 and 2**64-1")
        self.rules = rules
        t = dice_tables(rules.n_dice)
        kinds = _kind_codes(rules)
        self.core = YambCore(int(n), kinds, rules.n_rows, rules.n_dice, rules.rolls,
                             rules.last_turn_rolls, ANNOUNCE_MODES.index(rules.announce_compulsory),
                             rules.upper_bonus_threshold, rules.upper_bonus, rules.middle_clamp,
                             score_table(rules), t.code_to_roll, int(seed), int(first_game),
                             rules.announce_free_on_pure_roll)
        c = self.core
        self.n = c.n
        self.n_placements = c.P
        self.hold_offset = c.P
        self.n_holds = c.H
        self.announce_offset = c.P + c.H
        self.n_actions = c.A
        self.dice, self.rolls_used, self.rolls_max, self.turn = c.dice, c.rolls_used, c.rolls_max, c.turn
        self.card, self.announced, self.col_total, self.total = c.card, c.announced, c.col_total, c.total
        self.pure = c.pure

    @property
    def done(self) -> np.ndarray:
        """bool (n,): games whose card is full."""
        return self.core.done

    def legal_actions(self) -> np.ndarray:
        """Legal-action mask, bool (n, n_actions); all False for finished games."""
        return self.core.legal_actions()

    def roll_indices(self) -> np.ndarray:
        """int64 (n,): roll index of each game's dice (order of ``dice_tables(n_dice)``)."""
        return self.core.roll_indices()

    def hold_keeps(self) -> np.ndarray:
        """int32 (n, 2**n_dice): keep index (``dice_tables(n_dice)``) each hold mask makes."""
        codes = self.core.hold_keep_codes()
        return _code_to_keep(self.rules.n_dice)[codes]

    def step(self, actions) -> None:
        """Apply one action per game; -1 leaves a game as it is (finished games ignore theirs).

        Args:
            actions: int array (n,) of action indices (module docstring) or -1.

        Raises:
            IllegalActionError: an action that is not legal for its game, naming the game and
                the reason; nothing is applied to any game.
        """
        a = np.ascontiguousarray(actions, dtype=np.int64).reshape(-1)
        if a.shape[0] != self.n:
            raise IllegalActionError(f"expected {self.n} actions, got {a.shape[0]}")
        bad = self.core.first_illegal(a)
        if bad >= 0:
            raise IllegalActionError(self.explain(bad, int(a[bad])))
        self.core.apply(a)

    def action_name(self, action: int) -> str:
        """Readable text of an action, e.g. ``"score free/Full"``, ``"hold 0b00101"``."""
        r = self.rules
        a = int(action)
        if 0 <= a < self.n_placements:
            return f"score {r.columns[a // r.n_rows]}/{ROW_LABELS[r.rows[a % r.n_rows]]}"
        if self.hold_offset <= a < self.announce_offset:
            return f"hold mask {a - self.hold_offset}"
        if self.announce_offset <= a < self.n_actions:
            return f"announce {ROW_LABELS[r.rows[a - self.announce_offset]]}"
        return f"action {a}"

    def explain(self, i: int, a: int) -> str:
        """Why action ``a`` is illegal in game ``i`` (text naming the game and the rule)."""
        r = self.rules
        if not 0 <= a < self.n_actions:
            return (f"game {i}: action {a} is outside 0..{self.n_actions - 1} "
                    f"({self.n_placements} placements, {self.n_holds} holds, {r.n_rows} announcements)")
        where = (f"game {i} (turn {int(self.turn[i]) + 1}, roll {int(self.rolls_used[i])}, "
                 f"dice {self.dice[i].tolist()})")
        ann = int(self.announced[i])
        ru = int(self.rolls_used[i])
        legal = self.legal_actions()[i]
        if a >= self.announce_offset:
            row = a - self.announce_offset
            if r.announce_column < 0:
                why = "this card has no announce column"
            elif ann >= 0:
                why = f"{ROW_LABELS[r.rows[ann]]} is already announced"
            elif ru != 1:
                why = f"announcing is allowed only after the first roll, not after roll {ru}"
            else:
                why = f"{ROW_LABELS[r.rows[row]]} of the announce column is already filled"
            return f"{where}: cannot announce {ROW_LABELS[r.rows[row]]}: {why}"
        if a >= self.hold_offset:
            if ru >= int(self.rolls_max[i]):
                why = f"no rolls left (roll {ru} of {int(self.rolls_max[i])})"
            elif not legal[self.hold_offset]:
                why = "announcing is compulsory now (no other box could take a later roll)" \
                    if r.announce_compulsory == "rest_full" else "announcing is compulsory on every turn"
            else:  # pragma: no cover - every hold is legal together
                why = "not allowed"
            return f"{where}: cannot reroll: {why}"
        c, row = divmod(a, r.n_rows)
        kind = r.columns[c]
        box = f"{kind}/{ROW_LABELS[r.rows[row]]}"
        if int(self.card[i, c, row]) >= 0:
            why = "it is already filled"
        elif ann >= 0:
            why = f"{ROW_LABELS[r.rows[ann]]} was announced and must be scored in the announce column"
        elif kind == "announce":
            if not r.announce_free_on_pure_roll:
                why = "a box of the announce column needs an announcement after the first roll"
            elif not int(self.pure[i]):
                why = ("a box of the announce column needs an announcement after the first roll, "
                       "or a pure roll (every die thrown at once: the first roll, or a reroll "
                       "of all the dice); this roll kept some dice")
            else:
                why = ("announcing is compulsory now (no other box could take a later roll), so "
                       "the announce column takes no unannounced pure roll")
        elif kind == "hand":
            why = "the hand column takes only the first roll"
        elif kind in ("down", "up", "from_middle", "to_middle"):
            nxt = [ROW_LABELS[r.rows[k]] for k in range(r.n_rows) if legal[c * r.n_rows + k]]
            why = f"the {kind} column must be filled in order (next: {', '.join(nxt) or 'none now'})"
        else:
            why = "announcing is compulsory now"
        return f"{where}: cannot score {box}: {why}"


_CODE_TO_KEEP: dict[int, np.ndarray] = {}


def _code_to_keep(n_dice: int) -> np.ndarray:
    if n_dice not in _CODE_TO_KEEP:
        from yamblab.games.dice6 import hist_code

        t = dice_tables(n_dice)
        arr = np.full(7**6, -1, dtype=np.int32)
        for k, h in enumerate(t.keeps):
            arr[hist_code(h)] = k
        _CODE_TO_KEEP[n_dice] = arr
    return _CODE_TO_KEEP[n_dice]


def new_yamb_batch(n: int, rules: YambRules | str = "croatian", seed: int = 0, first_game: int = 0) -> YambBatch:
    """Start ``n`` new games (first dice already rolled); see :class:`YambBatch`."""
    return YambBatch(n, rules, seed, first_game)


def play_random(rules: YambRules | str, n: int, seed: int = 0, first_game: int = 0) -> YambBatch:
    """Play ``n`` games with uniformly random legal actions to the end; returns the batch."""
    b = YambBatch(n, rules, seed, first_game)
    step = 0
    while not b.done.all():
        b.core.apply(b.core.random_actions(seed + 0x5151, step))
        step += 1
    return b


def yamb_action_to_shared(rules: YambRules, action) -> np.ndarray:
    """Map engine actions to the shared action space (:mod:`yamblab.games.encoding`).

    Placements ``c*R + r`` → ``c*16 + r``; holds ``C*R + h`` → ``128 + h``; announcements
    ``C*R + 2**n + r`` → ``192 + r``. int64 array of the input's shape.

    Raises:
        IllegalActionError: an action outside the engine's action space.
    """
    from yamblab.games.encoding import ANNOUNCE_OFFSET, HOLD_OFFSET, N_ROWS

    a = np.asarray(action, dtype=np.int64)
    P = rules.n_columns * rules.n_rows
    H = 1 << rules.n_dice
    A = P + H + rules.n_rows
    if np.any((a < 0) | (a >= A)):
        bad = a[(a < 0) | (a >= A)].ravel()[:5].tolist()
        raise IllegalActionError(f"actions {bad} are outside this Yamb card's 0..{A - 1}")
    c, r = np.divmod(a, rules.n_rows)
    return np.where(a < P, c * N_ROWS + r,
                    np.where(a < P + H, HOLD_OFFSET + (a - P), ANNOUNCE_OFFSET + (a - P - H)))


def shared_action_to_yamb(rules: YambRules, action) -> np.ndarray:
    """Inverse of :func:`yamb_action_to_shared`.

    Raises:
        IllegalActionError: a shared action that names no action of this card (a column or
            row it lacks, a hold over dice it lacks).
    """
    from yamblab.games.encoding import ANNOUNCE_OFFSET, HOLD_OFFSET, N_ACTIONS, N_ROWS

    a = np.asarray(action, dtype=np.int64)
    P = rules.n_columns * rules.n_rows
    H = 1 << rules.n_dice
    c, r = np.divmod(a, N_ROWS)
    place = (a >= 0) & (a < HOLD_OFFSET)
    hold = (a >= HOLD_OFFSET) & (a < ANNOUNCE_OFFSET)
    ann = (a >= ANNOUNCE_OFFSET) & (a < N_ACTIONS)
    ok = (place & (c < rules.n_columns) & (r < rules.n_rows)) \
        | (hold & (a - HOLD_OFFSET < H)) \
        | (ann & (a - ANNOUNCE_OFFSET < rules.n_rows) & (rules.announce_column >= 0))
    if not np.all(ok):
        raise IllegalActionError(f"shared actions {a[~ok].ravel()[:5].tolist()} name no action "
                                 f"of this Yamb card ({rules.n_columns} columns × {rules.n_rows} "
                                 f"rows, {rules.n_dice} dice)")
    return np.where(place, c * rules.n_rows + r,
                    np.where(hold, P + (a - HOLD_OFFSET), P + H + (a - ANNOUNCE_OFFSET)))
