"""The exact free-column oracle: brute force on reduced columns, and free ≥ down, up."""

import math
from functools import lru_cache

import numpy as np
import pytest
from dice_brute import turn_value

from yamblab.errors import ConfigError, IllegalActionError, UnreachablePositionError
from yamblab.games.yamb.rules import get_preset
from yamblab.games.yamb.scoring import column_parts, row_score
from yamblab.oracle.yamb.column import ColumnOracle
from yamblab.oracle.yamb.free import FreeColumnOracle, free_column_layout

CRO = get_preset("croatian")
SIX = get_preset("six_dice")
# A full croatian column (every score a roll can make in its row).
FULL = [3, 6, 9, 12, 15, 18, 25, 10, 45, 22, 48, 56, 0]


def _brute(rules, scores=None):
    """Independent expectimax over dice outcomes, every hold mask, every open row.

    Returns the expected final column total minus the current one (reference scoring:
    ``row_score`` and ``column_parts``), or with ``scores=None`` that function of the scores. Filled combination rows are memoised as 0: they only
    add to the total and nothing later depends on them.
    """
    R, n = rules.n_rows, rules.n_dice

    def key(state):
        return tuple(0 if (c >= 8 and x >= 0) else x for c, x in enumerate(state))

    @lru_cache(maxsize=None)
    def V(state):
        open_ = [c for c in range(R) if state[c] < 0]
        if not open_:
            return 0.0
        cur = column_parts(rules, state)["total"]
        L = rules.last_turn_rolls if len(open_) == 1 else rules.rolls

        def score_best(dice, roll):
            best = -math.inf
            for c in open_:
                s2 = list(state)
                s2[c] = row_score(rules, c, dice, roll)
                best = max(best, column_parts(rules, s2)["total"] - cur + V(key(s2)))
            return best

        return turn_value(n, L, score_best)

    def value(s):
        return V(key(tuple(int(x) for x in s)))

    return value if scores is None else value(scores)


@pytest.mark.parametrize("rules, start", [
    # three combination rows open (the order of Full, Poker, Yamb is free)
    (CRO, FULL[:10] + [-1, -1, -1]),
    # Ones and Sixes open, Max - Min known, the upper bonus in reach
    (CRO, [-1, 6, 9, 12, 15, -1, 25, 10, 45, 22, 48, 56, 0]),
    # Max and Trips open, no clamp: Ones × (Max - Min) may be negative
    (CRO.replace(middle_clamp=False), [1, 6, 9, 12, 15, 18, -1, 24, 45, -1, 48, 56, 0]),
    # six dice: 5 rolls on the last turn, straights scored by the roll that made them
    (SIX, [3, 6, 9, 12, 15, 18, 25, 10, -1, 29, 52, 56, -1]),
])
def test_matches_brute_force(rules, start):
    o = FreeColumnOracle(rules, start=start, n_threads=1)
    assert o.value == pytest.approx(_brute(rules, start), abs=1e-9)


def test_middle_term_states_match_brute_force():
    # Ones and Min open with Max known: 26 Min values and 6 Ones values as later states.
    start = [-1, 6, 9, 12, 15, 18, 25, -1, 45, 22, 48, 56, 0]
    o = FreeColumnOracle(CRO, start=start, n_threads=1)
    brute = _brute(CRO)
    assert o.value == pytest.approx(brute(start), abs=1e-9)
    for ones, mn in ((2, -1), (-1, 11), (0, -1)):
        s = list(start)
        s[0], s[7] = ones, mn
        assert o.state_value(s) == pytest.approx(brute(s), abs=1e-9)


@pytest.fixture(scope="module")
def down_up():
    return ColumnOracle(CRO, "down"), ColumnOracle(CRO, "up")


@pytest.mark.parametrize("k", [1, 3, 6])
def test_free_at_least_down_and_up(down_up, k):
    down, up = down_up
    R = CRO.n_rows
    pre = FULL[:R - k] + [-1] * k          # a down column with k rows left
    suf = [-1] * k + FULL[k:]              # an up column with k rows left
    fd = FreeColumnOracle(CRO, start=pre, n_threads=1).value
    fu = FreeColumnOracle(CRO, start=suf, n_threads=1).value
    assert fd >= down.state_value(pre) - 1e-9
    assert fu >= up.state_value(suf) - 1e-9
    if k == 1:      # one row left: no order to choose
        assert fd == pytest.approx(down.state_value(pre), abs=1e-9)
        assert fu == pytest.approx(up.state_value(suf), abs=1e-9)
    else:
        assert fd > down.state_value(pre) + 1 and fu > up.state_value(suf) + 1


