"""The ``jamb_nn`` preset (JambNeuralNetwork's rules) and the pure-roll rule of the announce column.

Hand-computed values follow jamb_jax.py / jamb_logic.py of github.com/filipivanovski42/
JambNeuralNetwork (the preset's source comment in yamblab/games/yamb/rules.py).
"""

import itertools

import numpy as np
import pytest

from yamblab.agents.base import make_agent
from yamblab.agents.yamb_bots import GreedyAgent, play
from yamblab.errors import ConfigError, IllegalActionError
from yamblab.games import encoding as E
from yamblab.games.dice6 import dice_tables
from yamblab.games.yamb.engine import YambBatch, new_yamb_batch
from yamblab.games.yamb.rules import YambRules, get_preset
from yamblab.games.yamb.scoring import card_total, column_parts, legal_boxes, row_score
from yamblab.oracle.yamb.turn import _turn_dp

JNN = get_preset("jamb_nn")
DOWN, FREE, UP, ANN = range(4)
ONES, MAX, MIN, TRIPS, STRAIGHT, FULL, POKER, YAMB = 0, 6, 7, 8, 9, 10, 11, 12


# ----------------------------------------------------------------------------- the preset
def test_preset_card():
    assert JNN.n_dice == 6 and JNN.rolls == 3 and JNN.last_turn_rolls == 5
    assert JNN.columns == ("down", "free", "up", "announce")
    assert JNN.rows == ("ones", "twos", "threes", "fours", "fives", "sixes", "max", "min",
                        "trips", "straight", "full", "poker", "yamb")   # Trips before Straight
    assert JNN.n_turns == 52 and JNN.announce_free_on_pure_roll
    assert get_preset("jamb-nn") is JNN


@pytest.mark.parametrize("dice,row,pts", [
    ([1, 1, 1, 1, 1, 1], "ones", 5), ([6, 6, 6, 6, 6, 6], "sixes", 30),   # at most 5 dice
    ([3, 3, 3, 1, 2, 4], "threes", 9),
    ([1, 2, 3, 4, 5, 6], "max", 20), ([1, 2, 3, 4, 5, 6], "min", 15),     # total − lowest/highest
    ([2, 2, 3, 3, 4, 4], "max", 16), ([2, 2, 3, 3, 4, 4], "min", 14),
    ([5, 5, 5, 6, 6, 6], "trips", 38), ([1, 1, 1, 2, 3, 4], "trips", 23),  # 3v + 20, best v
    ([1, 1, 2, 2, 3, 3], "trips", 0),
    ([1, 2, 3, 4, 5, 5], "straight", 45), ([2, 3, 4, 5, 6, 6], "straight", 50),
    ([1, 2, 3, 4, 5, 6], "straight", 50), ([1, 2, 3, 4, 6, 6], "straight", 0),
    ([6, 6, 6, 5, 5, 1], "full", 68), ([2, 2, 2, 3, 3, 3], "full", 53),   # 3a + 2b + 40
    ([4, 4, 4, 4, 4, 4], "full", 0), ([2, 2, 2, 2, 2, 5], "full", 0),      # a Yamb is no Full
    ([2, 2, 2, 2, 5, 5], "full", 56),
    ([6, 6, 6, 6, 6, 6], "poker", 74), ([3, 3, 3, 3, 1, 2], "poker", 62),  # 4v + 50
    ([3, 3, 3, 1, 1, 2], "poker", 0),
    ([6, 6, 6, 6, 6, 6], "yamb", 90), ([4, 4, 4, 4, 4, 1], "yamb", 80),    # 5v + 60
    ([4, 4, 4, 4, 1, 1], "yamb", 0),
])
def test_row_scores(dice, row, pts):
    for roll in (1, 2, 3, 5):                                # no row depends on the roll number
        assert row_score(JNN, row, dice, roll) == pts


def test_column_sums():
    col = [5, 10, 15, 20, 10, 0, 28, 10, 23, 45, 56, 62, 80]   # upper 60: +30
    p = column_parts(JNN, col)
    assert p == {"upper": 60, "bonus": 30, "middle": 5 * (28 - 10), "lower": 266,
                 "total": 60 + 30 + 90 + 266}
    col2 = list(col)
    col2[1] = 8                                                  # upper 58: no bonus
    col2[MAX], col2[MIN] = 12, 20                                # Max < Min: middle 0
    assert column_parts(JNN, col2)["bonus"] == 0 and column_parts(JNN, col2)["middle"] == 0
    assert card_total(JNN, [col, col2, col, col]) == \
        3 * 446 + column_parts(JNN, col2)["total"]


