"""Yamb: rules as configuration, presets with their sources, and row scoring (plain Python).

Yamb (the YoloYamb post) is played on a card of several **columns**, each with the same **rows** and its
own fill order. Every turn the player rolls up to ``rolls`` times (keeping any dice between
rolls) and then scores exactly one box. Real rule sets disagree on many details, so every such
choice is a field of :class:`YambRules`; the presets below name their sources.

Rows (in card order): Ones … Sixes, Max, Min, then a chosen set of combination rows.

=============  ==============================================================================
row            points (only the dice that make the combination count; with 6 dice the best
               5 dice count everywhere)
=============  ==============================================================================
Ones … Sixes   the face times the number of dice showing it (at most 5)
Max, Min       the sum of the 5 highest (lowest) dice
Straight       fixed: small 1-2-3-4-5 / large 2-3-4-5-6 (``small_straight``/``large_straight``);
               or by the roll that made it (``straight_by_roll``, e.g. 66/56/46 on roll 1/2/3)
Trips          3 × face + ``trips_bonus`` (three of a kind; only three dice count)
Two pairs      2 × a + 2 × b + ``two_pairs_bonus`` (a ≠ b)
Full           the five dice of a full house (3 × a + 2 × b, a ≠ b) + ``full_bonus``; five of a
               kind counts as a full house only when ``yamb_is_full``
Poker          4 × face + ``poker_bonus`` (four of a kind; only four dice count)
Yamb           5 × face + ``yamb_bonus`` (five of a kind)
=============  ==============================================================================

A combination not made scores 0. Where several choices of dice make a row, the best counts.

Per column: the upper sum (Ones … Sixes) earns ``upper_bonus`` when it reaches
``upper_bonus_threshold``; the **middle term** is Ones × (Max − Min), where Ones is the Ones box
(the number of ones), clamped at 0 when ``middle_clamp``; Max and Min count only through the
middle term. The lower sum is the sum of the combination rows. The card total is the sum of
the column totals.

Columns (:data:`COLUMN_KINDS`):

``down``          top to bottom (Ones first);  ``up``: bottom to top (the last row first)
``free``          any order
``announce``      a row is announced after the first roll (never after a later roll) and must
                  then be scored there, 0 if not made; it may be scored at any roll after that.
                  With ``announce_free_on_pure_roll`` any open box of the column may also be
                  written without an announcement after a **pure** roll: one where all the dice
                  were thrown at once (the first roll, or a reroll of every die), unless
                  announcing is compulsory then
``hand``          scored from the first roll only (no reroll that turn)
``from_middle``   Max upward (Max, Sixes, …, Ones) and Min downward (Min, then the first
                  combination row, …, the last row): two fronts
``to_middle``     Ones downward to Max and the last row upward to Min: two fronts

Announcing is compulsory (``announce_compulsory``): ``"rest_full"``, once no box outside the
announce and hand columns is open (otherwise a player who rerolled could not score anywhere);
``"always"``, on every turn while the announce column has an open box.

Sources: the YoloYamb post (the game, column kinds, the Max−Min bonus); each preset cites its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields

from yamblab.errors import ConfigError, IllegalActionError, InvalidDiceError, UnknownVariantError

UPPER_ROWS = ("ones", "twos", "threes", "fours", "fives", "sixes")
FIXED_ROWS = UPPER_ROWS + ("max", "min")
COMBO_ROWS = ("straight", "trips", "two_pairs", "full", "poker", "yamb")
ROW_LABELS = {
    "ones": "Ones", "twos": "Twos", "threes": "Threes", "fours": "Fours", "fives": "Fives",
    "sixes": "Sixes", "max": "Max", "min": "Min", "straight": "Straight", "trips": "Trips",
    "two_pairs": "Two pairs", "full": "Full", "poker": "Poker", "yamb": "Yamb",
}
COLUMN_KINDS = ("down", "up", "free", "announce", "hand", "from_middle", "to_middle")
ANNOUNCE_MODES = ("rest_full", "always")
STRAIGHT_MODES = ("fixed", "by_roll")
ONES_ROW, MAX_ROW, MIN_ROW = 0, 6, 7
MAX_COLUMNS, MAX_ROWS, MAX_ROLLS = 8, 16, 6

#: Rule fields added after the first release, with the default that leaves them out of the key.
_LATE_FIELDS = {"announce_free_on_pure_roll": False}

#: The default row set of the Croatian 13-row card.
CROATIAN_ROWS = FIXED_ROWS + ("straight", "trips", "full", "poker", "yamb")


@dataclass(frozen=True)
class YambRules:
    """A Yamb rule set: immutable, hashable, validated, with a stable :attr:`digest`.

    Attributes:
        name: a label (not part of :attr:`key`).
        n_dice: 5 or 6 (with 6 dice the best 5 count in every row).
        rolls: rolls per turn (the first roll included), 1..6.
        last_turn_rolls: rolls on the last turn of the game (≥ ``rolls``, at most 6).
        rows: the card's rows: Ones … Sixes, Max, Min, then distinct :data:`COMBO_ROWS`.
        columns: the column kinds, left to right (1..8 columns, at most one ``announce``).
        trips_bonus, two_pairs_bonus, full_bonus, poker_bonus, yamb_bonus: fixed bonuses
            (points) added to the dice that make the combination.
        straight_scoring: ``"fixed"`` (``small_straight`` for 1–5, ``large_straight`` for
            2–6) or ``"by_roll"`` (``straight_by_roll[j]`` when made on roll ``j + 1``; later
            rolls of a longer last turn get the last value).
        yamb_is_full: whether five of a kind also counts as a full house.
        upper_bonus_threshold, upper_bonus: the upper bonus (points) per column.
        middle_clamp: whether Ones × (Max − Min) is clamped at 0.
        announce_compulsory: ``"rest_full"`` or ``"always"`` (module docstring).
        announce_free_on_pure_roll: whether the announce column may also be written without an
            announcement after a pure roll (all dice thrown at once: the first roll, or a
            reroll of every die), while announcing is not compulsory (module docstring). Source:
            JambNeuralNetwork's ``jamb_jax.py`` / ``jamb_logic.py`` (the ``pure_hand`` flag).
            It has no effect on a card without an announce column; with
            ``announce_compulsory="always"`` it could never apply and is refused.

    Raises:
        ConfigError: a contradictory or out-of-range field (the message names it).
        UnknownVariantError: an unknown row, column kind or mode.
    """

    name: str = field(default="custom", compare=False)
    n_dice: int = 5
    rolls: int = 3
    last_turn_rolls: int = 3
    rows: tuple = CROATIAN_ROWS
    columns: tuple = ("down", "up", "free", "announce")
    trips_bonus: int = 10
    two_pairs_bonus: int = 10
    full_bonus: int = 30
    poker_bonus: int = 40
    yamb_bonus: int = 50
    straight_scoring: str = "fixed"
    small_straight: int = 35
    large_straight: int = 45
    straight_by_roll: tuple = (66, 56, 46)
    yamb_is_full: bool = False
    upper_bonus_threshold: int = 60
    upper_bonus: int = 30
    middle_clamp: bool = True
    announce_compulsory: str = "rest_full"
    announce_free_on_pure_roll: bool = False

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("rows", tuple(str(r).strip().lower() for r in self.rows))
        set_("columns", tuple(str(c).strip().lower() for c in self.columns))
        set_("straight_by_roll", tuple(int(v) for v in self.straight_by_roll))
        for k in ("n_dice", "rolls", "last_turn_rolls", "trips_bonus", "two_pairs_bonus",
                  "full_bonus", "poker_bonus", "yamb_bonus", "small_straight", "large_straight",
                  "upper_bonus_threshold", "upper_bonus"):
            v = getattr(self, k)
            if isinstance(v, bool) or int(v) != v:
                raise ConfigError(f"{k}={v!r} must be a whole number")
            set_(k, int(v))
            if k not in ("upper_bonus_threshold",) and int(v) < 0:
                raise ConfigError(f"{k}={v} must not be negative")
        set_("yamb_is_full", bool(self.yamb_is_full))
        set_("middle_clamp", bool(self.middle_clamp))
        v = self.announce_free_on_pure_roll
        if isinstance(v, str) or v not in (True, False):
            raise ConfigError(f"announce_free_on_pure_roll={v!r} must be true or false")
        set_("announce_free_on_pure_roll", bool(v))
        if self.n_dice not in (5, 6):
            raise ConfigError(f"n_dice={self.n_dice}: Yamb is played with 5 or 6 dice")
        if not 1 <= self.rolls <= MAX_ROLLS:
            raise ConfigError(f"rolls={self.rolls} must be 1..{MAX_ROLLS}")
        if not self.rolls <= self.last_turn_rolls <= MAX_ROLLS:
            raise ConfigError(f"last_turn_rolls={self.last_turn_rolls} must be between "
                              f"rolls={self.rolls} and {MAX_ROLLS}")
        # Rows.
        for r in self.rows:
            if r not in ROW_LABELS:
                raise UnknownVariantError(f"unknown row {r!r}; rows are {', '.join(ROW_LABELS)}")
        if self.rows[:len(FIXED_ROWS)] != FIXED_ROWS:
            raise ConfigError(f"rows must start with {', '.join(FIXED_ROWS)} in that order "
                              f"(got {', '.join(self.rows[:8])})")
        extra = self.rows[len(FIXED_ROWS):]
        if any(r in FIXED_ROWS for r in extra) or len(set(extra)) != len(extra):
            raise ConfigError(f"combination rows {extra} repeat a row")
        if not extra:
            raise ConfigError("a card needs at least one combination row after Max and Min "
                              "(the middle-outward columns fill Min downward into them)")
        if len(self.rows) > MAX_ROWS:
            raise ConfigError(f"{len(self.rows)} rows: the shared layout holds at most {MAX_ROWS}")
        # Columns.
        if not 1 <= len(self.columns) <= MAX_COLUMNS:
            raise ConfigError(f"{len(self.columns)} columns: a card has 1..{MAX_COLUMNS}")
        for c in self.columns:
            if c not in COLUMN_KINDS:
                raise UnknownVariantError(f"unknown column kind {c!r}; kinds are {', '.join(COLUMN_KINDS)}")
        if self.columns.count("announce") > 1:
            raise ConfigError("a second announce column could never be filled: one announcement "
                              "a turn names one row of one announce column")
        if self.announce_compulsory not in ANNOUNCE_MODES:
            raise UnknownVariantError(f"announce_compulsory={self.announce_compulsory!r}; "
                                      f"choose {' or '.join(ANNOUNCE_MODES)}")
        if self.announce_compulsory == "always" and "announce" not in self.columns:
            raise ConfigError("announce_compulsory='always' but the card has no announce column "
                              "to announce in")
        if self.announce_compulsory == "always" and self.announce_free_on_pure_roll:
            raise ConfigError("announce_free_on_pure_roll=true can never apply with "
                              "announce_compulsory='always' (every turn starts with an "
                              "announcement); use 'rest_full' or drop the rule")
        # Straights.
        if self.straight_scoring not in STRAIGHT_MODES:
            raise UnknownVariantError(f"straight_scoring={self.straight_scoring!r}; "
                                      f"choose {' or '.join(STRAIGHT_MODES)}")
        if self.straight_scoring == "by_roll" and "straight" in self.rows:
            if len(self.straight_by_roll) < 1 or any(v < 0 for v in self.straight_by_roll):
                raise ConfigError(f"straight_by_roll={self.straight_by_roll} needs one value "
                                  "≥ 0 per roll")
        # Upper bonus reachable?
        best_upper = 5 * sum(range(1, 7))
        if self.upper_bonus > 0 and not 0 <= self.upper_bonus_threshold <= best_upper:
            raise ConfigError(f"upper_bonus_threshold={self.upper_bonus_threshold} can never be "
                              f"reached: the best upper sum of a column is {best_upper}")

    # ----------------------------------------------------------------- derived facts
    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    @property
    def n_turns(self) -> int:
        """Turns in a game: one box per turn (columns × rows)."""
        return self.n_rows * self.n_columns

    @property
    def max_rolls(self) -> int:
        return max(self.rolls, self.last_turn_rolls)

    @property
    def announce_column(self) -> int:
        """Index of the announce column, or -1."""
        return self.columns.index("announce") if "announce" in self.columns else -1

    def row_index(self, row: str | int) -> int:
        """Row index from a name (``"full"``, ``"Two pairs"``) or an index.

        Raises:
            IllegalActionError: a row this card does not have.
        """
        if isinstance(row, int) or (isinstance(row, str) and row.strip().isdigit()):
            i = int(row)
            if 0 <= i < self.n_rows:
                return i
            raise IllegalActionError(f"row index {i} is not 0..{self.n_rows - 1}")
        key = str(row).strip().lower().replace(" ", "_").replace("-", "_")
        if key in self.rows:
            return self.rows.index(key)
        raise IllegalActionError(f"row {row!r} is not on this card; rows: {', '.join(self.rows)}")

    @property
    def key(self) -> str:
        """Canonical text of every rule field (``name`` excluded).

        A field added after the first release (:data:`_LATE_FIELDS`) is written only when it
        differs from its default, so the digests of the earlier rule sets stay what they were.
        """
        parts = []
        for f in fields(self):
            if f.name == "name":
                continue
            v = getattr(self, f.name)
            if f.name in _LATE_FIELDS and v == _LATE_FIELDS[f.name]:
                continue
            if isinstance(v, tuple):
                v = ",".join(str(x) for x in v)
            elif isinstance(v, bool):
                v = int(v)
            parts.append(f"{f.name}={v}")
        return "yamb/" + "/".join(parts)

    @property
    def digest(self) -> str:
        """A stable 16-hex-digit hash of :attr:`key` (the same on every machine and run)."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:16]

    def replace(self, **changes) -> "YambRules":
        """A copy with some fields changed (validated again)."""
        d = asdict(self)
        d.update(changes)
        return YambRules(**d)


