"""The exact Yamb endgame oracle: against the single-column oracles, against an independent brute
force over dice on small cards, and against the mean of its own play."""

import math
from functools import lru_cache

import numpy as np
import pytest
from dice_brute import turn_value

from yamblab.agents.base import make_agent
from yamblab.games.protocol import make_game
from yamblab.games.yamb.scoring import card_total, column_next_rows, row_score
from yamblab.oracle.yamb.oracles import column_oracle
from yamblab.search.yamb_endgame import YambEndgameOracle

#: a column's filled scores, each one a roll can make in its row (lower rows 0: any roll scores 0)
FILLED = [3, 6, 9, 12, 15, 18, 25, 10, 0, 0, 0, 0, 0]


def _card(rules, kind, open_rows):
    """A card whose columns all hold FILLED, with ``open_rows`` of the ``kind`` column open."""
    card = np.tile(np.array(FILLED, np.int16), (rules.n_columns, 1))
    col = np.array(FILLED, np.int16)
    col[open_rows] = -1
    card[rules.columns.index(kind)] = col
    return card, col


@pytest.mark.parametrize("preset", ["croatian", "jamb_nn"])
@pytest.mark.parametrize("kind, open_rows", [("down", [8, 9, 10, 11, 12]), ("up", [0, 1, 2, 3, 4]),
                                             ("down", [6, 7, 8, 9, 10, 11, 12])])
def test_a_card_with_one_column_open_is_worth_what_its_column_oracle_says(preset, kind, open_rows):
    card_rules = make_game("yamb", preset=preset).rules
    card, col = _card(card_rules, kind, open_rows)
    oracle = YambEndgameOracle(card_rules, k=len(open_rows))
    single = column_oracle(make_game("yamb", preset=preset, columns=[kind]).rules)
    want = single.state_value([int(x) for x in col])
    assert oracle.card_values(card[None])[0] == pytest.approx(want, abs=1e-9)
    assert want > 20


def _brute(rules, card):
    """Independent expectimax over ordered dice outcomes and every hold mask, of a card whose
    open boxes lie in down, up and free columns (no announcement to weigh): the expected final
    total minus the current one, by the reference scoring (``row_score``, ``card_total``)."""
    n = rules.n_dice

    @lru_cache(maxsize=None)
    def V(state):
        cols = [list(c) for c in state]
        boxes = [(c, r) for c, kind in enumerate(rules.columns) for r in column_next_rows(kind, [x < 0 for x in cols[c]])]
        if not boxes:
            return 0.0
        cur = card_total(rules, cols)
        n_open = sum(x < 0 for c in cols for x in c)
        L = rules.last_turn_rolls if n_open == 1 else rules.rolls

        def score_best(dice, roll):
            best = -math.inf
            for c, r in boxes:
                nxt = [list(x) for x in cols]
                nxt[c][r] = row_score(rules, r, dice, roll)
                best = max(best, card_total(rules, nxt) - cur + V(tuple(map(tuple, nxt))))
            return best

        return turn_value(n, L, score_best)

    return V(tuple(tuple(int(x) for x in c) for c in card))


def test_a_small_card_of_several_columns_matches_brute_force_over_dice():
    """Croatian, two open boxes in two columns: the up column's Ones (its upper sum is 58: two
    ones make the bonus) and the free column's Max (Ones × (Max − Min) waits on it)."""
    rules = make_game("yamb", preset="croatian").rules
    card, _ = _card(rules, "free", [6])
    up = rules.columns.index("up")
    card[up] = FILLED
    card[up, 0], card[up, 1] = -1, 4
    assert rules.upper_bonus_threshold == 60
    oracle = YambEndgameOracle(rules, k=2)
    got = oracle.card_values(card[None])[0]
    assert got == pytest.approx(_brute(rules, card), abs=1e-9)
    assert oracle.solved >= 3                       # the card, then each card one box on (cached)