def test_five_rolls_on_the_last_turn():
    b = new_yamb_batch(1, JNN, seed=3)
    assert b.rolls_max[0] == 3
    card = np.full((4, 13), 5, dtype=np.int16)
    card[FREE, YAMB] = -1
    b.core.set_state(0, card, [1, 2, 3, 4, 5, 6], JNN.n_turns - 1, 1, -1)
    assert b.rolls_max[0] == 5


# ----------------------------------------------------------------------------- validation
def test_rule_field_validation_and_key():
    cro = get_preset("croatian")
    assert cro.digest == "535b0cd7bef05db2"                      # earlier digests unchanged
    on = cro.replace(announce_free_on_pure_roll=True)
    assert "announce_free_on_pure_roll=1" in on.key and on.digest != cro.digest
    assert "announce_free_on_pure_roll" not in cro.key
    with pytest.raises(ConfigError, match="announce_free_on_pure_roll=.*true or false"):
        YambRules(announce_free_on_pure_roll="no")
    with pytest.raises(ConfigError, match="never apply with announce_compulsory='always'"):
        YambRules(announce_free_on_pure_roll=True, announce_compulsory="always")
    # A column game of the preset without its announce column is still valid (the rule is idle).
    from yamblab.games.yamb.game import YambGame

    g = YambGame.from_preset("jamb_nn", ["free"])
    assert g.rules.columns == ("free",) and g.rules.announce_free_on_pure_roll
    with pytest.raises(ConfigError, match="columns of 13 rows"):
        legal_boxes(JNN, [[-1] * 13] * 3, 1, None)


# ----------------------------------------------------------------------------- the pure roll
def _boxes(b, i=0):
    R = b.rules.n_rows
    return {divmod(int(a), R) for a in np.flatnonzero(b.legal_actions()[i, :b.n_placements])}


def test_pure_roll_opens_the_announce_column():
    b = new_yamb_batch(1, JNN, seed=11)
    ann_boxes = {(ANN, r) for r in range(13)}
    assert b.pure[0] == 1 and ann_boxes <= _boxes(b)            # the first roll is pure
    assert b.legal_actions()[0, b.announce_offset:].all()       # and announcing is open
    b.step([b.hold_offset + 0b000011])                           # keep two dice: not pure
    assert b.pure[0] == 0 and not (ann_boxes & _boxes(b))
    with pytest.raises(IllegalActionError, match="pure roll .*this roll kept some dice"):
        b.step([ANN * 13 + YAMB])
    b.step([b.hold_offset + 0])                                  # reroll every die: pure
    assert b.pure[0] == 1 and ann_boxes <= _boxes(b)
    dice = b.dice[0].tolist()
    b.step([ANN * 13 + MAX])
    assert b.card[0, ANN, MAX] == row_score(JNN, "max", dice) and b.turn[0] == 1
    assert b.pure[0] == 1 and (ANN, MAX) not in _boxes(b) and (ANN, MIN) in _boxes(b)


def test_rule_off_keeps_the_announce_column_closed():
    off = JNN.replace(announce_free_on_pure_roll=False)
    b = new_yamb_batch(1, off, seed=11)
    assert not any(c == ANN for c, _ in _boxes(b))
    with pytest.raises(IllegalActionError, match="needs an announcement after the first roll$"):
        b.step([ANN * 13 + YAMB])


def test_forced_announcement_withholds_the_pure_write():
    b = new_yamb_batch(1, JNN, seed=2)
    card = np.full((4, 13), 10, dtype=np.int16)
    card[ANN, [2, 9]] = -1                                       # only announce boxes left
    b.core.set_state(0, card, [1, 2, 3, 3, 3, 4], 50, 1, -1)
    legal = b.legal_actions()[0]
    assert not legal[:b.announce_offset].any()                   # no placement, no reroll
    assert np.flatnonzero(legal[b.announce_offset:]).tolist() == [2, 9]
    with pytest.raises(IllegalActionError, match="announcing is compulsory"):
        b.step([ANN * 13 + 2])
    assert legal_boxes(JNN, card.tolist(), 1, None) == []
    b.step([b.announce_offset + 9])                              # announce, then score it
    assert _boxes(b) == {(ANN, 9)}


@pytest.mark.parametrize("rules", [JNN, get_preset("croatian").replace(announce_free_on_pure_roll=True)],
                         ids=["jamb_nn", "croatian+pure"])
