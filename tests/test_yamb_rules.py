"""Yamb row scoring, column sums, presets and bad configurations."""

import pytest

from yamblab.errors import ConfigError, IllegalActionError, InvalidDiceError, UnknownVariantError, YamblabError
from yamblab.games.yamb.rules import PRESETS, YambRules, get_preset
from yamblab.games.yamb.scoring import card_total, column_next_rows, column_parts, row_score, score_table

CRO = get_preset("croatian")
SIX = get_preset("six_dice")
SEVEN = get_preset("seven_column")


@pytest.mark.parametrize("dice,row,pts", [
    ([1, 1, 1, 2, 3], "ones", 3), ([2, 2, 5, 2, 6], "twos", 6), ([3, 1, 1, 1, 1], "threes", 3),
    ([4, 4, 4, 4, 4], "fours", 20), ([5, 1, 5, 2, 5], "fives", 15), ([1, 2, 3, 4, 5], "sixes", 0),
    ([6, 6, 1, 2, 3], "sixes", 12), ([6, 5, 4, 3, 2], "max", 20), ([6, 5, 4, 3, 2], "min", 20),
    ([1, 2, 3, 4, 5], "straight", 35), ([5, 4, 3, 2, 6], "straight", 45),
    ([1, 2, 3, 4, 4], "straight", 0), ([2, 3, 4, 5, 5], "straight", 0), ([1, 2, 3, 5, 6], "straight", 0),
    ([6, 6, 6, 6, 1], "trips", 28), ([2, 2, 2, 5, 5], "trips", 16), ([1, 2, 3, 4, 5], "trips", 0),
    ([3, 3, 3, 3, 3], "poker", 52), ([3, 3, 3, 3, 1], "poker", 52), ([3, 3, 3, 1, 1], "poker", 0),
    ([4, 4, 4, 4, 4], "yamb", 70), ([4, 4, 4, 4, 1], "yamb", 0), ([6, 6, 6, 6, 6], "yamb", 80),
    ([6, 6, 6, 5, 5], "full", 58), ([5, 5, 6, 6, 6], "full", 58), ([1, 1, 1, 2, 2], "full", 37),
    ([2, 2, 2, 2, 2], "full", 0), ([2, 2, 2, 2, 5], "full", 0),
])
def test_croatian_rows(dice, row, pts):
    assert row_score(CRO, row, dice) == pts


def test_yamb_as_full_is_configurable():
    assert row_score(CRO, "full", [2, 2, 2, 2, 2]) == 0
    assert row_score(CRO.replace(yamb_is_full=True), "full", [2, 2, 2, 2, 2]) == 40


@pytest.mark.parametrize("dice,row,pts", [
    ([6, 6, 6, 6, 6, 6], "sixes", 30),          # only 5 dice count
    ([1, 1, 1, 1, 1, 1], "ones", 5),
    ([1, 2, 3, 4, 5, 6], "max", 20), ([1, 2, 3, 4, 5, 6], "min", 15),
    ([6, 6, 6, 6, 6, 1], "max", 30), ([6, 6, 6, 6, 6, 1], "min", 25),
    ([5, 5, 5, 6, 6, 6], "trips", 38),           # 20 bonus, best three of a kind
    ([6, 6, 6, 6, 6, 6], "poker", 64), ([6, 6, 6, 6, 6, 6], "yamb", 80),
    ([4, 4, 4, 4, 4, 6], "yamb", 70),
    ([6, 6, 6, 5, 5, 1], "full", 58), ([1, 1, 1, 6, 6, 6], "full", 50),
    ([6, 6, 6, 6, 6, 6], "full", 0),             # a Yamb is not a full house here
])
def test_six_dice_best_five(dice, row, pts):
    assert row_score(SIX, row, dice) == pts


@pytest.mark.parametrize("dice,ok", [
    ([1, 2, 3, 4, 5, 5], True), ([2, 2, 3, 4, 5, 6], True), ([1, 2, 3, 4, 6, 6], False),
    ([1, 1, 2, 3, 4, 4], False), ([1, 3, 4, 5, 6, 6], False), ([1, 2, 3, 4, 5, 6], True),
])
def test_six_dice_straights_by_roll(dice, ok):
    assert [row_score(SIX, "straight", dice, j) for j in (1, 2, 3, 4, 5)] == \
        ([66, 56, 46, 46, 46] if ok else [0] * 5)


def test_fixed_straights_six_dice_take_the_large_one():
    r = CRO.replace(n_dice=6)
    assert row_score(r, "straight", [1, 2, 3, 4, 5, 6]) == 45
    assert row_score(r, "straight", [1, 2, 3, 4, 5, 1]) == 35


def test_two_pairs():
    r = CRO.replace(rows=CRO.rows + ("two_pairs",), two_pairs_bonus=10)
    assert row_score(r, "two_pairs", [2, 2, 5, 5, 1]) == 24
    assert row_score(r, "Two pairs", [3, 3, 3, 3, 1]) == 0
    assert row_score(r, "two_pairs", [2, 2, 2, 5, 5]) == 24
    assert row_score(r.replace(n_dice=6), "two_pairs", [6, 6, 5, 5, 4, 4]) == 32


