"""Yamb agents and the grading entry points."""

import numpy as np
import pytest

from yamblab.agents.base import make_agent
from yamblab.agents.yamb_bots import GreedyAgent, play, row_par
from yamblab.errors import UnknownVariantError
from yamblab.games.yamb.rules import PRESETS, get_preset
from yamblab.games.yamb.scoring import card_total, row_score
from yamblab.games.protocol import make_game
from yamblab.games.yamb.engine import YambBatch
from yamblab.oracle.yamb.grading import grade_yamb, play_scores

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
    g = make_game("yamb", preset="croatian")
    means = {a: play_scores(make_agent(a, CRO), g, 60, seed=4).mean() for a in ("random", "greedy", "heuristic")}
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
        make_game("yamb", preset="klingon")


def test_grade_yamb_summary_is_deterministic_and_paired_with_the_baseline():
    g = make_game("yamb", preset="croatian")
    r1 = grade_yamb(make_agent("random", CRO, seed=3), g, games=40, seed=3, baseline=make_agent("greedy", CRO))
    r2 = grade_yamb(make_agent("random", CRO, seed=3), g, games=40, seed=3, baseline=make_agent("greedy", CRO))
    assert r1.to_dict() == r2.to_dict()
    assert r1.ci[0] < r1.mean < r1.ci[1] and r1.sd > 0 and r1.p90 >= r1.median
    assert not r1.has_regret and r1.to_dict()["regret_mean"] is None      # no oracle for 4 columns
    assert r1.diff_mean == pytest.approx(r1.mean - r1.baseline_mean) and r1.diff_ci[1] < -300
    # further yardsticks on the same dice: the greedy bot's scores given as a yardstick give the
    # baseline's paired difference; the agent against its own scores differs by exactly zero
    r3 = grade_yamb(make_agent("random", CRO, seed=3), g, games=40, seed=3,
                    yardsticks={"greedy": r1.baseline_scores, "self": r1.scores})
    assert r3.versus["greedy"] == pytest.approx((r1.diff_mean, *r1.diff_ci))
    assert r3.versus["self"] == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="yardstick 'short' has 3 scores for 40 games"):
        grade_yamb(make_agent("random", CRO, seed=3), g, games=40, seed=3, yardsticks={"short": [1, 2, 3]})


def test_heuristic_regret_is_small_on_a_down_column():
    down = make_game("yamb", preset="croatian", columns=["down"])
    h = grade_yamb(make_agent("heuristic", down), down, 30, seed=1)
    g = grade_yamb(make_agent("greedy", down), down, 30, seed=1)
    assert 0 <= h.regret_mean < 1.0 < g.regret_mean
    assert sum(g.regret_by_decision.values()) == pytest.approx(g.regret_mean)
    assert sum(g.regret_by_box.values()) == pytest.approx(g.regret_by_decision["box"])


def test_full_turn_search_on_the_column_oracle_plays_with_zero_regret():
    """A single-column game's full-turn search valued by the exact column oracle is optimal."""
    for col in ("down", "up"):
        g = make_game("yamb", preset="croatian", columns=[col])
        rep = grade_yamb(make_agent("search", g, valuation="oracle"), g, 40, seed=2)
        assert rep.regret_mean == pytest.approx(0.0, abs=1e-9)
        opt = grade_yamb(make_agent("oracle", g), g, 40, seed=2)
        assert rep.mean == pytest.approx(opt.mean)          # same dice, same (optimal) play


def test_unique_rows_groups_equal_rows_exactly():
    from yamblab.oracle.yamb.turn import _unique_rows

    rng = np.random.default_rng(4)
    base = rng.normal(size=(5, 30))
    a = base[rng.integers(0, 5, size=40)]
    uniq, inv = _unique_rows(a)
    assert uniq.shape[0] == len({tuple(r) for r in a.tolist()})
    np.testing.assert_array_equal(uniq[inv], a)
    one, inv1 = _unique_rows(a[:1])
    np.testing.assert_array_equal(one[inv1], a[:1])


def test_best_box_over_legal_boxes_equals_the_masked_max():
    from yamblab.oracle.yamb.turn import NEG, _best_box

    rng = np.random.default_rng(5)
    B, C, R, L, n_rolls, smax = 6, 4, 13, 3, 252, 80
    W = rng.normal(size=(B, C, R, smax + 1))
    S = rng.integers(0, smax + 1, size=(n_rolls, R, L))
    legal = rng.random((B, C, R, L)) < 0.2
    legal[0] = False                                   # a game with no legal box at all
    dense = np.where(legal[..., None], W[:, :, np.arange(R)[:, None, None], S.transpose(1, 2, 0)], NEG)
    np.testing.assert_array_equal(_best_box(W, S, legal), dense.max(axis=(1, 2)))
    assert (_best_box(W, S, legal)[0] == NEG).all()


def test_grade_yamb_splits_the_score_by_column_and_counts_the_announce_column():
    g = make_game("yamb", preset="croatian")
    r = grade_yamb(make_agent("greedy", CRO), g, games=30, seed=4, column_optima={"free": 292.5, "hand": 1.0})
    assert list(r.by_column) == list(CRO.columns)
    # the columns' totals (bonuses and middle terms inside) add up to the card's, game by game
    assert sum(r.by_column.values()) == pytest.approx(r.mean)
    assert r.column_optima == {"free": 292.5}            # a column not on the card is not reported
    # the announce column's boxes scored above 0, recounted from the final cards
    b = g.new_batch(30, seed=4)
    bot = make_agent("greedy", CRO)
    bot.reset(b)
    while not b.done.all():
        b.step(bot.act(b))
    assert r.announce_fill_rate == pytest.approx(np.mean(b.card[:, CRO.announce_column, :CRO.n_rows] > 0))
    text = r.format()
    assert "by column  down" in text and "free " in text and "(alone, optimal: 292.5)" in text
    assert "announce boxes scored above 0" in text
    down = make_game("yamb", preset="croatian", columns=["down"])
    one = grade_yamb(make_agent("greedy", down.rules), down, games=5, seed=0)
    assert one.announce_fill_rate is None and "by column" not in one.format()