def test_the_state_forgets_what_no_longer_matters_and_keeps_what_does():
    rules = make_game("yamb", preset="croatian").rules
    oracle = YambEndgameOracle(rules, k=5)
    a, _ = _card(rules, "down", [8, 9, 10, 11, 12])
    b = a.copy()
    b[rules.columns.index("up"), 8:] = [45, 22, 48, 56, 0]       # another column's lower rows: no future
    c = a.copy()
    c[rules.columns.index("down"), 0] = 1                         # an upper sum no box can move: none either
    d, _ = _card(rules, "free", [0, 1])
    e = d.copy()
    e[rules.columns.index("free"), 5] = 6                         # the open Ones' bonus chance moves
    keys = oracle.state_keys(np.stack([a, b, c, d, e]))
    assert (keys[0] == keys[1]).all() and (keys[0] == keys[2]).all() and not (keys[3] == keys[4]).all()
    f = rules.columns.index("free")
    far, farther = d.copy(), d.copy()
    far[f, 2:6], farther[f, 2:6] = [3, 4, 5, 6], [6, 8, 10, 12]   # 18 + 10 (Ones, Twos) can't make 60, nor 36 + 10
    zero, zero_other = a.copy(), a.copy()
    down = rules.columns.index("down")
    zero[down, 0], zero_other[down, 0] = 0, 0
    zero[down, 6:8], zero_other[down, 6:8] = [-1, 10], [-1, 12]    # Ones scored 0: Max and Min no longer count
    zero[down, 8:] = zero_other[down, 8:] = -1
    keys = oracle.state_keys(np.stack([far, farther, zero, zero_other]))
    assert (keys[0] == keys[1]).all() and (keys[2] == keys[3]).all()
    va, vd, ve = oracle.card_values(np.stack([a, d, e]))
    assert oracle.card_values(b[None])[0] == va and vd > ve          # 54 of the bonus's 60 against 42


def test_its_own_play_scores_its_values_on_average():
    """jamb_nn (announce column, free pure-roll announcements, five rolls on the last turn): the
    heuristic bot plays to four open boxes, then full-turn search on the oracle to the end; the
    points each game scores from there average its card's value (inside 3 standard errors)."""
    game = make_game("yamb", preset="jamb_nn")
    n, k = 300, 4
    batch = game.new_batch(n, seed=11)
    bot = make_agent("heuristic", game)
    bot.reset(batch)
    while True:
        n_open = (batch.card < 0).reshape(n, -1).sum(axis=1)
        if (n_open <= k).all():
            break
        act = bot.act(batch)
        act[n_open <= k] = -1
        batch.step(act)
    oracle = YambEndgameOracle(game.rules, k=k)
    start = batch.total.astype(np.float64).copy()
    value = oracle.card_values(batch.card.copy())
    search = oracle.search()
    search.reset(batch)
    while not batch.done.all():
        q = search.action_values(batch)
        act = np.where(batch.done, -1, np.argmax(q, axis=1))
        batch.step(act)
    gained = batch.total - start - value
    se = gained.std(ddof=1) / math.sqrt(n)
    assert abs(gained.mean()) < 3 * se and se < 6
    assert (batch.card[:, game.rules.columns.index("announce")] >= 0).all()


def test_cards_and_settings_it_cannot_read_are_refused_by_name():
    rules = make_game("yamb", preset="croatian").rules
    oracle = YambEndgameOracle(rules, k=4)
    card, _ = _card(rules, "down", [11, 12])
    bad = {"shape": card, "a box holds -5": np.where(card < 0, -5, card)[None],
           "whole-number": card[None] + 0.7, "no roll scores 100 in row twos": np.where(
               np.arange(13) == 1, 100, card)[None]}
    for words, cards in bad.items():
        with pytest.raises(ValueError, match=words if words != "shape" else r"shape \(m, 4, 13\)"):
            oracle.card_values(cards)
    assert oracle.card_values(np.zeros((0, 4, 13), np.int16)).shape == (0,)
    for k in (2.7, "3", True, 0, 53):
        with pytest.raises(ValueError, match="k \\(open boxes\\) must be a whole number"):
            YambEndgameOracle(rules, k=k)
    with pytest.raises(ValueError, match="max_states must be a whole number"):
        oracle.card_values(card[None], max_states=-1)


def test_a_card_beyond_its_reach_is_refused_with_the_limit():
    from yamblab.errors import EndgameTooLarge

    rules = make_game("yamb", preset="croatian").rules
    card, _ = _card(rules, "down", [8, 9, 10, 11, 12])
    with pytest.raises(ValueError, match="5 open boxes: this endgame oracle solves at most 4"):
        YambEndgameOracle(rules, k=4).card_values(card[None])
    oracle = YambEndgameOracle(rules, k=5)
    with pytest.raises(EndgameTooLarge, match="more than 3 new states"):
        oracle.card_values(card[None], max_states=3)
    assert oracle.solved > 0
    fresh = YambEndgameOracle(rules, k=5)
    value = oracle.card_values(card[None], max_states=100)[0]
    assert value == fresh.card_values(card[None])[0] and oracle.solved == fresh.solved   # what it solved stayed cached


class _HeuristicThenOracle:
    """The heuristic bot until at most ``k`` boxes are open, then optimal play."""

    name = "heuristic, then the endgame oracle"

    def __init__(self, game, oracle):
        self.bot, self.oracle, self.k = make_agent("heuristic", game), oracle, oracle.k

    def reset(self, batch):
        self.bot.reset(batch)
        self.search = self.oracle.search()
        self.search.reset(batch)

    def act(self, batch):
        a = np.asarray(self.bot.act(batch), np.int64)
        late = np.flatnonzero(~batch.done & ((batch.card < 0).reshape(batch.n, -1).sum(axis=1) <= self.k))
        if late.size:
            a[late] = np.argmax(self.search.action_values(batch, late)[late], axis=1)
        return a


