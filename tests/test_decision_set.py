"""The solver-graded decision set: its action values against the oracle's grading, its counts,
the losses of known policies, and its cache."""

from __future__ import annotations

import numpy as np
import pytest

from yamblab.agents.base import make_agent
from yamblab.errors import ConfigError, YamblabError
from yamblab.games.protocol import make_game
from yamblab.search import decision_set as ds
from yamblab.search.decision_set import DECISION_KINDS, DecisionSet, decision_set, solver_losses

GAMES = 20


@pytest.fixture(scope="module")
def yahtzee():
    return make_game("yahtzee", "forced")


@pytest.fixture(scope="module")
def dset(yahtzee, official_table):
    return decision_set(yahtzee, GAMES, seed=5, cache=False)


class StubNet:
    """A "network" whose predict returns fixed priors and values."""

    def __init__(self, prior, value):
        self.prior, self.value = np.asarray(prior, np.float32), np.asarray(value, np.float64)
        self.calls = 0

    def predict(self, enc, chunk=8192):
        assert len(enc) == len(self.prior)
        self.calls += 1
        return self.prior, self.value


def replay(game, d: DecisionSet, visit):
    """Replay the oracle's games of ``d`` with the oracle agent; ``visit(batch, rows, live)`` is
    called before every step with the set's row of each live game."""
    agent = make_agent("search", game, valuation="oracle")
    batch = game.new_batch(d.games, seed=d.seed)
    agent.reset(batch)
    row = 0
    while not batch.done.all():
        live = np.flatnonzero(~batch.done)
        rows = row + np.arange(live.size)
        # the set's positions are exactly these games' positions, in this order
        assert (d.game_index[rows] == live).all()
        assert (d.encoded.dice[rows] == game.encode(batch).dice[live]).all()
        visit(batch, rows, live)
        row += live.size
        batch.step(agent.act(batch))
    assert row == len(d)
    return batch


def test_action_values_match_the_oracle_grading(yahtzee, dset, official_table):
    from yamblab.oracle.yahtzee.grading import Grader

    grader = Grader(official_table)
    rng = np.random.default_rng(0)
    checked = [0]
    last_box = {}

    def visit(batch, rows, live):
        legal = batch.legal_actions()
        for _ in range(3):                                   # three random legal actions per game
            acts = np.zeros(batch.n, np.int64)
            for i in live:
                acts[i] = rng.choice(np.flatnonzero(legal[i]))
            regret, _ = grader.regrets(batch, acts)
            shared = yahtzee.to_shared(acts[live])
            mine = dset.value[rows] - dset.q[rows, shared]
            np.testing.assert_allclose(mine, regret[live], rtol=0, atol=1e-9)
            checked[0] += live.size
        last = live[(batch.turn[live] == 12) & (batch.rolls_left[live] == 0)]
        for i, r in zip(live, rows):
            if i in last:
                last_box[int(i)] = (r, int(batch.total[i]))

    final = replay(yahtzee, dset, visit)
    assert checked[0] == 3 * len(dset)
    # the last decision of a game is worth exactly the points its box scores (bonuses included)
    assert len(last_box) > 0
    for g, (r, before) in last_box.items():
        assert dset.value[r] == pytest.approx(final.total[g] - before, abs=1e-9)
    # the set's values are the oracle's own: q is -inf exactly where illegal
    assert (np.isfinite(dset.q) == dset.encoded.legal).all()
    np.testing.assert_array_equal(dset.value, dset.q.max(axis=1))


def test_first_position_value_is_the_new_game_value_on_average_over_the_first_roll(yahtzee, dset, official_table):
    from yamblab.games.dice import P_ROLL, roll_faces
    from yamblab.games.yahtzee.game import encode_yahtzee_positions
    from yamblab.search.expectimax import oracle_position_values

    rules = yahtzee.rules
    first = np.array([np.flatnonzero(dset.game_index == g)[0] for g in range(GAMES)])
    assert (dset.kind[first] == 0).all()
    # the set's value of a game's first position is the oracle's value of that position ...
    np.testing.assert_allclose(dset.value[first], oracle_position_values(
        ds._take_encoded(dset.encoded, first), rules, official_table), rtol=0, atol=1e-9)
    # ... whose average over the 252 first rolls is the table's new-game value (same footing:
    # points still to come, this turn's included)
    dice = np.array([roll_faces(r) for r in range(252)])
    enc = encode_yahtzee_positions(np.full((252, 13), -1), np.zeros(252, np.int64), dice, np.full(252, 2), rules)
    v = oracle_position_values(enc, rules, official_table)
    assert float(P_ROLL @ v) == pytest.approx(official_table.new_game_value, abs=1e-9)
    assert abs(dset.value[first].mean() - official_table.new_game_value) < 15


