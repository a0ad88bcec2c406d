"""The exact forward pass of turn-perfect agents against independent computations."""

import numpy as np
import pytest

from yamblab.games import dice as D
from yamblab.games.yahtzee.rules import OFFICIAL, BoundaryState, YahtzeeRules, legal_boxes, score_box
from yamblab.oracle.yahtzee import _kernels
from yamblab.rules_of_thumb.occupancy import forward_occupancy
from yamblab.oracle.yahtzee.policy_eval import evaluate_policy
from yamblab.oracle.yahtzee.table import OracleTable


def _random_valuation(seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 60, (4096, 3, 64))


def _brute_first_turn(W, rules):
    """Distribution of the boundary state after turn 1, by matrices of P(roll | keep) and the
    readable rules: {(mask12, ystate, upper): probability}, and expected points."""
    start = BoundaryState()
    P = D.P_ROLL_GIVEN_KEEP                                    # (462, 252)
    box_val = np.full((252, 13), -np.inf)
    outcome = {}
    for r in range(252):
        hist = tuple(int(x) for x in D.ROLLS[r])
        for b in legal_boxes(start, hist, rules):
            pts, nxt = score_box(start, hist, b, rules)
            key = (nxt.mask12(), nxt.ystate, nxt.upper)
            box_val[r, b] = pts + W[key]
            outcome[r, b] = (key, pts)
    box = np.argmax(box_val, axis=1)                           # first box in card order
    F = box_val.max(axis=1)

    def choose(E):
        sub = np.where(D.SUB_KEEPS >= 0, D.SUB_KEEPS, 0)
        vals = np.where(D.SUB_KEEPS >= 0, E[sub], -np.inf)
        return sub[np.arange(252), np.argmax(vals, axis=1)]    # keeps listed ascending

    E2 = P @ F
    k2 = choose(E2)
    E1 = P @ E2[k2]
    k1 = choose(E1)
    m1 = np.zeros(462)
    np.add.at(m1, k1, D.P_ROLL)
    r2 = m1 @ P
    keep_all = k2 == np.arange(252) + 210
    m2 = np.zeros(462)
    np.add.at(m2, k2[~keep_all], r2[~keep_all])
    q = m2 @ P + np.where(keep_all, r2, 0.0)
    dist, points = {}, 0.0
    for r in range(252):
        key, pts = outcome[r, box[r]]
        dist[key] = dist.get(key, 0.0) + q[r]
        points += q[r] * pts
    return dist, points


@pytest.mark.parametrize("rules", [OFFICIAL, YahtzeeRules.parse("none")])
def test_first_turn_matches_brute_force(rules):
    W = _random_valuation(1)
    occ = forward_occupancy(W, rules, turns=1)
    dist, points = _brute_first_turn(W, rules)
    got = {tuple(int(i) for i in k): float(occ.visits[k]) for k in zip(*np.nonzero(occ.visits))}
    got.pop((0, 0, 0))
    assert set(got) == set(dist)
    for k, p in dist.items():
        assert got[k] == pytest.approx(p, abs=1e-12)
    assert occ.expected_score == pytest.approx(points, abs=1e-9)


@pytest.mark.slow
def test_greedy_forward_agrees_with_backward_pass():
    rules = OFFICIAL
    table = OracleTable.get(rules)
    W = np.zeros((4096, 3, 64))
    occ = forward_occupancy(W, rules, oracle=table.values)
    exact = evaluate_policy(W, rules)[0, 0, 0]
    assert occ.expected_score == pytest.approx(exact, abs=1e-9)
    assert occ.expected_score == pytest.approx(217.3817, abs=1e-4)
    # each turn's states form a distribution; a game ends on the full card
    layer = np.array([bin(m).count("1") for m in range(4096)])
    for n in range(14):
        mass = occ.visits[layer == n, 0].sum() + occ.visits[layer == n - 1, 1:].sum()
        assert mass == pytest.approx(1.0, abs=1e-12)
    # the box means and bonuses add up to the score
    total = occ.box_means.sum() + 35 * occ.upper_bonus_rate + occ.yahtzee_bonus_points
    assert total == pytest.approx(occ.expected_score, abs=1e-9)
    # regrets telescope to the shortfall from optimal play
    assert occ.regret == pytest.approx(table.new_game_value - exact, abs=1e-9)
    assert sum(occ.regret_by_box.values()) == pytest.approx(occ.regret_by_decision["box"], abs=1e-9)
    assert 0.02 < occ.upper_bonus_rate < 0.04          # Best Values post: greedy's bonus rate 3.1%


@pytest.mark.slow
def test_fast_evaluation_equals_reference_kernel():
    W = _random_valuation(2)
    ref = _kernels.evaluate_policy(W, 0, True, True)
    new = evaluate_policy(W, OFFICIAL)
    ok = ~np.isnan(ref)
    assert np.array_equal(np.isnan(ref), np.isnan(new))
    # the same choices; the last average is a dot product with P(roll): equal up to rounding
    assert np.allclose(ref[ok], new[ok], rtol=0, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("rules, kind", [
    (OFFICIAL, "zero"),
    (YahtzeeRules(joker="free", upper_bonus=False), "integer"),
    (YahtzeeRules(joker="priority", yahtzee_bonus=False), "integer"),
    (YahtzeeRules(joker="none", upper_bonus=False, yahtzee_bonus=False), "zero"),
])
def test_blocked_evaluation_breaks_ties_as_the_reference_kernel(rules, kind):
    # Greedy and whole-point valuations tie often (equal keeps, equal boxes): the lane-blocked
    # kernel must make the reference kernel's choices on every tie, under every variant (the
    # variants without the upper bonus run on a single lane).
    W = np.zeros((4096, 3, 64)) if kind == "zero" else np.round(_random_valuation(3) / 10.0)
    ref = _kernels.evaluate_policy(W, rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus)
    new = evaluate_policy(W, rules)
    ok = ~np.isnan(ref)
    assert np.array_equal(np.isnan(ref), np.isnan(new))
    assert np.abs(ref[ok] - new[ok]).max() < 1e-9


def test_bad_shape_is_refused():
    with pytest.raises(ValueError, match="shape"):
        forward_occupancy(np.zeros((4096, 3)), OFFICIAL)
    with pytest.raises(ValueError, match="turns"):
        forward_occupancy(np.zeros((4096, 3, 64)), OFFICIAL, turns=14)