def test_grading_charges_the_endgame_exactly_and_optimal_play_nothing():
    from yamblab.oracle.yamb.grading import grade_yamb

    game = make_game("yamb", preset="jamb_nn")
    oracle = YambEndgameOracle(game.rules, k=4)
    bot = grade_yamb(make_agent("heuristic", game), game, games=30, seed=2, endgame=oracle)
    best = grade_yamb(_HeuristicThenOracle(game, oracle), game, games=30, seed=2, endgame=oracle)
    assert bot.endgame_k == 4 and bot.endgame_regret_mean > 0.5 and not bot.has_regret
    assert best.endgame_regret_mean == pytest.approx(0.0, abs=1e-9)
    assert 4 <= bot.endgame_decisions <= 4 * 3 + 4          # a box a turn, up to two keeps (four the last turn)
    per_kind = sum(bot.endgame_by_decision.values())
    assert per_kind == pytest.approx(bot.endgame_regret_mean, rel=1e-9)
    keeps = sum(v for k, v in bot.endgame_by_decision.items() if "keep" in k)
    assert sum(bot.endgame_by_column.values()) + keeps == pytest.approx(per_kind, rel=1e-9)
    assert bot.endgame_regrets.shape == (30,) and "endgame" in bot.format()
    assert bot.endgame_entered == {4: 30}                       # every card within the state budget
    # the same dice: the two agents' scores differ only by their last four turns
    assert (best.scores - bot.scores).mean() == pytest.approx(bot.endgame_regret_mean, abs=3 * (
        best.scores - bot.scores).std(ddof=1) / math.sqrt(30) + 1e-9)


