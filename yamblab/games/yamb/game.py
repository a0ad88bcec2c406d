"""Yamb as a :class:`~yamblab.games.protocol.Game`: any preset, or some of its columns.

``YambGame.from_preset("croatian", ["free"])`` is the single free-column game: 13 turns, the
preset's dice, rolls, scoring and bonuses, one column filled in any order. A game of one
``down``, ``up`` or ``free`` column has an exact oracle (:mod:`yamblab.oracle.yamb.column`,
:mod:`yamblab.oracle.yamb.free`); a card of several columns has none.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from yamblab.errors import ConfigError
from yamblab.games.encoding import EncodedBatch, encode_yamb, write_yamb_card
from yamblab.games.yamb.engine import YambBatch, shared_action_to_yamb, yamb_action_to_shared
from yamblab.games.yamb.rules import COLUMN_KINDS, UPPER_ROWS, YambRules, get_preset

#: Single-column games that have an exact oracle.
ORACLE_COLUMNS = ("down", "up", "free")


class _Cards:
    """Duck-typed Yamb positions for :func:`encode_yamb` (any card, any dice)."""

    def __init__(self, rules: YambRules, card, dice, rolls_used, rolls_max, announced):
        self.rules = rules
        self.card = np.asarray(card, np.int16)
        self.n = self.card.shape[0]
        self.dice = np.asarray(dice, np.int8)
        self.rolls_used = np.asarray(rolls_used, np.int8)
        self.rolls_max = np.asarray(rolls_max, np.int8)
        self.announced = np.asarray(announced, np.int8)
        self.done = np.zeros(self.n, bool)
        self._A = rules.n_columns * rules.n_rows + (1 << rules.n_dice) + rules.n_rows

    def legal_actions(self):
        return np.zeros((self.n, self._A), np.bool_)


def encode_yamb_positions(rules: YambRules, card: np.ndarray, dice: np.ndarray, rolls_used: np.ndarray,
                          rolls_max: np.ndarray, announced: np.ndarray) -> EncodedBatch:
    """Encode arbitrary Yamb positions (search leaves; the legal mask is left empty).

    Args:
        card: int (m, C, R) box scores in points, −1 open.
        dice: int (m, n_dice) faces 1..6, or all 0 for a boundary position (no dice).
        rolls_used: int (m,) rolls taken this turn (0 at a boundary position).
        rolls_max: int (m,) rolls allowed this turn.
        announced: int (m,) announced row or −1.
    """
    return encode_yamb(_Cards(rules, card, dice, rolls_used, rolls_max, announced), rules)


def encode_yamb_boundary(rules: YambRules, card: np.ndarray) -> EncodedBatch:
    """Encode cards between turns: no dice, no roll taken, nothing announced.

    The rolls of the coming turn are ``rules.last_turn_rolls`` when one box is left, else
    ``rules.rolls``. Full cards are encoded too (their value is 0).
    """
    card = np.asarray(card, np.int16)
    m = card.shape[0]
    open_boxes = (card < 0).reshape(m, -1).sum(axis=1)
    rmax = np.where(open_boxes == 1, rules.last_turn_rolls, rules.rolls)
    return encode_yamb_positions(rules, card, np.zeros((m, rules.n_dice), np.int8), np.zeros(m),
                                 rmax, np.full(m, -1))


class BoundaryEncoder:
    """:func:`encode_yamb_boundary` into one buffer that is reused from call to call (search
    leaves: hundreds of thousands of cards a turn, valued at once and then dropped).

    Each call writes only what differs between boundary cards (the boxes, the column features,
    the rolls of the coming turn); the dice and the legal mask stay zero. The encoding it
    returns is a view of the buffer: it is overwritten by the next call, so value it before
    calling again and never keep it (training samples use :func:`encode_yamb_boundary`).

    Args:
        rules: the :class:`YambRules`.
    """

    def __init__(self, rules: YambRules):
        self.rules = rules
        self._buf: EncodedBatch | None = None
        # the state rows of the two kinds of boundary card (rules.rolls and, with one box
        # left, rules.last_turn_rolls), from the general encoder itself
        C, R = rules.n_columns, rules.n_rows
        many, one = np.full((C, R), -1, np.int16), np.zeros((C, R), np.int16)
        one[0, 0] = -1
        self._state = encode_yamb_boundary(rules, np.stack([many, one])).state.copy()

    def __call__(self, card: np.ndarray) -> EncodedBatch:
        card = np.asarray(card, np.int16)
        m = card.shape[0]
        if self._buf is None or len(self._buf) < m:
            self._buf = EncodedBatch.empty(max(m, 2 * len(self._buf) if self._buf is not None else m))
        view = EncodedBatch(**{f.name: getattr(self._buf, f.name)[:m] for f in fields(EncodedBatch)})
        write_yamb_card(view, card, self.rules)
        last = (card < 0).reshape(m, -1).sum(axis=1) == 1
        np.take(self._state, last.astype(np.int64), axis=0, out=view.state)
        return view


class YambGame:
    """Yamb under a rule set (see :mod:`yamblab.games.protocol`).

    Args:
        rules: the :class:`YambRules`.
        preset: the preset it came from (for labels).
    """

    name = "yamb"
    idle_action = -1

    def __init__(self, rules: YambRules, preset: str | None = None):
        self.rules = rules
        self.preset = preset or rules.name
        self.n_dice = rules.n_dice
        self.n_turns = rules.n_turns
        cols = ",".join(rules.columns)
        self.label = f"{self.preset}[{cols}]"
        self.digest = rules.digest

    @classmethod
    def from_preset(cls, preset: str = "croatian", columns=None) -> "YambGame":
        """A preset, or only some of its columns (in the given order).

        Raises:
            UnknownVariantError: an unknown preset or column kind.
            ConfigError: a column the preset's card does not have, an empty or repeated list.
        """
        base = get_preset(preset)
        if columns is None:
            return cls(base, base.name)
        cols = tuple(str(c).strip().lower() for c in columns)
        if not cols:
            raise ConfigError("columns: name at least one column (e.g. [free])")
        for c in cols:
            if c not in COLUMN_KINDS:
                from yamblab.errors import UnknownVariantError

                raise UnknownVariantError(f"unknown column kind {c!r}; kinds are {', '.join(COLUMN_KINDS)}")
            if c not in base.columns:
                raise ConfigError(f"column {c!r} is not on the {base.name} card "
                                  f"(its columns: {', '.join(base.columns)})")
        if len(set(cols)) != len(cols):
            raise ConfigError(f"columns {list(cols)} name a column twice")
        rules = base.replace(columns=cols, name=f"{base.name}[{','.join(cols)}]",
                             announce_compulsory="rest_full" if "announce" not in cols
                             else base.announce_compulsory)
        return cls(rules, base.name)

    def __repr__(self) -> str:
        return f"YambGame({self.label})"

    @property
    def oracle_column(self) -> str | None:
        """The column kind when this game is a single down, up or free column (it then has an
        exact oracle), else None."""
        cols = self.rules.columns
        return cols[0] if len(cols) == 1 and cols[0] in ORACLE_COLUMNS else None

    @property
    def solved(self) -> bool:
        """Whether the oracles solve this game: a single down, up or free column."""
        return self.oracle_column is not None

    def new_batch(self, n: int, seed: int, first_game: int = 0) -> YambBatch:
        return YambBatch(n, self.rules, seed=seed, first_game=first_game)

    def encode(self, batch) -> EncodedBatch:
        return encode_yamb(batch, self.rules)

    def encode_boundary(self, batch, games: np.ndarray) -> EncodedBatch:
        g = np.asarray(games, np.int64)
        return encode_yamb_boundary(self.rules, batch.card[g])

    def to_engine(self, shared: np.ndarray) -> np.ndarray:
        return shared_action_to_yamb(self.rules, shared)

    def to_shared(self, actions: np.ndarray) -> np.ndarray:
        return yamb_action_to_shared(self.rules, actions)

    def turn_start(self, batch) -> np.ndarray:
        return (np.asarray(batch.rolls_used) == 1) & (np.asarray(batch.announced) < 0) & ~np.asarray(batch.done)

    def rolls_left(self, batch) -> np.ndarray:
        return np.asarray(batch.rolls_max, np.int64) - np.asarray(batch.rolls_used, np.int64)

    def bonus_reached(self, batch) -> np.ndarray:
        card = np.asarray(batch.card, np.int64)
        up = np.where(card[:, :, :len(UPPER_ROWS)] >= 0, card[:, :, :len(UPPER_ROWS)], 0).sum(axis=2)
        if self.rules.upper_bonus <= 0:
            return np.zeros(card.shape[0], np.float32)
        return (up >= self.rules.upper_bonus_threshold).mean(axis=1).astype(np.float32)


def from_options(preset: str | None = None, columns=None) -> YambGame:
    """The game of a run config's Yamb options (:data:`yamblab.games.protocol.GAMES`; no preset,
    or an empty one: ``croatian``)."""
    return YambGame.from_preset(preset or "croatian", columns)


__all__ = ["YambGame", "from_options", "ORACLE_COLUMNS", "encode_yamb_positions", "encode_yamb_boundary", "BoundaryEncoder"]