def _col(rules, **vals):
    col = [-1] * rules.n_rows
    for k, v in vals.items():
        col[rules.row_index(k)] = v
    return col


def test_middle_term_sign_and_clamp():
    col = _col(CRO, ones=2, max=10, min=20)
    assert column_parts(CRO, col)["middle"] == 0                    # clamped
    assert column_parts(CRO.replace(middle_clamp=False), col)["middle"] == -20
    col = _col(CRO, ones=3, max=27, min=8)
    assert column_parts(CRO, col)["middle"] == 57
    assert column_parts(CRO, _col(CRO, ones=3, max=27))["middle"] == 0   # incomplete
    # Max and Min themselves are not added.
    assert column_parts(CRO, col)["total"] == 3 + 57


def test_upper_bonus_threshold():
    col = _col(CRO, ones=0, twos=4, threes=9, fours=12, fives=15, sixes=20)
    assert column_parts(CRO, col)["upper"] == 60 and column_parts(CRO, col)["bonus"] == 30
    col[5] = 18
    assert column_parts(CRO, col)["bonus"] == 0


def test_card_total_is_sum_of_parts():
    card = [[3, 4, 9, 12, 15, 18, 27, 8, 45, 22, 58, 56, 80]] * 4
    p = column_parts(CRO, card[0])
    assert p == {"upper": 61, "bonus": 30, "middle": 57, "lower": 261, "total": 409}
    assert card_total(CRO, card) == 4 * 409


def test_fill_orders():
    open_all = [True] * 13
    assert column_next_rows("down", open_all) == [0]
    assert column_next_rows("up", open_all) == [12]
    assert column_next_rows("from_middle", open_all) == [6, 7]
    assert column_next_rows("to_middle", open_all) == [0, 12]
    half = [True] * 4 + [False] * 9
    assert column_next_rows("down", half) == [0] and column_next_rows("up", half) == [3]
    assert column_next_rows("from_middle", half) == [3]


def test_presets_and_digest():
    assert CRO.n_turns == 52 and CRO.columns == ("down", "up", "free", "announce")
    assert SIX.n_dice == 6 and SIX.last_turn_rolls == 5 and SIX.n_columns == 4
    assert SEVEN.n_columns == 7 and SEVEN.straight_scoring == "by_roll"
    assert {"hand", "from_middle", "to_middle"} <= set(SEVEN.columns)
    assert get_preset("Seven-Column") is SEVEN and get_preset("default") is CRO
    assert len({p.digest for p in PRESETS.values()}) == len(PRESETS)
    assert YambRules() == CRO and hash(YambRules()) == hash(CRO) and YambRules().digest == CRO.digest
    assert CRO.replace(upper_bonus=35).digest != CRO.digest
    assert CRO.digest == "535b0cd7bef05db2"   # stable across runs and machines


def test_score_table_matches_reference():
    from yamblab.games.dice6 import dice_tables

    t = dice_tables(6)
    tab = score_table(SIX)
    for ri in (0, 17, 200, 461):
        faces = [f + 1 for f in range(6) for _ in range(int(t.rolls[ri, f]))]
        for row in range(SIX.n_rows):
            assert tab[ri, row, 1] == row_score(SIX, row, faces, 2)


def test_unknown_preset_names_it():
    with pytest.raises(UnknownVariantError, match="'bogus'.*croatian"):
        get_preset("bogus")


@pytest.mark.parametrize("kwargs,err,msg", [
    (dict(upper_bonus_threshold=120), ConfigError, "can never be reached"),
    (dict(columns=("down", "announce", "announce")), ConfigError, "second announce column"),
    (dict(columns=("down", "free"), announce_compulsory="always"), ConfigError, "no announce column"),
    (dict(columns=("down", "sideways")), UnknownVariantError, "sideways"),
    (dict(rows=("ones", "twos")), ConfigError, "must start with"),
    (dict(rows=CRO.rows + ("chance",)), UnknownVariantError, "chance"),
    (dict(rows=CRO.rows + ("full",)), ConfigError, "repeat"),
    (dict(n_dice=7), ConfigError, "5 or 6"),
    (dict(last_turn_rolls=2), ConfigError, "last_turn_rolls"),
    (dict(columns=("free",) * 9), ConfigError, "9 columns"),
    (dict(trips_bonus=-5), ConfigError, "trips_bonus"),
    (dict(straight_scoring="sideways"), UnknownVariantError, "straight_scoring"),
])
def test_bad_configuration_names_the_problem(kwargs, err, msg):
    with pytest.raises(err, match=msg):
        YambRules(**kwargs)


def test_bad_dice_and_rows():
    with pytest.raises(InvalidDiceError):
        row_score(CRO, "ones", [1, 2, 3, 4, 7])
    with pytest.raises(InvalidDiceError):
        row_score(CRO, "ones", [1, 2, 3, 4, 5, 6])   # six dice on a five-dice card
    with pytest.raises(IllegalActionError, match="two_pairs"):
        row_score(CRO, "two_pairs", [1, 2, 3, 4, 5])
    assert issubclass(ConfigError, YamblabError)