def test_grade_cli_reports_the_endgame_of_a_card_and_refuses_it_elsewhere():
    import json

    from typer.testing import CliRunner

    from yamblab.cli.main import app

    run = CliRunner().invoke(app, ["grade", "--game", "yamb", "--preset", "croatian", "--agent", "heuristic",
                                   "--games", "6", "--endgame", "3", "--json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    assert out["endgame_k"] == 3 and out["endgame_regret_mean"] >= 0 and set(out["endgame_by_column"]) == {
        "down", "up", "free", "announce"}
    yahtzee = CliRunner().invoke(app, ["grade", "--games", "3", "--json"])
    assert yahtzee.exit_code == 0 and not any(k.startswith("endgame") for k in json.loads(yahtzee.output))
    bad = CliRunner().invoke(app, ["grade", "--games", "3", "--endgame", "4"])
    assert bad.exit_code == 2 and "--endgame grades the last turns of a Yamb card" in bad.output


@pytest.mark.parametrize("depth", ["none", "full_turn"])
def test_a_checkpoint_s_endgame_is_graded_with_its_policy_head_or_its_search(tmp_path, depth):
    import json

    from typer.testing import CliRunner

    from yamblab.cli.main import app
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.model.config import ModelConfig

    state = Learner(ModelConfig.preset("tiny"), TrainConfig()).state_dict()
    path = save_checkpoint(tmp_path / "c.ckpt", {**state, "config": "game: yamb\npreset: croatian\n"})
    run = CliRunner().invoke(app, ["grade", "--game", "yamb", "--checkpoint", str(path), "--depth", depth,
                                   "--games", "4", "--endgame", "6", "--json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    assert out["endgame_k"] == 6 and out["endgame_decisions"] >= 6
    # an untrained policy head is far from optimal; an untrained value head values every card
    # about alike, so its search plays the last turns nearly greedily (often optimally)
    assert out["endgame_regret_mean"] > (1.0 if depth == "none" else -1e-9)
    assert sum(out["endgame_by_decision"].values()) == pytest.approx(out["endgame_regret_mean"], abs=1e-3)   # 4 decimals each


def test_an_agent_s_endgame_from_the_bot_s_openings_is_charged_as_grading_charges_it():
    """The same regrets as grading the bot's whole games (every card enters at k), and none for
    optimal play: the evaluation's exact mode on a card."""
    from yamblab.agents.search_agent import SearchAgent
    from yamblab.oracle.yamb.grading import endgame_regrets, grade_yamb

    game = make_game("yamb", preset="jamb_nn")
    oracle = YambEndgameOracle(game.rules, k=4)
    bot = make_agent("heuristic", game)
    mine = endgame_regrets(bot, game, oracle, games=30, seed=2)
    graded = grade_yamb(bot, game, games=30, seed=2, endgame=oracle)
    assert graded.endgame_entered == {4: 30}
    np.testing.assert_allclose(mine["regrets"], graded.endgame_regrets, atol=1e-9)
    assert mine["decisions"] == pytest.approx(graded.endgame_decisions)
    assert sum(mine["by_decision"].values()) == pytest.approx(mine["regrets"].mean(), rel=1e-9)
    best = endgame_regrets(SearchAgent(game, oracle, "full_turn"), game, oracle, games=30, seed=2)
    assert np.abs(best["regrets"]).max() < 1e-9 and best["decisions"] >= 4
    # two agents start their endgames from the same cards (the bot's openings), each with k open boxes
    starts = [_Recording(make_agent(name, game)) for name in ("greedy", "heuristic")]
    for agent in starts:
        endgame_regrets(agent, game, oracle, games=30, seed=2)
    np.testing.assert_array_equal(starts[0].cards, starts[1].cards)
    assert ((starts[0].cards < 0).reshape(30, -1).sum(axis=1) == 4).all()
    with pytest.raises(ValueError, match="at least 1"):
        endgame_regrets(bot, game, oracle, games=0, seed=2)


class _Recording:
    """An agent that keeps the cards it is handed at its reset."""

    def __init__(self, agent):
        self.agent, self.cards = agent, None

    def reset(self, batch):
        self.cards = np.asarray(batch.card).copy()
        self.agent.reset(batch)

    def act(self, batch):
        return self.agent.act(batch)


def test_a_yamb_run_s_evaluation_grades_its_search_over_the_endgame():
    from yamblab.actors.actors import EXACT_MODE, Evaluator
    from yamblab.learners.learner import Learner
    from yamblab.training.config import RunConfig

    cfg = RunConfig(game="yamb", preset="croatian", search={"depth": "full_turn"},
                    runtime={"eval_games": 2, "solver_eval": True, "solver_games": 5})
    assert cfg.exact_evaluated
    assert not RunConfig(game="yamb", preset="croatian", search={"depth": "full_turn"}).exact_evaluated
    assert not RunConfig(game="yamb", preset="croatian", runtime={"solver_eval": True, "eval_depth": "none"}
                         ).exact_evaluated
    ev = Evaluator(cfg)
    version, w = Learner(cfg.model, cfg.train).get_weights()
    out = ev.evaluate(version, [w])
    per_game = out["modes"][EXACT_MODE]["per_game_regret"]
    m = out["metrics"]
    assert per_game.shape == (5,) and m["eval.exact_regret"] == pytest.approx(per_game.mean())
    assert ev._endgame.solved == 0                       # every card its search reaches was solved with the set
    assert m["eval.exact.decisions_per_game"] >= 8                         # a box each of the last 8 turns
    assert sum(m[f"eval.exact.{k}"] for k in ("first_keep", "second_keep", "box", "announce")) == pytest.approx(
        per_game.mean())
    again = ev.evaluate(version, [w])["modes"][EXACT_MODE]["per_game_regret"]
    np.testing.assert_array_equal(again, per_game)                          # the same network, the same games
    early = ev.evaluate(version, [w], whole=False)
    assert EXACT_MODE not in early["modes"] and "eval.exact_regret" not in early["metrics"]
    from yamblab.training.summary import format_summary, run_summary

    summary = run_summary([{**out, "minutes": 1.0, "positions": 10}])
    assert summary["summary.endgame_regret"] == pytest.approx(per_game.mean()) and "summary.exact_regret" not in summary
    assert "over the endgame" in format_summary(summary)


def test_solved_states_carry_over_to_a_new_oracle_and_the_decision_set_keeps_them(tmp_path):
    from yamblab.search.decision_set import decision_set

    game = make_game("yamb", preset="croatian")
    first = YambEndgameOracle(game.rules, k=3)
    cards = np.stack([_card(game.rules, "down", [10, 11, 12])[0], _card(game.rules, "free", [0, 7, 9])[0]])
    values = first.card_values(cards)
    keys, vals = first.solved_states()
    assert keys.shape == (first.solved, first.state_keys(cards).shape[1]) and vals.shape == (first.solved,)
    second = YambEndgameOracle(game.rules, k=3)
    second.remember(keys, vals)
    np.testing.assert_array_equal(second.card_values(cards), values)
    assert second.solved == 0                                     # nothing solved again
    with pytest.raises(ValueError, match="width"):
        second.remember(keys[:, 1:], vals)
    dset = decision_set(game, games=3, cache=tmp_path)
    again = decision_set(game, games=3, cache=tmp_path)           # loaded from the file
    assert again.endgame_states[0].shape[0] > 0
    np.testing.assert_array_equal(again.endgame_states[0], dset.endgame_states[0])
    np.testing.assert_array_equal(again.endgame_states[1], dset.endgame_states[1])
