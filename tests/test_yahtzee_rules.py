import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yamblab.errors import IllegalActionError, UnknownVariantError, UnreachablePositionError
from yamblab.games.dice import ROLLS, histogram
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import (
    BOX_NAMES, CHANCE, FOUR_KIND, FULL_HOUSE, LARGE_STRAIGHT, OFFICIAL, SMALL_STRAIGHT, THREE_KIND,
    YAHTZEE, BoundaryState, YahtzeeRules, base_score, box_index, legal_boxes, parse_card, score_box,
)


def h(*dice):
    return histogram(dice)


@pytest.mark.parametrize("dice,box,points", [
    ((1, 1, 3, 4, 6), 0, 2), ((6, 6, 6, 2, 2), 5, 18),
    ((3, 3, 3, 4, 5), THREE_KIND, 18), ((3, 3, 4, 4, 5), THREE_KIND, 0),
    ((2, 2, 2, 2, 6), FOUR_KIND, 14), ((2, 2, 2, 6, 6), FOUR_KIND, 0),
    ((2, 2, 3, 3, 3), FULL_HOUSE, 25), ((3, 3, 3, 3, 3), FULL_HOUSE, 0),
    ((1, 2, 3, 4, 4), SMALL_STRAIGHT, 30), ((3, 4, 5, 6, 6), SMALL_STRAIGHT, 30),
    ((1, 2, 3, 5, 6), SMALL_STRAIGHT, 0), ((2, 3, 4, 5, 6), LARGE_STRAIGHT, 40),
    ((1, 2, 3, 4, 6), LARGE_STRAIGHT, 0), ((4, 4, 4, 4, 4), YAHTZEE, 50),
    ((1, 2, 3, 4, 6), CHANCE, 16),
])
def test_base_scores(dice, box, points):
    assert base_score(h(*dice), box) == points


def test_upper_bonus_paid_once_on_reaching_63():
    s = BoundaryState(filled=0b011111, upper=60)
    pts, nxt = score_box(s, h(6, 6, 6, 1, 2), 5)
    assert pts == 18 + 35 and nxt.upper == 63
    pts, _ = score_box(nxt, h(6, 6, 6, 1, 2), THREE_KIND)
    assert pts == 21


def test_forced_joker():
    fifty = BoundaryState(filled=1 << YAHTZEE, yahtzee_fifty=True)
    assert legal_boxes(fifty, h(5, 5, 5, 5, 5)) == [4]          # matching upper box first
    pts, _ = score_box(fifty, h(5, 5, 5, 5, 5), 4)
    assert pts == 25 + 100
    s = BoundaryState(filled=(1 << YAHTZEE) | (1 << 4), upper=20, yahtzee_fifty=True)
    assert legal_boxes(s, h(5, 5, 5, 5, 5)) == [6, 7, 8, 9, 10, 12]
    assert score_box(s, h(5, 5, 5, 5, 5), LARGE_STRAIGHT)[0] == 40 + 100
    zero = BoundaryState(filled=(1 << YAHTZEE) | (1 << 4), upper=20)
    assert score_box(zero, h(5, 5, 5, 5, 5), FULL_HOUSE)[0] == 25      # joker, no bonus


def test_free_joker_full_value_only_with_upper_box_filled():
    free = YahtzeeRules("free")
    s = BoundaryState(filled=1 << YAHTZEE, yahtzee_fifty=True)
    assert len(legal_boxes(s, h(2, 2, 2, 2, 2), free)) == 12
    assert score_box(s, h(2, 2, 2, 2, 2), FULL_HOUSE, free)[0] == 0 + 100
    s2 = BoundaryState(filled=(1 << YAHTZEE) | (1 << 1), upper=4, yahtzee_fifty=True)
    assert score_box(s2, h(2, 2, 2, 2, 2), FULL_HOUSE, free)[0] == 25 + 100


def test_priority_joker_order():
    pr = YahtzeeRules("priority")
    s = BoundaryState(filled=(1 << YAHTZEE) | (1 << 2), upper=9)
    assert legal_boxes(s, h(3, 3, 3, 3, 3), pr) == [THREE_KIND, FOUR_KIND]
    s = BoundaryState(filled=(1 << YAHTZEE) | (1 << 2) | (1 << 6) | (1 << 7), upper=9)
    assert legal_boxes(s, h(3, 3, 3, 3, 3), pr) == [FULL_HOUSE, SMALL_STRAIGHT, LARGE_STRAIGHT, CHANCE]


def test_no_joker_scores_normally():
    none = YahtzeeRules("none")
    s = BoundaryState(filled=(1 << YAHTZEE) | (1 << 3), upper=8, yahtzee_fifty=True)
    assert score_box(s, h(4, 4, 4, 4, 4), FULL_HOUSE, none)[0] == 0 + 100


def test_illegal_box_is_named():
    s = BoundaryState(filled=1 << 0)
    with pytest.raises(IllegalActionError, match="Ones.*already filled"):
        score_box(s, h(1, 1, 2, 3, 4), 0)
    fifty = BoundaryState(filled=1 << YAHTZEE, yahtzee_fifty=True)
    with pytest.raises(IllegalActionError, match="joker"):
        score_box(fifty, h(5, 5, 5, 5, 5), CHANCE)


