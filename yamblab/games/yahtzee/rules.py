"""Solitaire Yahtzee: boxes, rule variants, scoring and boundary states (plain Python reference).

This module is the readable statement of the rules. The batched engine
(:mod:`yamblab.games.yahtzee.engine`) and the oracle kernels implement the same rules in Cython
and are tested against the functions here.

Rules (Hasbro): 13 boxes, Ones … Sixes score the sum of that face; Three/Four of a Kind and
Chance score the sum of all dice; Full House 25, Small Straight 30, Large Straight 40,
Yahtzee 50. An upper section of 63 or more earns a 35-point bonus. A further Yahtzee after a
50 in the Yahtzee box earns a 100-point bonus. Joker variants for a further Yahtzee
(the Yahtzee box already filled, with 0 or 50):

``forced`` (official)
    The matching upper box if open; else any open lower box, with Full House and the
    straights at full value; else any open upper box (scoring 0).
``free`` (Verhoeff)
    Any open box; Full House and the straights score full value when the matching upper box
    is filled.
``priority`` (the reading of the "How The AI Works" page)
    The matching upper box if open; else Three or Four of a Kind; else Chance or Full House /
    straights at joker value; else an upper box at 0.
``none``
    Any open box, scored normally (five of a kind is not a Full House or a straight).

Sources: the "How The AI Works" page (priority joker, boundary state), "The Best Values Aren't
the Averages" and published solvers (reference values),
T. Verhoeff, "Optimal Solitaire Yahtzee Player" (free joker).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from yamblab.errors import IllegalActionError, UnknownVariantError, UnreachablePositionError

BOX_NAMES = (
    "ones", "twos", "threes", "fours", "fives", "sixes",
    "three_of_a_kind", "four_of_a_kind", "full_house",
    "small_straight", "large_straight", "yahtzee", "chance",
)
BOX_LABELS = (
    "Ones", "Twos", "Threes", "Fours", "Fives", "Sixes",
    "Three of a Kind", "Four of a Kind", "Full House",
    "Small Straight", "Large Straight", "Yahtzee", "Chance",
)
N_BOXES = 13
ONES, TWOS, THREES, FOURS, FIVES, SIXES = range(6)
THREE_KIND, FOUR_KIND, FULL_HOUSE, SMALL_STRAIGHT, LARGE_STRAIGHT, YAHTZEE, CHANCE = range(6, 13)
LOWER_BOXES = (THREE_KIND, FOUR_KIND, FULL_HOUSE, SMALL_STRAIGHT, LARGE_STRAIGHT, YAHTZEE, CHANCE)

UPPER_BONUS_THRESHOLD = 63
UPPER_BONUS = 35
YAHTZEE_SCORE = 50
YAHTZEE_BONUS = 100
FULL_HOUSE_SCORE = 25
SMALL_STRAIGHT_SCORE = 30
LARGE_STRAIGHT_SCORE = 40

#: Yahtzee-box states of a boundary state.
Y_OPEN, Y_ZERO, Y_FIFTY = 0, 1, 2

JokerRule = Literal["forced", "free", "priority", "none"]
JOKER_RULES: tuple[str, ...] = ("forced", "free", "priority", "none")

_BOX_ALIASES = {name: i for i, name in enumerate(BOX_NAMES)}
_BOX_ALIASES.update({
    "1s": 0, "2s": 1, "3s": 2, "4s": 3, "5s": 4, "6s": 5, "aces": 0,
    "3k": 6, "3kind": 6, "threekind": 6, "4k": 7, "4kind": 7, "fourkind": 7,
    "fh": 8, "fullhouse": 8, "ss": 9, "smallstraight": 9, "sm": 9,
    "ls": 10, "largestraight": 10, "lg": 10, "y": 11, "c": 12,
})


def box_index(name: str | int) -> int:
    """Box index 0..12 from a name (``"full_house"``, ``"fh"``, ``"Full House"``) or index.

    Raises:
        IllegalActionError: an unknown box name or index.
    """
    if isinstance(name, int) or (isinstance(name, str) and name.strip().isdigit()):
        i = int(name)
        if 0 <= i < N_BOXES:
            return i
        raise IllegalActionError(f"box index {i} is not 0..12")
    key = str(name).strip().lower().replace(" ", "_").replace("-", "_")
    if key in _BOX_ALIASES:
        return _BOX_ALIASES[key]
    key2 = key.replace("_", "")
    if key2 in _BOX_ALIASES:
        return _BOX_ALIASES[key2]
    raise IllegalActionError(
        f"unknown box {name!r}; boxes are: {', '.join(BOX_NAMES)}"
    )


@dataclass(frozen=True)
class YahtzeeRules:
    """A Yahtzee rule variant: immutable and hashable, with a stable digest for caches.

    Attributes:
        joker: ``"forced"`` (official), ``"free"`` (Verhoeff), ``"priority"`` ("How The AI Works") or
            ``"none"``; see the module docstring.
        upper_bonus: whether 63+ in the upper section earns 35 points.
        yahtzee_bonus: whether a further Yahtzee after a 50 earns 100 points.

    Raises:
        UnknownVariantError: an unknown joker rule.
    """

    joker: str = "forced"
    upper_bonus: bool = True
    yahtzee_bonus: bool = True

    def __post_init__(self) -> None:
        if self.joker not in JOKER_RULES:
            raise UnknownVariantError(
                f"unknown joker rule {self.joker!r}; choose one of {', '.join(JOKER_RULES)}"
            )
        object.__setattr__(self, "upper_bonus", bool(self.upper_bonus))
        object.__setattr__(self, "yahtzee_bonus", bool(self.yahtzee_bonus))

    @property
    def joker_code(self) -> int:
        """The joker rule as the integer the Cython kernels take (0 forced … 3 none)."""
        return JOKER_RULES.index(self.joker)

    @property
    def key(self) -> str:
        """Canonical text of the variant, e.g. ``yahtzee/joker=forced/upper_bonus=1/yahtzee_bonus=1``."""
        return (f"yahtzee/joker={self.joker}/upper_bonus={int(self.upper_bonus)}"
                f"/yahtzee_bonus={int(self.yahtzee_bonus)}")

    @property
    def digest(self) -> str:
        """A stable 16-hex-digit hash of :attr:`key` (the same on every machine and run)."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        """Short text form accepted by :meth:`parse`, e.g. ``"free,no-yahtzee-bonus"``."""
        parts = [self.joker]
        if not self.upper_bonus:
            parts.append("no-upper-bonus")
        if not self.yahtzee_bonus:
            parts.append("no-yahtzee-bonus")
        return ",".join(parts)

    @classmethod
    def parse(cls, text: str) -> "YahtzeeRules":
        """Parse ``"forced"``, ``"free,no-yahtzee-bonus"``, ``"none,no-upper-bonus"`` …

        The first word is the joker rule (default forced); the flags ``no-upper-bonus`` and
        ``no-yahtzee-bonus`` switch the bonuses off.

        Raises:
            UnknownVariantError: an unknown word, two joker rules (``"forced,free"``), or a
                word given twice.
        """
        joker = "forced"
        joker_word = None
        upper = ybonus = True
        seen: set[str] = set()
        for word in [w.strip().lower() for w in str(text).replace("+", ",").split(",") if w.strip()]:
            flag = word.replace("_", "-")
            if flag in seen:
                raise UnknownVariantError(f"rules {text!r} name {word!r} twice")
            seen.add(flag)
            if word in JOKER_RULES or word in ("official", "hasbro", "verhoeff"):
                if joker_word is not None:
                    raise UnknownVariantError(
                        f"rules {text!r} name two joker rules ({joker_word!r} and {word!r}); choose one of "
                        f"{', '.join(JOKER_RULES)}")
                joker_word = word
                joker = {"official": "forced", "hasbro": "forced", "verhoeff": "free"}.get(word, word)
            elif flag == "no-upper-bonus":
                upper = False
            elif flag == "no-yahtzee-bonus":
                ybonus = False
            else:
                raise UnknownVariantError(
                    f"unknown rules word {word!r} in {text!r}; use a joker rule "
                    f"({', '.join(JOKER_RULES)}) and optionally no-upper-bonus, no-yahtzee-bonus"
                )
        return cls(joker=joker, upper_bonus=upper, yahtzee_bonus=ybonus)


OFFICIAL = YahtzeeRules()


def _check_hist(hist) -> tuple[int, ...]:
    h = tuple(int(c) for c in hist)
    if len(h) != 6 or any(c < 0 for c in h) or sum(h) != 5:
        raise UnreachablePositionError(f"roll histogram {h} is not five dice")
    return h


def base_score(hist, box: int) -> int:
    """Points for scoring roll ``hist`` (6 face counts) in ``box`` without any joker rule."""
    h = _check_hist(hist)
    total = sum((f + 1) * c for f, c in enumerate(h))
    if box < 6:
        return (box + 1) * h[box]
    mx = max(h)
    if box == THREE_KIND:
        return total if mx >= 3 else 0
    if box == FOUR_KIND:
        return total if mx >= 4 else 0
    if box == FULL_HOUSE:
        return FULL_HOUSE_SCORE if sorted(c for c in h if c) == [2, 3] else 0
    if box == SMALL_STRAIGHT:
        present = [c > 0 for c in h]
        runs = (present[0:4], present[1:5], present[2:6])
        return SMALL_STRAIGHT_SCORE if any(all(r) for r in runs) else 0
    if box == LARGE_STRAIGHT:
        present = [c > 0 for c in h]
        return LARGE_STRAIGHT_SCORE if all(present[0:5]) or all(present[1:6]) else 0
    if box == YAHTZEE:
        return YAHTZEE_SCORE if mx == 5 else 0
    if box == CHANCE:
        return total
    raise IllegalActionError(f"box index {box} is not 0..12")


@dataclass(frozen=True)
class BoundaryState:
    """The scorecard between turns, as far as it matters for the future ("How The AI Works").

    Attributes:
        filled: 13-bit mask, bit ``b`` set when box ``b`` (card order) is filled.
        upper: upper-section subtotal capped at 63.
        yahtzee_fifty: True when the Yahtzee box holds 50 (later Yahtzees earn the bonus).

    Raises:
        UnreachablePositionError: the flag is set with an open Yahtzee box, the mask is out
            of range, or no game can make this subtotal with these filled upper boxes.
    """

    filled: int = 0
    upper: int = 0
    yahtzee_fifty: bool = False

    def __post_init__(self) -> None:
        if not 0 <= int(self.filled) < (1 << N_BOXES):
            raise UnreachablePositionError(f"filled mask {self.filled} is not a 13-bit mask")
        if self.yahtzee_fifty and not (self.filled >> YAHTZEE) & 1:
            raise UnreachablePositionError(
                "the Yahtzee box is open, so it cannot hold a 50 (Yahtzee-bonus flag set)"
            )
        if not 0 <= int(self.upper) <= UPPER_BONUS_THRESHOLD:
            raise UnreachablePositionError(
                f"upper subtotal {self.upper} must be 0..63 (capped at 63)"
            )
        if int(self.upper) not in reachable_upper_totals(int(self.filled) & 0x3F):
            names = [BOX_LABELS[b] for b in range(6) if (self.filled >> b) & 1] or ["none"]
            raise UnreachablePositionError(
                f"upper subtotal {self.upper} cannot be made with the filled upper boxes "
                f"({', '.join(names)})"
            )

    @property
    def ystate(self) -> int:
        """Yahtzee-box state: 0 open, 1 filled with 0, 2 filled with 50."""
        if not (self.filled >> YAHTZEE) & 1:
            return Y_OPEN
        return Y_FIFTY if self.yahtzee_fifty else Y_ZERO

    @property
    def n_filled(self) -> int:
        return bin(self.filled).count("1")

    @property
    def is_terminal(self) -> bool:
        return self.filled == (1 << N_BOXES) - 1

    def is_open(self, box: int) -> bool:
        return not (self.filled >> box) & 1

    def mask12(self) -> int:
        """The 12-bit mask of the non-Yahtzee boxes used to index oracle tables (Chance is bit 11)."""
        return (self.filled & 0x7FF) | (((self.filled >> CHANCE) & 1) << 11)


def reachable_upper_totals(upper_mask: int) -> frozenset[int]:
    """Capped upper subtotals (0..63) reachable with the upper boxes in the 6-bit ``upper_mask``."""
    totals = {0}
    for f in range(6):
        if (upper_mask >> f) & 1:
            totals = {min(UPPER_BONUS_THRESHOLD, t + (f + 1) * n) for t in totals for n in range(6)}
    return frozenset(totals)


def _yahtzee_face(h: tuple[int, ...]) -> int:
    """Face index 0..5 of a five-of-a-kind roll, or -1."""
    for f, c in enumerate(h):
        if c == 5:
            return f
    return -1


def legal_boxes(state: BoundaryState, hist, rules: YahtzeeRules = OFFICIAL) -> list[int]:
    """The boxes the roll ``hist`` may be scored in, in card order, under the joker rule."""
    h = _check_hist(hist)
    open_ = [b for b in range(N_BOXES) if state.is_open(b)]
    face = _yahtzee_face(h)
    if face < 0 or state.ystate == Y_OPEN or rules.joker in ("free", "none"):
        return open_
    if rules.joker == "forced":
        if state.is_open(face):
            return [face]
        lower = [b for b in open_ if b >= 6]
        return lower if lower else open_
    # priority
    if state.is_open(face):
        return [face]
    for group in ((THREE_KIND, FOUR_KIND), (CHANCE, FULL_HOUSE, SMALL_STRAIGHT, LARGE_STRAIGHT)):
        g = [b for b in open_ if b in group]
        if g:
            return sorted(g)
    return open_


def joker_active(state: BoundaryState, hist, rules: YahtzeeRules = OFFICIAL) -> bool:
    """Whether Full House and the straights score full value for this roll (a joker Yahtzee)."""
    h = _check_hist(hist)
    face = _yahtzee_face(h)
    if face < 0 or state.ystate == Y_OPEN or rules.joker == "none":
        return False
    if rules.joker == "free":
        return not state.is_open(face)
    return True


def score_box(state: BoundaryState, hist, box: int, rules: YahtzeeRules = OFFICIAL):
    """Score roll ``hist`` in ``box``: the points earned now and the next boundary state.

    Returns:
        ``(points, next_state)``: points (int) include the box's score, the 35-point upper
        bonus when this box first reaches 63, and a 100-point Yahtzee bonus where due.

    Raises:
        IllegalActionError: the box is filled, or the joker rule forbids it for this roll.
    """
    h = _check_hist(hist)
    box = box_index(box)
    legal = legal_boxes(state, h, rules)
    if box not in legal:
        why = "is already filled" if not state.is_open(box) else "is not allowed by the joker rule"
        raise IllegalActionError(
            f"cannot score {BOX_LABELS[box]}: it {why}; legal boxes: "
            f"{', '.join(BOX_LABELS[b] for b in legal)}"
        )
    pts = base_score(h, box)
    if joker_active(state, h, rules):
        pts = {FULL_HOUSE: FULL_HOUSE_SCORE, SMALL_STRAIGHT: SMALL_STRAIGHT_SCORE,
               LARGE_STRAIGHT: LARGE_STRAIGHT_SCORE}.get(box, pts)
    bonus = 0
    if _yahtzee_face(h) >= 0 and state.ystate == Y_FIFTY and rules.yahtzee_bonus:
        bonus += YAHTZEE_BONUS
    upper = state.upper
    if box < 6:
        new_upper = min(UPPER_BONUS_THRESHOLD, upper + pts)
        if rules.upper_bonus and upper < UPPER_BONUS_THRESHOLD <= upper + pts:
            bonus += UPPER_BONUS
        upper = new_upper
    fifty = state.yahtzee_fifty or (box == YAHTZEE and pts == YAHTZEE_SCORE)
    nxt = BoundaryState(filled=state.filled | (1 << box), upper=upper, yahtzee_fifty=fifty)
    return pts + bonus, nxt


def parse_card(text: str) -> tuple[BoundaryState, int, dict[int, int]]:
    """Parse a scorecard such as ``"ones=3, full_house=25, yahtzee=50, bonus=1"``.

    Each entry is ``box=points``; ``yahtzee_bonuses=N`` gives the number of 100-point bonuses
    already earned. An empty string is a new game.

    Returns:
        ``(state, score_so_far, box_scores)``: the boundary state, the points already on the
        card (including any upper bonus and Yahtzee bonuses), and the scores by box index.

    Raises:
        UnreachablePositionError: a score that box cannot hold (Ones = 7, Full House = 20 …).
        IllegalActionError: an unknown box name.
    """
    scores: dict[int, int] = {}
    ybonuses = 0
    for item in [p.strip() for p in str(text).replace(";", ",").split(",") if p.strip()]:
        if "=" not in item:
            raise UnreachablePositionError(f"scorecard entry {item!r} must look like box=points")
        name, _, value = item.partition("=")
        try:
            v = int(value.strip())
        except ValueError:
            raise UnreachablePositionError(f"scorecard entry {item!r}: points must be a whole number") from None
        if name.strip().lower().replace("-", "_") in ("yahtzee_bonuses", "bonuses", "ybonus"):
            if v < 0:
                raise UnreachablePositionError(f"Yahtzee bonus count {v} is negative")
            ybonuses = v
            continue
        b = box_index(name)
        if b in scores:
            raise UnreachablePositionError(f"scorecard names {BOX_LABELS[b]} twice")
        if v not in possible_box_scores(b):
            raise UnreachablePositionError(
                f"{BOX_LABELS[b]} cannot hold {v} points (possible: "
                f"{sorted(possible_box_scores(b))})"
            )
        scores[b] = v
    filled = sum(1 << b for b in scores)
    raw_upper = sum(v for b, v in scores.items() if b < 6)
    fifty = scores.get(YAHTZEE) == YAHTZEE_SCORE
    if ybonuses and not fifty:
        raise UnreachablePositionError("Yahtzee bonuses need a 50 in the Yahtzee box")
    if ybonuses > max(0, len(scores) - 1):
        raise UnreachablePositionError(f"{ybonuses} Yahtzee bonuses cannot fit on this card")
    state = BoundaryState(filled=filled, upper=min(UPPER_BONUS_THRESHOLD, raw_upper),
                          yahtzee_fifty=fifty)
    so_far = sum(scores.values()) + YAHTZEE_BONUS * ybonuses
    if raw_upper >= UPPER_BONUS_THRESHOLD:
        so_far += UPPER_BONUS
    return state, so_far, scores


def possible_box_scores(box: int) -> frozenset[int]:
    """Every score a box can hold (including 0) under any joker rule."""
    if box < 6:
        return frozenset((box + 1) * n for n in range(6))
    if box in (THREE_KIND, FOUR_KIND, CHANCE):
        return frozenset([0, *range(5, 31)]) if box != CHANCE else frozenset(range(5, 31))
    return frozenset({0, {FULL_HOUSE: 25, SMALL_STRAIGHT: 30, LARGE_STRAIGHT: 40,
                          YAHTZEE: 50}[box]})