def test_counts_kinds_and_games(dset):
    n = len(dset)
    assert 35 * GAMES <= n <= 39 * GAMES                    # about 37 positions per Yahtzee game
    assert set(np.unique(dset.kind)) == {0, 1, 2}
    assert np.array_equal(np.unique(dset.game_index), np.arange(GAMES))
    assert dset.q.shape == (n, 208) and dset.q.dtype == np.float64
    assert dset.value.dtype == np.float64 and dset.kind.dtype == np.int8 and dset.game_index.dtype == np.int32
    assert len(dset.encoded) == n and dset.encoded.legal.shape == (n, 208)
    per_game = np.bincount(dset.game_index)
    assert (per_game >= 13).all() and (per_game <= 39).all()
    assert (np.bincount(dset.game_index[dset.kind == 0]) == 13).all()     # one first keep per turn
    # rolls left as the network sees them match the kind
    rl = dset.encoded.state[:, :6].argmax(axis=1)
    np.testing.assert_array_equal(dset.kind, ds.kinds_of(rl))
    assert dset.label == "yahtzee forced" and len(dset.checksum) == 16


def test_optimal_policy_and_exact_values_have_zero_loss(dset):
    n = len(dset)
    prior = np.zeros((n, 208))
    prior[np.arange(n), np.argmax(dset.q, axis=1)] = 1.0
    out = solver_losses(StubNet(prior, dset.value), dset)
    for k in ("first_keep", "second_keep", "box", "all"):
        assert out.metrics[f"{k}.expected_regret"] == pytest.approx(0.0, abs=1e-9)
        assert out.metrics[f"{k}.argmax_regret"] == pytest.approx(0.0, abs=1e-9)
        assert out.metrics[f"{k}.agreement"] == 1.0
        assert out.metrics[f"{k}.cross_entropy"] == pytest.approx(0.0, abs=1e-6)
        assert out.metrics[f"{k}.value_rmse"] == 0.0 and out.metrics[f"{k}.value_bias"] == 0.0
    assert out.metrics["all.positions"] == n
    assert sum(out.metrics[f"{k}.positions"] for k in DECISION_KINDS) == n
    assert out.metrics["policy_regret"] == pytest.approx(0.0, abs=1e-9)
    assert out.metrics["decisions_per_game"] == pytest.approx(n / GAMES)
    assert out.per_game["disagreements"].sum() == 0


