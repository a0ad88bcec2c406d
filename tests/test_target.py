"""The target-score kernel against a brute-force scalar recursion, and its cache and advice."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from yamblab.errors import DamagedFileError, UnreachablePositionError
from yamblab.games.dice import N_SUB_KEEPS, P_ROLL, P_ROLL_GIVEN_KEEP, ROLLS, SUB_KEEPS
from yamblab.games.yahtzee.rules import (OFFICIAL, BoundaryState, YahtzeeRules, legal_boxes,
                                         score_box)
from yamblab.oracle.yahtzee import _target
from yamblab.oracle.yahtzee.target import TargetTable

S = 80


def _reference(rules: YahtzeeRules, S: int):
    """P(at least s more points), s = 0..S, by timpalpant/yahtzee's plain recursion on the rules module."""
    hists = [tuple(int(c) for c in r) for r in ROLLS]

    @lru_cache(maxsize=None)
    def value(state: BoundaryState) -> np.ndarray:
        out = np.zeros(S + 1)
        out[0] = 1.0
        if state.is_terminal:
            return out
        F = np.zeros((252, S + 1))
        for r, h in enumerate(hists):
            for b in legal_boxes(state, h, rules):
                pts, nxt = score_box(state, h, b, rules)
                v = value(nxt)
                shifted = np.ones(S + 1)
                shifted[pts:] = v[: S + 1 - pts] if pts <= S else shifted[pts:]
                F[r] = np.maximum(F[r], shifted)
        G = F
        for _ in range(2):
            K = P_ROLL_GIVEN_KEEP @ G                        # (462, S+1)
            G = np.stack([K[SUB_KEEPS[r, :N_SUB_KEEPS[r]]].max(axis=0) for r in range(252)])
            G = np.maximum(G, F)
        return P_ROLL @ G

    return value


@pytest.mark.parametrize("rules, state", [
    (OFFICIAL, BoundaryState(filled=0x1FFF & ~((1 << 5) | (1 << 12)), upper=40, yahtzee_fifty=True)),
    (YahtzeeRules.parse("free"), BoundaryState(filled=0x1FFF & ~((1 << 11) | (1 << 8)), upper=63)),
    (YahtzeeRules.parse("none,no-upper-bonus"), BoundaryState(filled=0x1FFF & ~((1 << 0) | (1 << 10)), upper=0)),
])
def test_kernel_matches_the_brute_force_recursion(rules, state):
    table, off, wid = _target.solve(rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus, S, 0, None, 11)
    t = TargetTable(rules, S, table, off, wid)
    ref = _reference(rules, S)(state)
    got = np.array([t.probability(state, s) for s in range(S + 1)])
    assert np.allclose(got, ref, atol=2e-6), np.abs(got - ref).max()
    assert got[0] == 1.0 and 0 < got[30] < 1          # a real distribution, not all 0/1
    # the one-target turn pass (advice, simulation) agrees with the stored start-of-turn vector
    s = np.array([[state.mask12(), state.ystate, state.upper]], dtype=np.int64)
    for need in (1, 25, 60, S):
        _, _, start = _target.turn_probabilities(table, off, wid, rules.joker_code, rules.upper_bonus,
                                                 rules.yahtzee_bonus, s, np.array([need], dtype=np.int64))
        assert start[0] == pytest.approx(ref[need], abs=2e-6)


def test_advice_ranks_by_probability_and_differs_from_expected_score(tmp_path):
    rules = OFFICIAL
    table, off, wid = _target.solve(rules.joker_code, True, True, S, 0, None, 11)
    t = TargetTable(rules, S, table, off, wid)
    # Sixes and Chance open, 40 in the upper section; a pair of sixes and junk, one roll left
    state = BoundaryState(filled=0x1FFF & ~((1 << 5) | (1 << 12)), upper=40, yahtzee_fifty=True)
    ranked = t.advise(state, [6, 6, 1, 2, 3], 1, 60)
    assert ranked[0].loss == 0 and all(a.loss >= 0 for a in ranked)
    probs = [a.probability for a in ranked]
    assert probs == sorted(probs, reverse=True)
    assert {a.kind for a in ranked} == {"box", "keep"}
    with pytest.raises(UnreachablePositionError, match="answers up to"):
        t.advise(state, [6, 6, 1, 2, 3], 1, S + 1)
    # the cache (on a small stand-in table): a round trip, then a damaged file is refused
    t = TargetTable(rules, S, np.linspace(0, 1, 5000, dtype=np.float32), off[:12288] * 0, wid * 0 + 1)
    path = t.save(tmp_path / "t.npz")
    back = TargetTable.load(path, rules, S)
    assert np.array_equal(back.data, t.data)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DamagedFileError):
        TargetTable.load(path, rules, S)
    with pytest.raises(DamagedFileError, match="built for"):
        TargetTable.load(t.save(tmp_path / "u.npz"), rules, S + 1)


def test_widths_bound_the_points_left():
    off, wid, size = _target.layout(True, True, 400)
    assert wid[4095 * 3 + 1] == 1 and wid[0] == 401          # a full card; a new game (capped)
    assert _target.max_points_left(4095, 0, True, True) == 50  # only the Yahtzee box open
    assert size == int((wid * np.array([min(63, sum(5 * (f + 1) for f in range(6) if (m >> f) & 1)) + 1
                                        for m in range(4096) for _ in range(3)])).sum())


def test_served_target_advice_and_its_mistakes(official_table):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from yamblab.service.serve import create_app
    from yamblab.service.service import Service

    table, off, wid = _target.solve(0, True, True, S, 0, None, 11)
    t = TargetTable(OFFICIAL, S, table, off, wid)
    client = TestClient(create_app(Service(["forced"], yamb_presets=(), target=t)), raise_server_exceptions=False)
    # a table of another variant is refused by name (the same numbers, labelled 'free')
    other = TestClient(create_app(Service(["forced"], yamb_presets=(),
                                          target=TargetTable(YahtzeeRules.parse("free"), S, table, off, wid))))
    card = {b: 0 for b in ("ones", "twos", "threes", "fours", "fives", "three_of_a_kind", "four_of_a_kind",
                           "full_house", "small_straight", "large_straight")}
    card |= {"ones": 3, "twos": 6, "threes": 9, "fours": 12, "fives": 10, "yahtzee": 50}
    so_far = 90
    pos = {"card": card, "dice": [6, 6, 1, 2, 3], "rolls_left": 1, "target": so_far + 60}
    r = client.post("/api/yahtzee/target", json=pos)
    assert r.status_code == 200, r.text
    acts = r.json()["actions"]
    state = BoundaryState(filled=0x1FFF & ~((1 << 5) | (1 << 12)), upper=40, yahtzee_fifty=True)
    ref = t.advise(state, [6, 6, 1, 2, 3], 1, 60)
    assert [a["label"] for a in acts] == [a.label for a in ref]
    assert acts[0]["probability"] == pytest.approx(ref[0].probability)
    assert all("expected_final" in a for a in acts)
    r = other.post("/api/yahtzee/target", json=pos)
    assert r.status_code == 400 and "built for rules free, not forced" in r.json()["detail"]
    for bad, words in [({"target": so_far + S + 1}, "answers up to"), ({"rules": "free"}, "not served here"),
                       ({"target": -5}, None), ({"dice": [6, 6, 1, 2]}, "exactly 5")]:
        r = client.post("/api/yahtzee/target", json=pos | bad)
        assert 400 <= r.status_code < 500 and (words is None or words in r.json()["detail"])