def test_engine_matches_reference_with_frequent_full_rerolls(rules):
    """Random play that often rerolls every die: the engine's placements are the reference's."""
    b = new_yamb_batch(6, rules, seed=21)
    rng = np.random.default_rng(5)
    P, H = b.n_placements, b.n_holds
    while not b.done.all():
        legal = b.legal_actions()
        acts = np.full(b.n, -1)
        for i in np.flatnonzero(~b.done):
            ann = int(b.announced[i])
            ref = legal_boxes(rules, b.card[i].tolist(), int(b.rolls_used[i]),
                              None if ann < 0 else ann, pure=bool(b.pure[i]))
            got = {divmod(int(a), rules.n_rows) for a in np.flatnonzero(legal[i, :P])}
            rest_open = (b.card[i, [c for c, k in enumerate(rules.columns) if k != "announce"]] < 0).any()
            if ann >= 0 or int(b.rolls_used[i]) > 1 or rest_open:
                assert got == set(ref)
            else:
                assert got <= set(ref)
            ok = np.flatnonzero(legal[i])
            if legal[i, P] and rng.random() < 0.4:
                acts[i] = P                                      # reroll every die
            else:
                acts[i] = rng.choice(ok)
        holds = (acts >= P) & (acts < P + H)
        b.step(acts)
        assert (b.pure[holds] == (acts[holds] == P)).all()
    for i in range(b.n):
        assert b.total[i] == card_total(rules, b.card[i].tolist())


def test_encoding_flag_slot():
    b = new_yamb_batch(2, JNN, seed=4)
    slot = E.YAMB_STATE_FLAGS["pure_roll_free"]
    assert slot == 27 and E.encode_yamb(b).state.shape == (2, E.STATE_DIM)
    assert E.encode_yamb(b).state[:, slot].tolist() == [1.0, 1.0]
    b.step([b.hold_offset + 1, b.hold_offset + 0])
    assert E.encode_yamb(b).state[:, slot].tolist() == [0.0, 1.0]
    assert E.encode_yamb(new_yamb_batch(1, "croatian")).state[0, slot] == 0.0


# ----------------------------------------------------------------------------- the planner
def test_turn_dp_pure_branch_against_enumeration():
    """Two rolls of 5 dice: the empty keep is worth the *pure* value of the next roll."""
    rules = get_preset("croatian")
    t = dice_tables(5)
    rng = np.random.default_rng(0)
    best = rng.normal(size=(1, 2, t.n_rolls))
    best_pure = best + rng.uniform(0, 3, size=best.shape)
    K, v0 = _turn_dp(rules, best, best_pure)
    index = {tuple(h): k for k, h in enumerate(t.rolls.tolist())}

    def roll_of(faces):
        return index[tuple(np.bincount(faces, minlength=7)[1:].tolist())]

    outcomes = list(itertools.product(range(1, 7), repeat=5))
    # empty keep: mean over all 6**5 throws of the pure value at the second roll
    want0 = np.mean([best_pure[0, 1, roll_of(d)] for d in outcomes])
    assert K[0, 0, 0] == pytest.approx(want0, rel=1e-12)
    # a non-empty keep (two sixes) rolls three dice: the plain value
    k66 = next(k for k, h in enumerate(t.keeps.tolist()) if h == [0, 0, 0, 0, 0, 2])
    want = np.mean([best[0, 1, roll_of((6, 6) + d)] for d in itertools.product(range(1, 7), repeat=3)])
    assert K[0, 0, k66] == pytest.approx(want, rel=1e-12)
    # before the first roll: the first roll is pure
    sub = K[0, 0][t.sub_keeps].max(axis=1)
    want_v0 = np.mean([max(best_pure[0, 0, roll_of(d)], sub[roll_of(d)]) for d in outcomes])
    assert v0[0] == pytest.approx(want_v0, rel=1e-12)
    # without a pure branch nothing changes from the plain recursion
    K1, _ = _turn_dp(rules, best)
    K2, _ = _turn_dp(rules, best, best.copy())
    assert np.allclose(K1, K2)


def _pure_position(rules):
    """Two boxes open: free/Trips and announce/Max (Ones 5 and Min 5 filled there): dice with
    no trips at roll 2 of 3, kept dice (not pure). Only a full reroll reaches announce/Max."""
    b = YambBatch(1, rules, seed=0)
    card = np.full((4, 13), 10, dtype=np.int16)
    card[:, [ONES, MAX, MIN]] = [3, 25, 10]
    card[FREE, TRIPS] = -1
    card[ANN, [ONES, MAX, MIN]] = [5, -1, 5]
    b.core.set_state(0, card, [1, 1, 2, 2, 3, 4], 50, 2, -1, pure=False)
    return b


