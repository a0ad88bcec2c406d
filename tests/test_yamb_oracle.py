"""The exact column oracle (down/up), its advice and regret, and the free-column state count."""

import numpy as np
import pytest

from yamblab.errors import IllegalActionError, UnknownVariantError, UnreachablePositionError
from yamblab.games.dice6 import dice_tables
from yamblab.games.yamb.rules import get_preset
from yamblab.oracle.yamb.build import build_column_oracle
from yamblab.games.yamb.engine import YambBatch
from yamblab.oracle.yamb.column import (ColumnOracle, ColumnOracleAgent, decision_regrets,
                                        free_column_state_count)

CRO = get_preset("croatian")


@pytest.fixture(scope="module")
def down():
    return ColumnOracle(CRO, "down")


def test_value_is_a_sum_when_rows_are_independent():
    # No upper bonus and the middle term clamped: the lower rows add independently, so the
    # column value minus its upper/middle part equals the single-turn values of its rows.
    from yamblab.agents.yamb_bots import row_par

    r = CRO.replace(upper_bonus=0)
    o = ColumnOracle(r, "down")
    par = row_par(r)
    lower = sum(par[8:])
    upper = sum(par[:6])
    # The coupled part (Ones, Max, Min) is at least E[ones] * (E[max] - E[min]), what the
    # three rows played independently (each for itself) earn.
    coupled = o.value - lower - upper
    assert coupled >= par[0] * (par[6] - par[7]) - 1e-9
    assert coupled < 60


def test_down_and_up_values(down):
    assert down.value == pytest.approx(135.1851, abs=1e-3)
    assert build_column_oracle("croatian", "up") == pytest.approx(135.1851, abs=1e-3)
    # Without the clamp the order matters: up sees Max - Min before choosing Ones.
    r = CRO.replace(middle_clamp=False)
    assert ColumnOracle(r, "up").value > ColumnOracle(r, "down").value + 0.01


def test_state_values_at_the_end_and_bonus(down):
    # Last box (Yamb) open: the value is the single-turn expectation of the Yamb row.
    from yamblab.agents.yamb_bots import row_par

    col = [3, 6, 9, 12, 15, 18, 25, 10, 45, 22, 48, 56, -1]
    assert down.state_value(col) == pytest.approx(row_par(CRO)[12], abs=1e-9)
    full = [3, 6, 9, 12, 15, 18, 25, 10, 45, 22, 48, 56, 0]
    assert down.state_value(full) == 0.0
    # Before Sixes with 50 already: 10 more points (two sixes) earn the 30 bonus.
    near = [5, 10, 15, 20, -1, -1, -1, -1, -1, -1, -1, -1, -1]
    far = [0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1]
    assert down.state_value(near) > down.state_value(far) + 20


def test_advice_and_regret(down):
    col = [-1] * 13
    # Roll 1 with four ones: keep the ones (hold mask of the four ones) for the Ones box.
    q = down.action_values(col, [1, 1, 1, 1, 6], 1)
    best, v = down.advice(col, [1, 1, 1, 1, 6], 1)
    assert best in ("hold:15", "hold:31") or q[best] == pytest.approx(q["hold:15"])
    assert down.regret(col, [1, 1, 1, 1, 6], 1, "hold:15") == pytest.approx(0.0, abs=1e-9)
    assert down.regret(col, [1, 1, 1, 1, 6], 1, "hold:0") > 0.5
    assert down.regret(col, [1, 1, 1, 1, 6], 1, "score") > 0
    # On the last roll only scoring is possible, with zero regret.
    assert list(down.action_values(col, [1, 1, 2, 3, 4], 3)) == ["score"]
    with pytest.raises(IllegalActionError):
        down.regret(col, [1, 1, 2, 3, 4], 3, "hold:3")


def test_bad_positions(down):
    with pytest.raises(UnreachablePositionError, match="fills rows in order"):
        down.state_value([-1, 4] + [-1] * 11)
    with pytest.raises(UnreachablePositionError, match="no roll scores 7"):
        down.state_value([7] + [-1] * 12)
    with pytest.raises(UnreachablePositionError):
        down.action_values([-1] * 13, [1, 2, 3, 4, 5], 4)
    with pytest.raises(UnknownVariantError, match="free"):
        ColumnOracle(CRO, "free")
    with pytest.raises(UnknownVariantError):
        build_column_oracle("nope", "down")


def test_oracle_agent_plays_to_its_value(down):
    # Optimal play in the engine averages the oracle's value (300 games, ~4 SE margin).
    b = YambBatch(300, down.rules, seed=123)
    agent = ColumnOracleAgent(down)
    regret = np.zeros(b.n)
    while not b.done.all():
        a = agent.act(b)
        regret += decision_regrets(down, b, a)
        b.step(a)
    assert np.allclose(regret, 0.0, atol=1e-9)
    se = b.total.std() / np.sqrt(b.n)
    assert abs(b.total.mean() - down.value) < 4 * se


def test_six_dice_oracle_small_check():
    o = ColumnOracle(get_preset("six_dice"), "down")
    t = dice_tables(6)
    assert o.tables.n_rolls == t.n_rolls == 462
    # The last turn of the column has 5 rolls: advice offers holds at roll 4.
    col = [3, 6, 9, 12, 15, 18, 25, 10, 46, 38, 48, 56, -1]   # straight by roll: 46
    assert "hold:0" in o.action_values(col, [1, 2, 3, 4, 5, 6], 4)
    assert o.value > 200


def test_free_column_estimate():
    est = free_column_state_count(CRO)
    assert est["lower_masks"] == 32
    assert est["states"] == est["core_states"] * 32
    assert est["states"] > 10 * ColumnOracle(CRO, "up").n_states
