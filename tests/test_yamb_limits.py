"""``benchmarks/yamb_limits.py`` on a freshly initialised tiny ``jamb_nn`` network: the traces add
up, the forecasts are the values full-turn search uses, the last turn is exact, bad input is one
line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
GAMES = 4


def _checkpoint(path: Path, config: str) -> Path:
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.model.network import YambNet
    from yamblab.training.config import load_run_config

    cfg = load_run_config(ROOT / "configs" / config)
    torch.manual_seed(0)
    net = YambNet(cfg.model)
    return save_checkpoint(path, {"config": cfg.to_yaml(), "model_config": cfg.model.model_dump(),
                                  "ema": net.state_dict(), "iteration": 0, "elapsed": 0.0})


@pytest.fixture(scope="module")
def limits(tmp_path_factory, benchmark_module):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    mod = benchmark_module("yamb_limits")
    path = _checkpoint(tmp_path_factory.mktemp("limits") / "checkpoint.pt", "jamb-cpu.yaml")
    game, net, _ = mod.load(str(path))
    reports, traced, _ = mod.run(net, game, GAMES, seed=3)
    yield mod, path, game, net, reports, traced
    torch.set_num_threads(old)


def test_realised_points_still_to_come(limits):
    mod, _, game, _, reports, traced = limits
    for name, t in traced.items():
        assert np.array_equal(t.start_total[:, 0], np.zeros(GAMES))
        np.testing.assert_array_equal(t.to_go[:, 0], reports[name].scores)     # turn 1: the final score
        assert np.all(np.diff(t.to_go, axis=1) <= 0) and np.all(t.last_points >= 0)
        open_boxes = (t.start_card < 0).reshape(GAMES, game.n_turns, -1).sum(axis=2)
        assert np.array_equal(open_boxes, np.broadcast_to(game.n_turns - np.arange(game.n_turns), open_boxes.shape))
    assert not np.isnan(traced["search"].q_start).any() and np.isnan(traced["policy"].q_start).all()
    # the paired comparison of the grading and the traced column totals agree
    np.testing.assert_allclose(traced["search"].col_total.sum(axis=1) - traced["heuristic"].col_total.sum(axis=1),
                               reports["search"].scores - reports["search"].baseline_scores)


def test_forecasts_are_the_values_search_uses(limits):
    mod, _, game, net, _, traced = limits
    from yamblab.games.yamb.game import BoundaryEncoder
    from yamblab.search.valuation import NetworkValuation

    cards = traced["search"].start_card[:, [0, 20, 51]]
    V = mod.card_values(net, game.rules, cards)
    assert V.shape == (GAMES, 3)
    leaves = NetworkValuation(net).values(BoundaryEncoder(game.rules)(cards.reshape((-1,) + cards.shape[2:])))
    np.testing.assert_allclose(V.ravel(), leaves, rtol=1e-6)


def test_value_errors_on_known_forecasts(benchmark_module):
    mod = benchmark_module("yamb_limits")
    rng = np.random.default_rng(0)
    real = rng.normal(100.0, 20.0, (50, 4)) + np.array([300.0, 200.0, 100.0, 0.0])
    s = mod.value_errors(real + 5.0, real)
    assert s["bias"][0] == pytest.approx(5.0) and s["rmse"][0] == pytest.approx(5.0)
    assert s["rmse_within"] == pytest.approx(0.0, abs=1e-9)
    assert s["explained"][0] == pytest.approx(1.0) and s["slope"][0] == pytest.approx(1.0)
    assert s["rmse_const"] == pytest.approx(float(np.sqrt(((real - real.mean(0)) ** 2).mean())))
    const = np.broadcast_to(real.mean(axis=0), real.shape)          # the constant-per-turn forecast
    c = mod.value_errors(const, real)
    assert c["explained"][0] == pytest.approx(0.0, abs=1e-12) and c["rmse"][0] == pytest.approx(c["rmse_const"])
    half = mod.value_errors(const + 0.5 * (real - const), real)     # spreads the cards too little
    assert half["slope"][0] == pytest.approx(2.0) and half["corr"][0] == pytest.approx(1.0)


def test_announce_figures_add_up(limits):
    mod, _, game, _, _, traced = limits
    r = game.rules
    for t in traced.values():
        f = mod.announce_figures(t)
        np.testing.assert_array_equal(f["upper"] + f["bonus"] + f["middle"] + f["lower"], t.col_total[:, r.announce_column])
        # every announce box is written after announcing it or, unannounced, on a pure roll
        np.testing.assert_array_equal(f["announcements"] + f["pure"], np.full(GAMES, r.n_rows))
        assert not (t.announced & t.pure_fill).any()
        np.testing.assert_array_equal(f["voluntary"] + f["compulsory"], f["announcements"])
        assert np.all(f["failed"] <= f["zeros"]) and f["roll"].sum() == pytest.approx(1.0)
        assert np.all(t.fill_roll >= 1) and np.all(t.fill_roll <= r.max_rolls)
        parts = mod.column_parts(t)
        np.testing.assert_array_equal(parts["total"].sum(axis=1), t.total)


def test_last_turn_is_exact_for_search(limits):
    _, _, game, _, _, traced = limits
    s = traced["search"]
    # an untrained network, yet its last turn is exact: a full card is worth 0 to full-turn search
    np.testing.assert_allclose(s.last_q, s.last_exact, atol=1e-9)
    assert np.all(np.abs(s.last_regret) < 1e-9)
    for t in traced.values():
        assert np.all(t.last_regret > -1e-9) and np.all(t.last_exact >= 0)
        assert np.all(t.last_column >= 0) and not np.isnan(t.last_exact).any()
    # the untrained policy head throws points away on its last turn
    assert traced["policy"].last_regret.sum() > 0


def test_prints_every_section(limits, capsys):
    mod, path, *_ = limits
    mod.main([str(path), "--games", "3", "--seed", "1", "--no-policy-head"])
    out = capsys.readouterr().out
    for head in ("1. VALUES AGAINST OUTCOMES", "2. ANNOUNCE COLUMN", "3. THE LAST TURN", "4. WHERE THE POINTS GO",
                 "5. ONE TURN DEEPER"):
        assert head in out
    assert "policy" not in out.split("3. THE LAST TURN")[1]
    mod.main([str(path), "--games", "2", "--no-policy-head", "--lookahead", "0"])
    assert "5. ONE TURN DEEPER" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        mod.main([str(path), "--lookahead", "-1"])
    assert "--lookahead must be 0 (left out) or a number of boxes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main([str(path), "--lookahead", "53"])
    assert "--lookahead 53: this card has 52 boxes" in capsys.readouterr().err


def test_one_turn_deeper_is_paired_with_full_turn_search(limits):
    mod, _, game, net, reports, _ = limits
    report, search, _ = mod.deeper(net, game, GAMES, 3, 2, reports["search"].scores)
    np.testing.assert_array_equal(report.baseline_scores, reports["search"].scores)
    assert report.diff_mean == pytest.approx(float((report.scores - reports["search"].scores).mean()))
    # every unfinished game has box choices after a last roll (the down column's last boxes
    # come in order, so not every turn has two boxes to choose from)
    assert search.k == 2 and GAMES <= search.revalued <= GAMES * game.n_turns
    assert 0 <= search.changed <= search.revalued


def test_bad_input_is_one_line(tmp_path, benchmark_module):
    mod = benchmark_module("yamb_limits")
    with pytest.raises(SystemExit, match="^error: no checkpoint file at .*missing.pt$"):
        mod.main([str(tmp_path / "missing.pt")])
    yahtzee = _checkpoint(tmp_path / "y.pt", "yahtzee-tiny.yaml")
    with pytest.raises(SystemExit, match="is a yahtzee network; this measures a Yamb card"):
        mod.main([str(yahtzee)])
    free = _checkpoint(tmp_path / "f.pt", "yamb-free-cpu.yaml")
    with pytest.raises(SystemExit, match="single free column, which has an exact oracle"):
        mod.main([str(free)])
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit, match="^error: checkpoint .* is not a yamblab checkpoint"):
        mod.main([str(tmp_path / "junk.pt")])


def test_middle_term_prices(limits):
    mod, _, game, _, _, traced = limits
    from yamblab.games.encoding import decode_yamb_card
    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW

    class Priced:
        """Values a card at 2 points per point of Max and -1 per point of Min on it."""

        def predict_value(self, enc, chunk):
            card = decode_yamb_card(enc, game.rules).astype(np.float64)
            return (2 * np.where(card[:, :, MAX_ROW] >= 0, card[:, :, MAX_ROW], 0).sum(axis=1)
                    - np.where(card[:, :, MIN_ROW] >= 0, card[:, :, MIN_ROW], 0).sum(axis=1))

    rows = mod.middle_term_prices(Priced(), traced["search"])
    got = {(d["box"], d["column"]) for d in rows}
    assert ("Min", "down") not in got          # down fills Min after Ones and Max: the term is complete
    assert ("Max", "free") in got and ("Min", "announce") in got
    for d in rows:
        assert d["price"][0] == pytest.approx(2.0 if d["box"] == "Max" else -1.0)
        assert d["positions"] > 0
        assert (d["worth"][0] >= 0) if d["box"] == "Max" else (d["worth"][0] <= 0)
        assert d["diff"][0] == pytest.approx(d["price"][0] - d["worth"][0])