def test_greedy_rerolls_everything_to_write_the_announce_column():
    b = _pure_position(JNN)
    agent = GreedyAgent(JNN)
    assert agent.act(b)[0] == b.hold_offset + 0                  # reroll all six dice
    b.step([b.hold_offset + 0])
    assert b.pure[0] == 1 and (ANN, MAX) in _boxes(b)
    a = int(agent.act(b)[0])
    dice = b.dice[0].tolist()
    gain_max = 5 * (row_score(JNN, "max", dice) - 5)
    gain_trips = row_score(JNN, "trips", dice)
    assert a == (ANN * 13 + MAX if gain_max >= gain_trips else FREE * 13 + TRIPS)
    b.step([a])                                                  # legal: the engine accepts it
    assert b.turn[0] == 51
    # Without the rule a full reroll cannot reach announce/Max: greedy keeps dice instead.
    off = JNN.replace(announce_free_on_pure_roll=False)
    b2 = _pure_position(off)
    assert (ANN, MAX) not in _boxes(b2)
    assert GreedyAgent(off).act(b2)[0] != b2.hold_offset + 0


@pytest.mark.parametrize("agent", ["random", "greedy", "heuristic"])
def test_bots_play_whole_games(agent):
    b = play(make_agent(agent, JNN, seed=1), YambBatch(1, JNN, seed=5))
    assert b.done.all() and (b.card >= 0).all()
    for i in range(b.n):
        assert b.total[i] == card_total(JNN, b.card[i].tolist())


# ----------------------------------------------------------------------------- JambNeuralNetwork's engine
# Its scoring, restated from its public engine (jamb_jax.py) on a histogram of the six dice: the
# number rows count at most five dice; Max and Min are the total without the lowest or the
# highest die; Trips, Poker and Yamb the highest face with 3, 4 or 5 dice (3v + 20, 4v + 50,
# 5v + 60); a straight 50 for 2-6, else 45 for 1-5; Full the best 3a + 2b + 40 over two different
# faces; a column adds 30 at an upper sum of 60 and Ones × (Max − Min) once all three are filled.
def _jnn_row(counts, row):
    faces = range(1, 7)
    total = sum(v * c for v, c in zip(faces, counts))
    present = [v for v, c in zip(faces, counts) if c]
    best = lambda k: max([v for v, c in zip(faces, counts) if c >= k], default=0)    # noqa: E731
    if row < 6:
        return min(counts[row], 5) * (row + 1)
    if row in (MAX, MIN):
        return total - (min(present) if row == MAX else max(present))
    if row in (TRIPS, POKER, YAMB):
        k, add = {TRIPS: (3, 20), POKER: (4, 50), YAMB: (5, 60)}[row]
        return k * best(k) + add if best(k) else 0
    if row == STRAIGHT:
        return 50 if all(counts[1:]) else 45 if all(counts[:5]) else 0
    return max([3 * a + 2 * b + 40 for a in faces for b in faces
                if a != b and counts[a - 1] >= 3 and counts[b - 1] >= 2], default=0)


def _jnn_total(card):
    out = 0
    for col in card:                                   # the columns' box scores in row order
        upper = sum(col[:6])
        middle = max(col[MAX] - col[MIN], 0) * col[ONES]
        out += upper + (30 if upper >= 60 else 0) + middle + sum(col[TRIPS:])
    return out


def test_every_row_score_of_every_six_dice_roll_is_jamb_neural_networks():
    rolls = list(itertools.combinations_with_replacement(range(1, 7), 6))
    assert len(rolls) == 462
    checked = 0
    for dice in rolls:
        counts = [dice.count(v) for v in range(1, 7)]
        for row in range(13):
            assert row_score(JNN, row, list(dice), 1) == _jnn_row(counts, row), (dice, JNN.rows[row])
            checked += 1
    assert checked == 6006


def test_the_totals_of_random_full_cards_are_jamb_neural_networks():
    rolls = list(itertools.combinations_with_replacement(range(1, 7), 6))
    scores = np.array([[row_score(JNN, r, list(d), 1) for r in range(13)] for d in rolls])   # (462, 13)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(rolls), size=(20_000, 4, 13))        # each box scored from a random roll
    for pick in picks:
        card = scores[pick, np.arange(13)].tolist()
        assert card_total(JNN, card) == _jnn_total(card)