@pytest.mark.parametrize("kwargs,msg", [
    (dict(filled=0, upper=5), "cannot be made"),
    (dict(filled=1 << 1, upper=3), "cannot be made"),
    (dict(filled=0, yahtzee_fifty=True), "Yahtzee box is open"),
    (dict(filled=1 << 13), "13-bit"),
    (dict(filled=0b111111, upper=64), "0..63"),
])
def test_unreachable_positions_are_named(kwargs, msg):
    with pytest.raises(UnreachablePositionError, match=msg):
        BoundaryState(**kwargs)


def test_rules_are_hashable_and_parse():
    a, b = YahtzeeRules.parse("free,no-yahtzee-bonus"), YahtzeeRules("free", True, False)
    assert a == b and hash(a) == hash(b) and a.digest == b.digest
    assert a.digest != OFFICIAL.digest
    assert len({YahtzeeRules(j, u, y).digest for j in ("forced", "free", "priority", "none")
                for u in (0, 1) for y in (0, 1)}) == 16
    with pytest.raises(UnknownVariantError, match="bogus"):
        YahtzeeRules.parse("bogus")
    with pytest.raises(UnknownVariantError):
        YahtzeeRules(joker="strict")


def test_parse_card():
    state, so_far, _ = parse_card("ones=3, sixes=30, twos=10, threes=9, fours=12, fives=0, yahtzee=50, yahtzee_bonuses=1")
    assert state.upper == 63 and state.ystate == 2 and so_far == 64 + 35 + 50 + 100
    with pytest.raises(UnreachablePositionError, match="Ones cannot hold 7"):
        parse_card("ones=7")
    with pytest.raises(UnreachablePositionError, match="50 in the Yahtzee box"):
        parse_card("yahtzee=0,ones=1,yahtzee_bonuses=1")
    with pytest.raises(IllegalActionError, match="unknown box"):
        parse_card("sevens=7")
    assert box_index("Full House") == FULL_HOUSE == box_index("fh")


@pytest.mark.parametrize("rules", [YahtzeeRules(j, u, y) for j in ("forced", "free", "priority", "none")
                                   for u, y in ((1, 1), (0, 0))])
def test_engine_agrees_with_reference_rules(rules):
    """The Cython engine's legal boxes and points match the readable reference on many states."""
    rng = np.random.default_rng(1)
    n = 400
    b = new_batch(n, rules, seed=3)
    for _ in range(60):
        legal = b.legal_actions()
        before = b.total.copy()
        states, dice, turns = b.boundary_states(), b.dice.copy(), b.turn.copy()
        acts = b.random_actions(5, _)
        for i in range(n):
            if turns[i] >= 13:
                continue
            st_ = BoundaryState(filled=int(b.filled[i]), upper=int(states[i, 2]),
                                yahtzee_fifty=bool(states[i, 1] == 2))
            ref = legal_boxes(st_, histogram(dice[i]), rules)
            assert list(np.flatnonzero(legal[i, :13])) == ref
        b.step(acts)
        for i in range(n):
            if turns[i] < 13 and acts[i] < 13:
                st_ = BoundaryState(filled=int(b.filled[i]) & ~(1 << int(acts[i])), upper=int(states[i, 2]),
                                    yahtzee_fifty=bool(states[i, 1] == 2))
                pts, _n = score_box(st_, histogram(dice[i]), int(acts[i]), rules)
                assert b.total[i] - before[i] == pts
        if b.done.all():
            break
    assert rng is not None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), joker=st.sampled_from(["forced", "free", "priority", "none"]),
       upper=st.booleans(), ybonus=st.booleans())
def test_random_games_end_full_and_total_adds_up(seed, joker, upper, ybonus):
    rules = YahtzeeRules(joker, upper, ybonus)
    b = new_batch(64, rules, seed=seed)
    step = 0
    while not b.done.all():
        b.step(b.random_actions(seed, step))
        step += 1
        assert step < 13 * 3 + 1
    assert (b.filled == 0x1FFF).all() and (b.box_scores >= 0).all()
    expect = (b.box_scores.sum(axis=1) + 35 * ((b.upper_raw >= 63) & upper)
              + 100 * b.yahtzee_bonuses)
    assert (b.total == expect).all()


def test_same_seed_same_dice_and_illegal_actions_apply_nothing():
    a, b = new_batch(8, seed=9), new_batch(8, seed=9)
    assert (a.dice == b.dice).all()
    c = new_batch(8, seed=10)
    assert not (a.dice == c.dice).all()
    snap = a.dice.copy()
    acts = np.full(8, 13 + 0, dtype=np.int64)
    a.step(acts)
    acts = np.zeros(8, dtype=np.int64)
    a.step(acts)                                         # everyone scores Ones
    dice_before, total_before = a.dice.copy(), a.total.copy()
    acts[3] = 0                                          # Ones again for game 3: illegal
    acts[:3] = 1
    with pytest.raises(IllegalActionError, match="game 0|game 3"):
        a.step(acts)
    assert (a.dice == dice_before).all() and (a.total == total_before).all()
    assert snap.shape == (8, 5)


def test_box_names_cover_card():
    assert len(BOX_NAMES) == 13 and ROLLS.shape == (252, 6)
