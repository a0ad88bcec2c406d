"""Yamb agents and the grading entry points."""

import numpy as np
import pytest

from yamblab.agents.yamb_bots import GreedyAgent, make_agent, play, row_par
from yamblab.errors import UnknownVariantError
from yamblab.games.yamb.rules import PRESETS, card_total, get_preset, row_score
from yamblab.platform.yamb_report import column_regret, grade_yamb, play_games
from yamblab.games.yamb.engine import YambBatch

CRO = get_preset("croatian")


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("agent", ["greedy", "heuristic"])
def test_planners_play_legal_full_games(preset, agent):
    r = get_preset(preset)
    b = play(make_agent(agent, r), YambBatch(3, r, seed=9))   # the engine refuses illegal actions
    assert b.done.all() and (b.card >= 0).all()
    for i in range(b.n):
        assert b.total[i] == card_total(r, b.card[i].tolist())


def test_agents_rank_as_expected_on_the_same_dice():
    means = {a: play_games(a, "croatian", 60, seed=4).mean() for a in ("random", "greedy", "heuristic")}
    assert means["random"] < 200 < means["greedy"] < means["heuristic"]


def test_greedy_scores_the_most_points_on_the_last_roll():
    b = YambBatch(1, CRO, seed=0)
    card = np.full((4, 13), -1, dtype=np.int16)
    card[:, :12] = 10
    card[:, [0, 6, 7]] = [[1, 20, 10]] * 4          # Ones, Max, Min filled everywhere
    card[2, 12] = -1                                 # free/Yamb open
    card[2, 11] = -1                                 # free/Poker open
    b.core.set_state(0, card, [6, 6, 6, 6, 6], 10, 3, -1)
    a = GreedyAgent(CRO).act(b)[0]
    legal = np.flatnonzero(b.legal_actions()[0, :b.n_placements])
    pts = {int(x): row_score(CRO, int(x) % 13, [6] * 5, 3) for x in legal}
    assert pts[int(a)] == max(pts.values()) == 80   # free/Yamb: 5 × 6 + 50


def test_row_par_values():
    par = row_par(CRO)
    assert par[5] == pytest.approx(6 * par[0], rel=1e-12)   # keep-all-of-a-face, scaled
    assert 2.0 < par[0] < 2.2                              # E[#ones] in 3 rolls ≈ 2.11
    assert par[6] > 20 and par[7] < 14


def test_unknown_agent_and_preset():
    with pytest.raises(UnknownVariantError, match="'alphazero'.*heuristic"):
        make_agent("alphazero", CRO)
    with pytest.raises(UnknownVariantError, match="presets"):
        grade_yamb("random", "klingon", games=2)


def test_grade_yamb_summary_is_deterministic():
    g1 = grade_yamb("random", "croatian", games=40, seed=3, regret_games=10)
    g2 = grade_yamb("random", "croatian", games=40, seed=3, regret_games=10)
    assert g1 == g2
    lo, hi = g1["ci95"]
    assert lo < g1["mean"] < hi and g1["sd"] > 0 and g1["p90"] >= g1["median"]
    reg = g1["column_regret"]
    assert reg["oracle_value"] == pytest.approx(135.1851, abs=1e-3) and reg["mean_regret"] > 10


def test_heuristic_regret_is_small_on_a_down_column():
    h = column_regret("heuristic", "croatian", 30, seed=1)
    g = column_regret("greedy", "croatian", 30, seed=1)
    assert 0 <= h["mean_regret"] < 1.0 < g["mean_regret"]
