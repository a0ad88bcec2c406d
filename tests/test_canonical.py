"""The canonical card a Yahtzee position is encoded from: it keeps the boundary state, and two
cards with the same state encode identically (in play, in search and in exact evaluation)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yamblab.games.yahtzee.canonical import canonical_card
from yamblab.games.yahtzee.game import YahtzeeGame, encode_yahtzee_boundary, encode_yahtzee_positions
from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules, possible_box_scores
from yamblab.model.exact_score import canonical_cards

NO_BONUS = YahtzeeRules(upper_bonus=False)


def state_of(scores: np.ndarray, upper_raw: np.ndarray, rules) -> np.ndarray:
    """(mask12, ystate, capped upper) of each card, computed from the boxes by hand."""
    filled = scores >= 0
    bits = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, None, 11]          # card order -> mask12 bit
    m12 = sum(filled[:, b].astype(np.int64) << bit for b, bit in enumerate(bits) if bit is not None)
    ys = np.where(scores[:, 11] < 0, 0, np.where(scores[:, 11] == 50, 2, 1))
    up = np.minimum(upper_raw, 63) if rules.upper_bonus else np.zeros_like(upper_raw)
    return np.stack([m12, ys, up], axis=1)


@lru_cache(maxsize=2)
def exact_table(rules):
    """The exact evaluation's canonical cards, indexed by the packed state (−1: none)."""
    states, scores, raws = canonical_cards(rules)
    index = np.full(4096 * 3 * 64, -1, np.int64)
    index[states @ np.array([3 * 64, 64, 1])] = np.arange(len(states))
    return index, scores, raws


cards = st.lists(st.tuples(*[st.one_of(st.just(-1), st.sampled_from(sorted(possible_box_scores(b))))
                             for b in range(13)]), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(cards, st.sampled_from([OFFICIAL, NO_BONUS]))
def test_canonical_card_keeps_the_state_and_is_the_exact_evaluations_card(rows, rules):
    scores = np.array(rows, np.int16)
    raw = np.where(scores[:, :6] >= 0, scores[:, :6], 0).sum(axis=1).astype(np.int64)
    c_scores, c_raw = canonical_card(scores, raw, rules)
    assert np.array_equal(state_of(c_scores, c_raw, rules), state_of(scores, raw, rules))
    assert np.array_equal(c_scores >= 0, scores >= 0)
    assert np.array_equal(c_scores[:, 11], scores[:, 11])              # the Yahtzee box as played
    again = canonical_card(c_scores, c_raw, rules)                     # idempotent
    assert np.array_equal(again[0], c_scores) and np.array_equal(again[1], c_raw)
    # the exact evaluation's table of canonical cards (built by its own loop) agrees
    t_index, t_scores, t_raw = exact_table(rules)
    key = state_of(scores, raw, rules) @ np.array([3 * 64, 64, 1])
    i = t_index[key]
    has = i >= 0                                   # the full card has no entry
    assert np.array_equal(c_scores[has], t_scores[i[has]]) and np.array_equal(c_raw[has], t_raw[i[has]])

def test_same_state_same_encoding_and_lower_points_do_not_show():
    # two cards with the same state: Ones 3 + Fours 12 against Ones 1 + Fours 16 is not the same
    # subtotal, so use Ones 2 + Twos 4 (6) against Ones 4 + Twos 2 (6), and different lower points
    a = np.full(13, -1, np.int16)
    b = a.copy()
    a[[0, 1, 6, 12]] = [2, 4, 27, 30]
    b[[0, 1, 6, 12]] = [4, 2, 9, 5]
    raw = np.array([6, 6])
    ea = encode_yahtzee_boundary(np.stack([a, b]), raw, OFFICIAL)
    assert np.array_equal(ea.columns[0], ea.columns[1])
    assert np.array_equal(ea.column_features[0], ea.column_features[1])
    dice = np.array([[1, 2, 3, 4, 5]] * 2, np.int8)
    ep = encode_yahtzee_positions(np.stack([a, b]), raw, dice, np.array([1, 1]), OFFICIAL)
    assert np.array_equal(ep.columns[0], ep.columns[1])
    # a different capped subtotal does show
    c = a.copy()
    c[1] = 6
    ec = encode_yahtzee_boundary(np.stack([a, c]), np.array([6, 8]), OFFICIAL)
    assert not np.array_equal(ec.columns[0], ec.columns[1])


def test_game_encoding_is_canonical_and_keeps_dice_and_legal_moves():
    game = YahtzeeGame(OFFICIAL)
    batch = game.new_batch(32, seed=3)
    rng = np.random.default_rng(0)
    while not batch.done.all():                        # play random legal moves to the end
        legal = batch.legal_actions()
        act = np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in legal])
        enc = game.encode(batch)
        sc, raw = canonical_card(batch.box_scores, batch.upper_raw, OFFICIAL)
        filled = sc >= 0
        assert np.allclose(enc.columns[:, 0, :13, 1] * 80, np.where(filled, sc, 0))
        assert np.allclose(enc.column_features[:, 0, 0] * 60, raw)
        assert np.array_equal(enc.dice[:, :5], batch.dice)
        assert np.array_equal(enc.legal[:, :13], legal[:, :13])
        batch.step(act)
    assert batch.done.all()


def test_unequal_lengths_are_named():
    with pytest.raises(ValueError, match="2 cards but 1 upper"):
        canonical_card(np.full((2, 13), -1), np.zeros(1), OFFICIAL)
