import itertools
from fractions import Fraction

import numpy as np
import pytest

from yamblab.errors import InvalidDiceError
from yamblab.games import dice as D


def test_counts_and_ordering():
    assert D.KEEPS.shape == (462, 6) and D.ROLLS.shape == (252, 6)
    sizes = D.KEEPS.sum(axis=1)
    assert list(np.bincount(sizes)) == [1, 6, 21, 56, 126, 252]
    assert np.all(np.diff(sizes) >= 0)
    assert (D.KEEPS[210:] == D.ROLLS).all()


def test_transition_rows_sum_to_one():
    assert np.allclose(D.P_ROLL_GIVEN_KEEP.sum(axis=1), 1.0, atol=1e-15)


@pytest.mark.parametrize("keep", [0, 3, 17, 100, 300])
def test_transition_matches_enumeration_of_ordered_outcomes(keep):
    """P(roll | keep) against brute force over the 6^k ordered outcomes of the rerolled dice."""
    kept = D.keep_faces(keep)
    k = 5 - len(kept)
    counts = {}
    for outcome in itertools.product(range(1, 7), repeat=k):
        r = D.roll_index(sorted(kept + list(outcome)))
        counts[r] = counts.get(r, 0) + 1
    for r in range(252):
        want = Fraction(counts.get(r, 0), 6 ** k)
        assert D.P_ROLL_GIVEN_KEEP[keep, r] == pytest.approx(float(want), abs=1e-15)


def test_roll_probability_of_yahtzee_and_straight():
    assert D.P_ROLL[D.roll_index([6, 6, 6, 6, 6])] == pytest.approx(1 / 7776)
    assert D.P_ROLL[D.roll_index([1, 2, 3, 4, 5])] == pytest.approx(120 / 7776)


def test_hold_masks_round_trip():
    dice = [5, 2, 5, 6, 2]
    for h in range(32):
        k = D.hold_to_keep(dice, h)
        h2 = D.keep_to_hold(dice, k)
        assert D.hold_to_keep(dice, h2) == k
    assert D.keep_faces(D.hold_to_keep(dice, 0b00101)) == [5, 5]


def test_sub_keeps_are_distinct_and_complete():
    r = D.roll_index([1, 2, 3, 4, 5])
    assert D.N_SUB_KEEPS[r] == 32
    r = D.roll_index([6, 6, 6, 6, 6])
    assert D.N_SUB_KEEPS[r] == 6


@pytest.mark.parametrize("bad,msg", [
    ([1, 2, 3, 4, 7], "face 7"), ([0, 2, 3, 4, 5], "face 0"), ([1, 2, 3, 4, 5, 6], "exactly 5"),
    ("1,2,x,4,5", "number"), ([1.5, 2, 3, 4, 5], "whole"),
])
def test_impossible_dice_are_named(bad, msg):
    with pytest.raises(InvalidDiceError, match=msg):
        D.validate_dice(bad)


def test_dice_strings():
    assert D.validate_dice("11346").tolist() == [1, 1, 3, 4, 6]
    assert D.validate_dice("1, 1, 3, 4, 6").tolist() == [1, 1, 3, 4, 6]


@pytest.mark.parametrize("n_dice", [5, 6])
def test_best_sub_keep_on_the_keep_lattice_equals_the_max_over_every_sub_keep(n_dice):
    from yamblab.games.dice6 import dice_tables

    t = dice_tables(n_dice)
    v = np.random.default_rng(n_dice).normal(size=(7, t.n_keeps))
    np.testing.assert_array_equal(t.best_sub_keep(v), v[:, t.sub_keeps].max(axis=2))
    # a keep worth the most everywhere is the best of every roll that allows it
    v[:, 0] = 100.0
    assert (t.best_sub_keep(v) == 100.0).all()


@pytest.mark.parametrize("n_dice", [5, 6])
def test_lattice_keep_average_equals_the_dense_product(n_dice):
    from yamblab.games.dice6 import dice_tables

    t = dice_tables(n_dice)
    v = np.random.default_rng(n_dice).normal(size=(9, t.n_rolls))
    np.testing.assert_allclose(t.keep_average(v), v @ t.p_roll_given_keep.T, rtol=0, atol=1e-12)
    # a constant is its own average from every keep; one row in, one row out
    np.testing.assert_allclose(t.keep_average(np.full((1, t.n_rolls), 7.0)), 7.0, atol=1e-12)
    assert t.keep_average(v[:1]).shape == (1, t.n_keeps)
