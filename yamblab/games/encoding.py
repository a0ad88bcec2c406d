"""One encoding for every game: the layout the network reads (the YoloYamb post,
"Tokenizer").

Every Yahtzee card and every Yamb preset maps into the same fixed-size layout, so one
network can play them all:

========================  =================  ==================================================
field                     shape, dtype       meaning
========================  =================  ==================================================
``columns``               (B, 8, 16, 2) f32  per column and row: [filled flag, score / 80]
``column_type``           (B, 8) int64       column kind (:data:`COLUMN_TYPES`), 0 = unused
``column_features``       (B, 8, 4) f32      bonus features: upper sum / 60, gap to the upper
                                             threshold / 60, the Max−Min term / 60 (Yamb; 0
                                             for Yahtzee), Ones count / 5
``dice``                  (B, 6) int64       faces 1..6 of the physical dice in slot order,
                                             0 = no die (Yahtzee uses 5 slots)
``state``                 (B, 32) f32        game-state vector (:data:`STATE_FIELDS`)
``legal``                 (B, 208) bool      legal-action mask over :data:`N_ACTIONS`
========================  =================  ==================================================

Action space (208): ``col * 16 + row`` for placements (0..127), ``128 + h`` for hold mask
``h`` over up to 6 dice (128..191; bit ``i`` holds die ``i``), ``192 + row`` to announce a row
(192..207). Yahtzee uses column 0 with its 13 boxes in card order as rows, and holds 128..159.

Yamb (:func:`encode_yamb`) uses columns 0..C-1 in card order with its rows in card order, holds
128..159 (5 dice) or 128..191 (6 dice), and announcements 192 + row. The joker slots 28..31 are
Yahtzee's; in a Yamb position (``game_is_yahtzee`` = 0) the same four slots carry Yamb's variant
flags instead (:data:`YAMB_STATE_FLAGS`): straights by roll, a Yamb counts as a full house, the
middle term is clamped at 0, the last turn has extra rolls; and Yahtzee's bonus slot 27 carries
whether the current roll may be written in the announce column unannounced (a pure roll under
``announce_free_on_pure_roll``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_COLS = 8
N_ROWS = 16
MAX_DICE = 6
SCORE_SCALE = 80.0
STATE_DIM = 32
N_PLACEMENTS = N_COLS * N_ROWS          # 128
HOLD_OFFSET = N_PLACEMENTS              # 128
N_HOLD_PATTERNS = 1 << MAX_DICE         # 64
ANNOUNCE_OFFSET = HOLD_OFFSET + N_HOLD_PATTERNS  # 192
N_ACTIONS = ANNOUNCE_OFFSET + N_ROWS    # 208

#: Column kinds; the index is the column-type id the network embeds.
COLUMN_TYPES = ("unused", "yahtzee", "down", "up", "free", "announce", "hand",
                "from_middle", "to_middle")

#: Slots of the 32-wide state vector.
STATE_FIELDS = {
    "rolls_left": slice(0, 6),        # one-hot 0..5 rolls left
    "roll_number": 6,                 # roll number / max rolls
    "announced": slice(7, 24),        # one-hot: 16 rows + "none" at index 23
    "game_is_yahtzee": 24,
    "n_dice_6": 25,                   # 1 when the game uses six dice
    "upper_bonus_on": 26,
    "yahtzee_bonus_on": 27,
    "joker_rule": slice(28, 32),      # one-hot forced/free/priority/none (Yahtzee)
}


@dataclass
class EncodedBatch:
    """A batch of positions in the shared layout (see the module docstring for shapes)."""

    columns: np.ndarray
    column_type: np.ndarray
    column_features: np.ndarray
    dice: np.ndarray
    state: np.ndarray
    legal: np.ndarray

    def __len__(self) -> int:
        return int(self.dice.shape[0])

    @classmethod
    def empty(cls, batch: int) -> "EncodedBatch":
        """All-zero batch of ``batch`` positions."""
        return cls(
            columns=np.zeros((batch, N_COLS, N_ROWS, 2), np.float32),
            column_type=np.zeros((batch, N_COLS), np.int64),
            column_features=np.zeros((batch, N_COLS, 4), np.float32),
            dice=np.zeros((batch, MAX_DICE), np.int64),
            state=np.zeros((batch, STATE_DIM), np.float32),
            legal=np.zeros((batch, N_ACTIONS), np.bool_),
        )


def yahtzee_action_to_shared(action: np.ndarray) -> np.ndarray:
    """Map Yahtzee engine actions (0..12 boxes, 13..44 holds) to the shared action space."""
    a = np.asarray(action, dtype=np.int64)
    return np.where(a < 13, a, HOLD_OFFSET + (a - 13))


def shared_action_to_yahtzee(action: np.ndarray) -> np.ndarray:
    """Inverse of :func:`yahtzee_action_to_shared`.

    Raises:
        ValueError: an action outside Yahtzee's part of the shared space.
    """
    a = np.asarray(action, dtype=np.int64)
    ok = (a >= 0) & (a < 13) | (a >= HOLD_OFFSET) & (a < HOLD_OFFSET + 32)
    if not np.all(ok):
        raise ValueError(f"actions {a[~ok][:5].tolist()} are not Yahtzee actions in the shared space")
    return np.where(a < 13, a, a - HOLD_OFFSET + 13)


def encode_yahtzee(batch, rules) -> EncodedBatch:
    """Encode a :class:`~yamblab.games.yahtzee.engine.YahtzeeBatch` in the shared layout.

    Args:
        batch: the engine (n games).
        rules: its :class:`~yamblab.games.yahtzee.rules.YahtzeeRules`.

    Returns:
        :class:`EncodedBatch` of n positions (finished games get an all-False legal mask).
    """
    n = batch.n
    enc = EncodedBatch.empty(n)
    scores = batch.box_scores.astype(np.float32)
    filled = scores >= 0
    enc.columns[:, 0, :13, 0] = filled
    enc.columns[:, 0, :13, 1] = np.where(filled, scores, 0.0) / SCORE_SCALE
    enc.column_type[:, 0] = COLUMN_TYPES.index("yahtzee")
    up = batch.upper_raw.astype(np.float32)
    enc.column_features[:, 0, 0] = up / 60.0
    enc.column_features[:, 0, 1] = np.maximum(0.0, 63.0 - up) / 60.0
    enc.column_features[:, 0, 3] = np.where(filled[:, 0], scores[:, 0], 0.0) / 5.0
    enc.dice[:, :5] = batch.dice
    rl = batch.rolls_left.astype(np.int64)
    enc.state[np.arange(n), rl] = 1.0
    enc.state[:, 6] = (2 - rl) / 2.0
    enc.state[:, 23] = 1.0
    enc.state[:, 24] = 1.0
    enc.state[:, 26] = float(rules.upper_bonus)
    enc.state[:, 27] = float(rules.yahtzee_bonus)
    enc.state[:, 28 + rules.joker_code] = 1.0
    legal = batch.legal_actions()
    enc.legal[:, :13] = legal[:, :13]
    enc.legal[:, HOLD_OFFSET:HOLD_OFFSET + 32] = legal[:, 13:]
    return enc


# ----------------------------------------------------------------------------- Yamb
#: In a Yamb position, state slots 27 (Yahtzee's bonus flag) and 28..31 (Yahtzee's joker
#: one-hot) hold these flags. ``pure_roll_free``: 1 when the rules have
#: ``announce_free_on_pure_roll`` and the current roll threw every die (the first roll, or a
#: reroll of all the dice), so the announce column may be written without an announcement
#: (unless announcing is compulsory then; the legal mask shows that).
YAMB_STATE_FLAGS = {
    "pure_roll_free": 27,
    "straight_by_roll": 28,
    "yamb_is_full": 29,
    "middle_clamp": 30,
    "last_turn_extra_rolls": 31,
}


def encode_yamb(batch, rules=None) -> EncodedBatch:
    """Encode a :class:`~yamblab.games.yamb.engine.YambBatch` in the shared layout (the YoloYamb post).

    Column ``c`` of the card is column ``c`` of the layout, with its kind as the column type
    and its rows in card order (``score / 80`` with a filled flag). Column features: upper
    sum / 60, the gap to the upper threshold / 60, the middle term Ones × (Max − Min) / 60
    (0 until Ones, Max and Min are filled), the Ones box (the number of ones) / 5. State:
    rolls left (one-hot), roll number / rolls allowed this turn, the announced row (one-hot,
    slot 23 = none), ``n_dice_6``, ``upper_bonus_on``, and :data:`YAMB_STATE_FLAGS` (slot 27:
    a pure roll the announce column may take unannounced; read from ``batch.pure`` when the
    batch has it, else the first roll of a turn).

    Args:
        batch: the engine (n games).
        rules: its :class:`~yamblab.games.yamb.rules.YambRules` (default ``batch.rules``).

    Returns:
        :class:`EncodedBatch` of n positions (finished games get an all-False legal mask).
    """
    rules = batch.rules if rules is None else rules
    n = batch.n
    enc = EncodedBatch.empty(n)
    write_yamb_card(enc, batch.card, rules)
    enc.dice[:, :rules.n_dice] = batch.dice
    done = batch.done
    ru = batch.rolls_used.astype(np.int64)
    rm = batch.rolls_max.astype(np.int64)
    rl = np.where(done, 0, rm - ru)
    enc.state[np.arange(n), rl] = 1.0
    enc.state[:, 6] = np.where(done, 0.0, ru / np.maximum(rm, 1))
    ann = batch.announced.astype(np.int64)
    enc.state[np.arange(n), np.where(ann >= 0, 7 + ann, 23)] = 1.0
    enc.state[:, 25] = float(rules.n_dice == 6)
    enc.state[:, 26] = float(rules.upper_bonus > 0)
    enc.state[:, 28] = float(rules.straight_scoring == "by_roll")
    enc.state[:, 29] = float(rules.yamb_is_full)
    enc.state[:, 30] = float(rules.middle_clamp)
    enc.state[:, 31] = float(rules.last_turn_rolls > rules.rolls)
    if rules.announce_free_on_pure_roll and rules.announce_column >= 0:
        # Positions without a pure flag (e.g. search leaves) count only the first roll as pure.
        pure = getattr(batch, "pure", None)
        pure = (ru == 1) if pure is None else (np.asarray(pure) != 0)
        enc.state[:, 27] = np.where(done | (ann >= 0), 0.0, pure.astype(np.float32))
    legal = batch.legal_actions()
    if legal.any():                 # search leaves and boundary cards have no legal action
        enc.legal[:, yamb_shared_index(rules)] = legal
    return enc


def write_yamb_card(enc: EncodedBatch, card: np.ndarray, rules) -> None:
    """Write Yamb cards into the card part of ``enc`` (see :func:`encode_yamb`), in place.

    Args:
        enc: an all-zero encoding of ``len(card)`` positions, or one this function wrote for
            the same rules (only the card's own columns and rows are written, every time
            in full: column types, boxes and column features).
        card: int (m, C, R) box scores in points, -1 open.
    """
    from yamblab.games.yamb._engine import write_cards
    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW

    C = rules.n_columns
    # one compiled pass over the cards (search leaves: hundreds of thousands of cards per turn)
    write_cards(np.ascontiguousarray(card, np.int16), enc.columns, enc.column_features, ONES_ROW, MAX_ROW,
                MIN_ROW, int(rules.upper_bonus_threshold), bool(rules.middle_clamp), SCORE_SCALE)
    enc.column_type[:, :C] = [COLUMN_TYPES.index(k) for k in rules.columns]


def yamb_shared_index(rules) -> np.ndarray:
    """int64 (A,): the shared action of each engine action of a Yamb card (``A = C*R + 2**n + R``).

    Placements ``c*R + r`` → ``c*16 + r``; holds ``C*R + h`` → ``128 + h``; announcements
    ``C*R + 2**n + r`` → ``192 + r`` (:mod:`yamblab.games.yamb.engine`'s action space).
    """
    C, R, H = rules.n_columns, rules.n_rows, 1 << rules.n_dice
    c, r = np.divmod(np.arange(C * R), R)
    return np.concatenate([c * N_ROWS + r, HOLD_OFFSET + np.arange(H), ANNOUNCE_OFFSET + np.arange(R)]).astype(np.int64)


def decode_yamb_card(enc: EncodedBatch, rules) -> np.ndarray:
    """The Yamb card held in an :class:`EncodedBatch`: int16 (B, C, R), -1 for open boxes.

    Raises:
        ValueError: an encoding whose column types do not match ``rules``.
    """
    C, R = rules.n_columns, rules.n_rows
    want = [COLUMN_TYPES.index(k) for k in rules.columns]
    if enc.column_type.shape[0] and not np.all(enc.column_type[:, :C] == want):
        raise ValueError("the encoded column types do not match these Yamb rules")
    filled = enc.columns[:, :C, :R, 0] > 0.5
    score = np.rint(enc.columns[:, :C, :R, 1] * SCORE_SCALE).astype(np.int16)
    return np.where(filled, score, np.int16(-1)).astype(np.int16)