def test_partial_solves_agree_and_advice_is_consistent():
    start = [3, 6, -1, 12, 15, 18, -1, 10, 45, 22, -1, -1, -1]
    big = FreeColumnOracle(CRO, start=start, n_threads=1, chunk=7)
    sub = [3, 6, 9, 12, 15, 18, -1, 10, 45, 22, -1, 48, -1]
    assert big.state_value(sub) == pytest.approx(FreeColumnOracle(CRO, start=sub).value, abs=1e-9)
    # The value before the first roll is the expectation over rolls of the best action.
    from yamblab.games.dice6 import dice_tables

    t = dice_tables(5)
    total = 0.0
    for r, hist in enumerate(t.rolls):
        dice = [f + 1 for f in range(6) for _ in range(int(hist[f]))]
        total += t.p_roll_given_keep[0, r] * big.advice(start, dice, 1)[1]
    assert total == pytest.approx(big.value, abs=1e-9)
    q = big.action_values(start, [6, 6, 6, 6, 2], 3)
    assert set(q) == {"score:threes", "score:max", "score:full", "score:poker", "score:yamb"}
    assert big.advice(start, [6, 6, 6, 6, 2], 3)[0] == "score:poker"
    assert big.regret(start, [6, 6, 6, 6, 2], 2, "hold:15") == 0.0  # hold the four sixes
    with pytest.raises(IllegalActionError):
        big.regret(start, [6, 6, 6, 6, 2], 3, "hold:1")


def test_bad_input():
    o = FreeColumnOracle(CRO, start=FULL[:12] + [-1])
    with pytest.raises(UnreachablePositionError):
        o.state_value(FULL[:11] + [-1, -1])        # outside the solved part
    with pytest.raises(UnreachablePositionError):
        FreeColumnOracle(CRO, start=[7] + [-1] * 12)  # no roll scores 7 in Ones
    with pytest.raises(UnreachablePositionError):
        o.state_value(FULL[:5])
    with pytest.raises(UnreachablePositionError):
        o.action_values(FULL[:12] + [-1], [1, 1, 1, 1, 1], 4)
    with pytest.raises(ConfigError):
        FreeColumnOracle(CRO, start=FULL[:12] + [-1], chunk=0)
    assert o.state_value(FULL) == 0.0


def test_layout_counts_cover_the_reachable_states():
    from yamblab.oracle.yamb.column import free_column_state_count

    lay = free_column_layout("croatian")
    assert lay["lanes"] == 18_964_672 >= free_column_state_count("croatian")["states"]
    assert lay["masks"] == 8192


def test_oracle_agent_plays_to_its_value():
    # A 9-row card without the upper bonus (a whole game solves in well under a second):
    # optimal play in the engine (its own scoring) averages the oracle's value.
    from yamblab.games.yamb.rules import FIXED_ROWS
    from yamblab.games.yamb.engine import YambBatch
    from yamblab.oracle.yamb.free import FreeColumnOracleAgent

    rules = CRO.replace(rows=FIXED_ROWS + ("yamb",), upper_bonus=0)
    o = FreeColumnOracle(rules, n_threads=1)
    b = YambBatch(300, o.rules, seed=11)
    agent = FreeColumnOracleAgent(o)
    while not b.done.all():
        b.step(agent.act(b))
    se = b.total.std() / np.sqrt(b.n)
    assert abs(b.total.mean() - o.value) < 4 * se


def test_cli_entry_point_routes_free(monkeypatch):
    import yamblab.oracle.yamb.free as yf
    from yamblab.errors import UnknownVariantError
    from yamblab.oracle.yamb.build import build_column_oracle

    class Stub:
        def __init__(self, rules):
            self.value = 1.5 if rules.name == "croatian" else -1.0

    monkeypatch.setattr(yf, "FreeColumnOracle", Stub)
    assert build_column_oracle("croatian", "free") == 1.5
    with pytest.raises(UnknownVariantError):
        build_column_oracle("croatian", "diagonal")


@pytest.mark.slow
def test_cli_grades_free_column_search_on_the_oracle_with_zero_regret():
    """`yamblab grade --game yamb --columns free --agent search --valuation oracle --json`."""
    import json

    from typer.testing import CliRunner

    from yamblab.cli.main import app

    res = CliRunner().invoke(app, ["grade", "--game", "yamb", "--columns", "free", "--agent", "search",
                                   "--valuation", "oracle", "--games", "10", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["regret_mean"] == 0.0 and d["rules"] == "croatian[free]"