# ---------------------------------------------------------------------------- presets
PRESETS: dict[str, YambRules] = {
    # Source: the Croatian rules as played online (e.g. tako.hr, "Kako se igra Jamb?"; geek.hr,
    # "Kako se igra jamb?"): 5 dice, 3 rolls, columns down, up, free, announce; rows 1–6, Max,
    # Min, Straight (Kenta), Trips (Triling), Full, Poker, Yamb; trips +10, straights 35 / 45,
    # full +30, poker +40, yamb +50; 30 bonus at an upper sum of 60 or more; a Yamb is not a
    # full house; Max and Min count only through Ones × (Max − Min), clamped at 0.
    "croatian": YambRules(name="croatian"),
    # Source: iklub.rs, "Pravila jamba", board "Standard": 5 or 6 dice (with 6 the best 5 count),
    # 3 rolls, "in the last round the dice may be thrown 5 times"; trips +20, straight 66 / 56 / 46
    # by the roll that made it, full +30, poker +40, yamb +50; A = 30 when 1+…+6 ≥ 60; the column
    # formula adds (Max − Min) × Ones with no clamp. Columns: its down, up, free and announce.
    "six_dice": YambRules(
        name="six_dice", n_dice=6, last_turn_rolls=5, trips_bonus=20, straight_scoring="by_roll",
        middle_clamp=False),
    # Source: sr.wikipedia.org, "Jamb (igra)" (card: 1–6, max, min, kenta 66/56/46, ful 30,
    # kare 40, jamb 50; 60 in the upper section earns 30) and iklub.rs, "Pravila jamba" for the
    # column kinds: hand ("ručna", only when all dice were thrown), from Max upward and Min
    # downward, from 1 downward and from Yamb upward (to the middle); the middle term as in
    # iklub.rs's formula (no clamp).
    "seven_column": YambRules(
        name="seven_column",
        rows=FIXED_ROWS + ("straight", "full", "poker", "yamb"),
        columns=("down", "up", "free", "announce", "hand", "from_middle", "to_middle"),
        straight_scoring="by_roll", middle_clamp=False),
    # Source: the rules of the JambNeuralNetwork PPO agent (github.com/filipivanovski42/
    # JambNeuralNetwork, files jamb_jax.py and jamb_logic.py; its jamb_crazyandfast_100k_report.md
    # reports a mean of 1722.09, SD 107.02, over 100,000 games): 6 dice (NUM_DICE); columns
    # down, free, up, announce (COL_DOWN … COL_ANNOUNCE) × 13 rows 1–6, Max, Min, Trips,
    # Straight, Full, Poker, Yamb (ROW_TRIPS = 8 comes before ROW_STRAIGHT = 9); number rows
    # count at most 5 dice (score_numbers); Max = total − lowest die, Min = total − highest
    # (score_max, score_min: the best 5 of 6); Trips 3v + 20; straight 1–5 = 45, 2–6 = 50 (the
    # large one when both); Full 3a + 2b + 40 (a ≠ b, so a Yamb is no Full); Poker 4v + 50;
    # Yamb 5v + 60; +30 when the upper sum is ≥ 60; middle term max(Max − Min, 0) × Ones
    # (calculate_total_score); 3 rolls, 5 when one box is left (commit_move); announce only
    # after the first roll (current_roll_count == 1); the announce column may be written
    # without announcing after a "pure" roll (pure_hand: the first roll, or a reroll keeping
    # no die); announcing is forced at the first roll once only announce boxes are open
    # (get_action_mask: force_announce, which also withholds the pure-roll write).
    "jamb_nn": YambRules(
        name="jamb_nn", n_dice=6, rolls=3, last_turn_rolls=5,
        rows=FIXED_ROWS + ("trips", "straight", "full", "poker", "yamb"),
        columns=("down", "free", "up", "announce"),
        trips_bonus=20, full_bonus=40, poker_bonus=50, yamb_bonus=60,
        straight_scoring="fixed", small_straight=45, large_straight=50, yamb_is_full=False,
        upper_bonus_threshold=60, upper_bonus=30, middle_clamp=True,
        announce_compulsory="rest_full", announce_free_on_pure_roll=True),
}
DEFAULT_PRESET = "croatian"


def get_preset(name: str) -> YambRules:
    """The preset called ``name`` (case-insensitive; ``-`` and ``_`` are the same).

    Raises:
        UnknownVariantError: an unknown preset, naming the known ones.
    """
    key = str(name).strip().lower().replace("-", "_")
    if key in ("default", ""):
        key = DEFAULT_PRESET
    if key not in PRESETS:
        raise UnknownVariantError(f"unknown Yamb preset {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[key]


# ---------------------------------------------------------------------------- scoring


__all__ = [
    "YambRules", "PRESETS", "DEFAULT_PRESET", "get_preset", "COLUMN_KINDS",
    "COMBO_ROWS", "FIXED_ROWS", "UPPER_ROWS", "ROW_LABELS", "InvalidDiceError",
]