def test_uniform_policy_has_the_hand_computed_losses(dset):
    legal = dset.encoded.legal
    n = len(dset)
    prior = legal / legal.sum(axis=1, keepdims=True)
    value = dset.value + 2.0 + (dset.game_index % 3)                      # errors 2, 3, 4 points
    out = solver_losses(StubNet(prior, value), dset)
    pos = ds.position_losses(prior.astype(np.float32), value, dset)
    for i in (0, 1, 2, n // 2, n - 1):
        acts = np.flatnonzero(legal[i])
        qs = dset.q[i, acts]
        assert pos["expected_regret"][i] == pytest.approx(qs.max() - qs.mean(), abs=1e-4)
        # ties in the prior go to the first legal action
        assert pos["argmax_regret"][i] == pytest.approx(qs.max() - qs[0], abs=1e-9)
        n_opt = int((qs >= qs.max() - 1e-9).sum())
        assert pos["cross_entropy"][i] == pytest.approx(np.log(len(acts) / n_opt), abs=1e-5)
    assert out.metrics["all.expected_regret"] > 1.0
    assert out.metrics["all.agreement"] < 1.0
    err = value - dset.value
    assert out.metrics["all.value_bias"] == pytest.approx(err.mean())
    assert out.metrics["all.value_rmse"] == pytest.approx(np.sqrt(np.mean(err ** 2)))
    # per-game sums agree with the metrics
    pg = out.per_game
    assert all(a.shape == (GAMES,) and a.dtype == np.float64 for a in pg.values())
    assert pg["policy_regret"].mean() == pytest.approx(out.metrics["policy_regret"], rel=1e-12)
    assert pg["argmax_regret"].mean() == pytest.approx(out.metrics["argmax_regret"], rel=1e-12)
    assert out.metrics["policy_regret"] == pytest.approx(
        out.metrics["all.expected_regret"] * out.metrics["decisions_per_game"], rel=1e-12)
    assert pg["disagreements"].sum() == pytest.approx(n * (1 - out.metrics["all.agreement"]))
    assert pg["cross_entropy"].sum() == pytest.approx(n * out.metrics["all.cross_entropy"], rel=1e-9)
    np.testing.assert_allclose(pg["value_sq_error"], (2.0 + np.arange(GAMES) % 3) ** 2, rtol=1e-12)
    assert out.seconds >= 0 and out.metrics["seconds"] == out.seconds


def test_a_suboptimal_policy_is_charged_its_regret(dset):
    legal, q = dset.encoded.legal, dset.q
    n = len(dset)
    worst = np.argmin(np.where(legal, q, np.inf), axis=1)
    prior = np.zeros((n, 208))
    prior[np.arange(n), worst] = 1.0
    out = solver_losses(StubNet(prior, dset.value), dset)
    gap = dset.value - q[np.arange(n), worst]
    assert out.metrics["all.argmax_regret"] == pytest.approx(gap.mean())
    assert out.metrics["all.expected_regret"] == pytest.approx(gap.mean())
    has_worse = (q >= dset.value[:, None] - 1e-9).sum(axis=1) < legal.sum(axis=1)
    assert out.metrics["all.agreement"] == pytest.approx(1 - has_worse.mean())
    assert out.metrics["all.cross_entropy"] == pytest.approx(-np.log(1e-12) * has_worse.mean(), rel=1e-9)


def test_cache_round_trip_and_damage(yahtzee, official_table, tmp_path, monkeypatch):
    a = decision_set(yahtzee, 6, seed=9, cache=tmp_path)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and yahtzee.digest in files[0].name

    def no_build(*_, **__):
        raise AssertionError("the cached set should have been loaded")

    monkeypatch.setattr(ds, "build_decision_set", no_build)
    b = decision_set(yahtzee, 6, seed=9, cache=tmp_path)
    assert b.checksum == a.checksum and len(b) == len(a)
    np.testing.assert_array_equal(b.q, a.q)
    np.testing.assert_array_equal(b.encoded.columns, a.encoded.columns)
    monkeypatch.undo()

    # damaged contents with the old checksum: refused, naming the file
    with np.load(files[0]) as z:
        arrays = {k: np.array(z[k]) for k in z.files}
    arrays["value"][3] += 1.0
    np.savez(files[0], **arrays)
    with pytest.raises(YamblabError, match="checksum") as exc:
        decision_set(yahtzee, 6, seed=9, cache=tmp_path)
    assert str(files[0]) in str(exc.value) and "delete" in str(exc.value)
    # garbage: refused too, and never rebuilt over
    files[0].write_bytes(b"not a zip file")
    with pytest.raises(YamblabError, match="unreadable") as exc:
        decision_set(yahtzee, 6, seed=9, cache=tmp_path)
    assert str(files[0]) in str(exc.value)
    assert files[0].read_bytes() == b"not a zip file"


def test_no_cache_touches_no_disk(yahtzee, official_table, tmp_path, monkeypatch):
    monkeypatch.setenv("YAMBLAB_CACHE_DIR", str(tmp_path))
    d = decision_set(yahtzee, 3, seed=1, cache=False)
    # (the oracle table keeps its own cache there)
    assert len(d) > 0 and list(tmp_path.glob("decision-set-*")) == []
    with pytest.raises(ValueError, match="at least 1"):
        decision_set(yahtzee, 0, cache=False)


def test_other_rules_variant(official_table):
    g = make_game("yahtzee", "free,no-upper-bonus")
    d = decision_set(g, 5, seed=2, cache=False)
    assert d.digest == g.digest and d.label.startswith("yahtzee ")
    assert (np.isfinite(d.q) == d.encoded.legal).all()
    assert 30 * 5 <= len(d) <= 39 * 5


def test_a_yamb_card_s_set_is_its_endgame_with_the_oracle_s_exact_values():
    """The heuristic bot plays to the endgame oracle's k open boxes, the oracle the rest; every
    position from there carries its exact action values, and the oracle's own choices there
    lose nothing."""
    from yamblab.search.registry import endgame_oracle

    g = make_game("yamb", preset="croatian")
    d = decision_set(g, 6, seed=3, cache=False)
    k = endgame_oracle(g).k
    assert d.digest == f"{g.digest}-endgame{k}" and d.label.endswith(f"endgame {k}")
    assert (np.isfinite(d.q) == d.encoded.legal).all() and np.array_equal(np.unique(d.game_index), np.arange(6))
    assert k <= d.positions_per_game() <= 6 * k              # a box a turn, keeps between
    assert (d.value >= 0).all() and (d.kind == 2).sum() >= k * 6 * 0.5
    # the same set twice from the same dice, and the value of each game's first position is its
    # card's exact value once the turn's dice are averaged: positive and below 60 points a box
    again = decision_set(g, 6, seed=3, cache=False)
    assert np.array_equal(again.q, d.q)
    first = np.array([np.flatnonzero(d.game_index == i)[0] for i in range(6)])
    assert (d.value[first] < 60 * k).all()
    # graded like Yahtzee's: the oracle's own choices lose nothing, uniform play loses points
    best = np.zeros(d.q.shape, np.float32)
    best[np.arange(len(d)), np.argmax(d.q, axis=1)] = 1.0
    uniform = d.legal / d.legal.sum(axis=1, keepdims=True)
    assert solver_losses(StubNet(best, d.value), d).metrics["policy_regret"] == pytest.approx(0.0, abs=1e-9)
    assert solver_losses(StubNet(uniform, d.value), d).metrics["policy_regret"] > 10


def test_yamb_column_values_match_the_column_oracle():
    from yamblab.oracle.yamb.grading import column_regrets
    from yamblab.oracle.yamb.oracles import column_oracle

    g = make_game("yamb", preset="croatian", columns=["down"])
    d = decision_set(g, 8, seed=3, cache=False)
    assert d.label == "yamb croatian[down]"
    assert set(np.unique(d.kind)) == {0, 1, 2}
    assert np.array_equal(np.unique(d.game_index), np.arange(8))
    assert (np.isfinite(d.q) == d.encoded.legal).all()
    oracle = column_oracle(g.rules)
    rng = np.random.default_rng(1)
    checked = [0]

    def visit(batch, rows, live):
        rl = np.asarray(batch.rolls_max, np.int64) - np.asarray(batch.rolls_used, np.int64)
        np.testing.assert_array_equal(d.kind[rows], ds.kinds_of(rl[live]))
        if rng.random() > 0.5:                      # about half the steps, two actions each
            return
        legal = batch.legal_actions()
        for _ in range(2):
            acts = np.full(batch.n, -1, np.int64)
            for i in live:
                acts[i] = rng.choice(np.flatnonzero(legal[i]))
            regret = column_regrets(oracle, batch, acts)
            mine = d.value[rows] - d.q[rows, g.to_shared(acts[live])]
            np.testing.assert_allclose(mine, regret[live], rtol=0, atol=1e-9)
            checked[0] += live.size

    replay(g, d, visit)
    assert checked[0] > 100


def test_the_solver_losses_table_is_the_one_place_a_loss_is_named():
    """Every solver-graded loss is named once (``SOLVER_LOSSES``): the run config's modes, the
    sweep spec's judge modes and the plots' words and units all read it."""
    from typing import get_args

    from yamblab.search.decision_set import SOLVER_LOSSES
    from yamblab.sweeps.spec import JudgeMode
    from yamblab.training.config import EXACT_MODE, SOLVER_MODES
    from yamblab.training.plots import MODE_UNITS, MODE_WORDS

    assert SOLVER_MODES == tuple(SOLVER_LOSSES)
    assert set(get_args(JudgeMode)) == {"none", "one_step", "full_turn", *SOLVER_LOSSES, EXACT_MODE}
    for name, (words, unit) in SOLVER_LOSSES.items():
        assert MODE_WORDS[name] == words and MODE_UNITS[name] == unit
