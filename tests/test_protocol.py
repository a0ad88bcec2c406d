"""The game protocol's contract on both engines, and Yamb's search, self-play and evaluation."""

import numpy as np
import pytest
import torch

from yamblab.errors import ConfigError, UnknownVariantError
from yamblab.games.encoding import N_ACTIONS
from yamblab.games.protocol import Game, make_game, step_shared

GAMES = [("yahtzee", None, None), ("yamb", "croatian", None), ("yamb", "croatian", ["free"]),
         ("yamb", "six_dice", None), ("yamb", "jamb_nn", None), ("yamb", "seven_column", None)]


def _game(name, preset, cols):
    return make_game(name, preset=preset, columns=cols) if name == "yamb" else make_game(name)


@pytest.mark.parametrize("name,preset,cols", GAMES)
def test_protocol_contract(name, preset, cols):
    """Random play through the shared action space: masks agree with the engine, games end
    after n_turns boxes, totals are the card's, the same seed gives the same games."""
    g = _game(name, preset, cols)
    assert isinstance(g, Game) and g.name == name and len(g.digest) == 16
    rng = np.random.default_rng(0)
    totals = []
    for _ in range(2):
        b = g.new_batch(6, seed=11, first_game=3)
        boxes = np.zeros(b.n, int)
        rng = np.random.default_rng(0)
        while not b.done.all():
            enc = g.encode(b)
            assert enc.legal.shape == (b.n, N_ACTIONS)
            eng = b.legal_actions()
            for i in np.flatnonzero(~b.done):
                shared = np.flatnonzero(enc.legal[i])
                assert sorted(g.to_engine(shared).tolist()) == np.flatnonzero(eng[i]).tolist()
                assert (g.to_shared(g.to_engine(shared)) == shared).all()
            assert not enc.legal[b.done].any()
            a = np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in enc.legal])
            boxes += (~b.done) & (a < 128)
            step_shared(g, b, a)
        assert (boxes == g.n_turns).all()
        assert g.bonus_reached(b).shape == (b.n,) and ((0 <= g.bonus_reached(b)) & (g.bonus_reached(b) <= 1)).all()
        totals.append(b.total.copy())
    assert (totals[0] == totals[1]).all()


def test_make_game_refuses_options_of_the_other_game():
    with pytest.raises(ConfigError, match="`preset` is a Yamb option; Yahtzee takes `rules`"):
        make_game("yahtzee", preset="croatian")
    with pytest.raises(ConfigError, match="Yahtzee option"):
        make_game("yamb", rules="forced")
    with pytest.raises(ConfigError, match="not on the croatian card"):
        make_game("yamb", preset="croatian", columns=["hand"])
    with pytest.raises(UnknownVariantError, match="unknown game"):
        make_game("chess")


def test_boundary_encoding_has_no_dice_and_the_turns_rolls():
    g = make_game("yamb", preset="six_dice", columns=["free"])
    b = g.new_batch(2, seed=0)
    enc = g.encode_boundary(b, np.array([0, 1]))
    assert (enc.dice == 0).all() and not enc.legal.any()
    assert (enc.state[:, 3] == 1).all()            # 3 rolls in the coming turn (not the last)


@pytest.mark.parametrize("preset,depth", [("croatian", "full_turn"), ("jamb_nn", "full_turn"),
                                          ("croatian", "one_step")])
def test_yamb_search_values_exactly_the_legal_actions(preset, depth):
    """Q is finite on the legal actions only, for full-turn and one-step search, 5 and 6 dice."""
    from yamblab.model.config import ModelConfig
    from yamblab.model.network import YambNet
    from yamblab.search.registry import make_search
    from yamblab.search.valuation import NetworkValuation

    torch.manual_seed(0)
    net = YambNet(ModelConfig.preset("tiny", value_max=1500.0)).eval()
    g = make_game("yamb", preset=preset)
    search = make_search(depth, g, NetworkValuation(net))
    b = g.new_batch(3, seed=4)
    for _ in range(4 if depth == "one_step" else 12):
        q = search.q(b)
        legal = g.encode(b).legal
        assert (np.isfinite(q) == legal).all()
        step_shared(g, b, np.argmax(q, axis=1))


def test_yamb_self_play_samples_have_legal_targets():
    from yamblab.learners.config import SearchConfig, TrainConfig
    from yamblab.learners.selfplay import SelfPlay
    from yamblab.model.config import ModelConfig

    g = make_game("yamb", preset="croatian", columns=["down"])
    sp = SelfPlay(ModelConfig.preset("tiny", boundary_head=True, boundary_features="card"),
                  TrainConfig(value_target_mix=1.0, bot="heuristic", bot_share=0.5, successor_samples=3),
                  SearchConfig(depth="full_turn"), g)
    s, stats = sp.play_games(4, seed=2, n_bot=2)
    pol = s.has_policy
    assert pol.any() and (~pol).any()                       # decisions and boundary positions
    # turn starts (13 per game) + up to 3 successors of each of the first 12 turns
    assert (~pol).sum() > 4 * 13 and (s.dice[~pol] == 0).all()
    assert np.allclose(s.policy_target[pol].sum(axis=1), 1.0, atol=1e-5)
    assert ((s.policy_target[pol] > 0) <= s.legal[pol]).all()
    assert np.isfinite(s.value_target).all() and stats["leaf_positions"] > 0


def test_yahtzee_self_play_trains_on_random_cards_of_the_next_layer():
    """random_state_samples adds k boundary samples per turn start (not on the last turn), on top
    of the successor samples, each a boundary position (no dice, no policy target)."""
    from yamblab.learners.config import SearchConfig, TrainConfig
    from yamblab.learners.selfplay import SelfPlay
    from yamblab.model.config import ModelConfig

    g = make_game("yahtzee", "forced")
    model = ModelConfig.preset("tiny", boundary_head=True)
    counts = {}
    for k in (0, 5):
        sp = SelfPlay(model, TrainConfig(value_target_mix=1.0, successor_samples=2, random_state_samples=k),
                      SearchConfig(depth="full_turn"), g)
        s, _ = sp.play_games(3, seed=4)
        counts[k] = int((~s.has_policy).sum())
        assert (s.dice[~s.has_policy] == 0).all() and np.isfinite(s.value_target).all()
    assert counts[5] - counts[0] == 3 * 12 * 5            # 3 games × the 12 turns before the last × 5


def test_evaluator_pairs_a_full_yamb_card_with_the_heuristic_bot(tmp_path):
    from yamblab.actors.actors import Evaluator, eval_payload
    from yamblab.agents.base import make_agent
    from yamblab.training.config import RunConfig

    cfg = RunConfig(game="yamb", preset="croatian", runtime={"eval_games": 6})
    ev = Evaluator(cfg)
    rep = ev.grade(make_agent("greedy", cfg.game_obj))
    out = eval_payload(rep, 0, 0.0)
    assert out["loss"] == "points below heuristic" and "eval.regret_mean" not in out["metrics"]
    assert out["per_game_regret"].mean() == pytest.approx(-rep.diff_mean)
    assert out["metrics"]["eval.vs_baseline_mean"] < 0        # greedy trails the heuristic
    # the greedy yardstick on the same dice: greedy against itself is exactly 0
    m = out["metrics"]
    assert m["eval.vs_greedy_mean"] == m["eval.vs_greedy_ci_low"] == m["eval.vs_greedy_ci_high"] == 0.0
    heur = eval_payload(ev.grade(make_agent("heuristic", cfg.game_obj)), 0, 0.0)["metrics"]
    assert heur["eval.vs_greedy_mean"] == pytest.approx(-m["eval.vs_baseline_mean"])


def test_run_config_names_the_game_options():
    from yamblab.training.config import RunConfig

    with pytest.raises(ValueError, match="Yahtzee option"):
        RunConfig(game="yamb", rules="forced")
    with pytest.raises(ValueError, match="`columns` is a Yamb option; Yahtzee takes `rules`"):
        RunConfig(game="yahtzee", columns=["free"])
    with pytest.raises(ValueError, match="network size"):
        RunConfig(preset="tiny")
    assert RunConfig(game="yamb", train={"successor_samples": 4}).train.successor_samples == 4   # announce column
    assert RunConfig(game="yamb", columns=["free"], train={"successor_samples": 4}).train.successor_samples == 4
    with pytest.raises(ValueError, match="random_state_samples draws from every reachable Yahtzee card"):
        RunConfig(game="yamb", columns=["free"], train={"random_state_samples": 4})
    with pytest.raises(ValueError, match="needs search.depth full_turn and model.boundary_head"):
        RunConfig(size="tiny", train={"random_state_samples": 4})               # no boundary head
    for mix in ({"value_target_mix": 0.5}, {"value_target_mix_final": 1.0}):
        with pytest.raises(ValueError, match="search.depth none searches nothing"):
            RunConfig(search={"depth": "none"}, train=mix)
    assert RunConfig(search={"depth": "one_step"}, train={"value_target_mix": 0.5}).train.value_target_mix == 0.5
    with pytest.raises(ValueError, match="not a yamb bot"):
        RunConfig(game="yamb", train={"bot": "oracle", "bot_share": 0.2})     # 4 columns: no oracle
    with pytest.raises(ValueError, match="not a yahtzee bot"):
        RunConfig(train={"bot": "heuristic", "bot_share": 0.2})
    assert RunConfig().rules == "forced" and RunConfig(game="yamb").rules is None


@pytest.mark.slow
def test_exact_score_of_the_evaluated_network_agrees_with_sampled_grading():
    """The evaluator logs full-turn search's exact score on the boundary head beside the sampled
    regret; the boundary head reads only the boundary state, so the two must agree."""
    from yamblab.actors.actors import Evaluator
    from yamblab.learners.learner import Learner
    from yamblab.training.config import load_run_config

    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cfg = load_run_config(root / "configs" / "yahtzee-cpu.yaml", {"runtime.eval_games": 400})
    ev = Evaluator(cfg)
    assert ev.exact_applies()
    version, w = Learner(cfg.model, cfg.train).get_weights()
    m = ev.evaluate(version, [w])["metrics"]
    assert m["eval.regret_ci_low"] <= m["eval.exact_regret"] <= m["eval.regret_ci_high"]
    assert m["eval.exact_score"] == pytest.approx(254.5877 - m["eval.exact_regret"], abs=1e-3)


def test_yamb_successor_values_are_the_oracles_on_a_column():
    """With the exact oracle as valuation, a successor card's turn-start value is its exact value."""
    from yamblab.games.encoding import decode_yamb_card
    from yamblab.oracle.yamb.oracles import column_oracle
    from yamblab.search.valuation import YambColumnOracleValuation
    from yamblab.search.yamb_search import YambFullTurnSearch, successor_samples

    g = make_game("yamb", preset="croatian", columns=["down"])
    oracle = column_oracle(g.rules)
    search = YambFullTurnSearch(g.rules, YambColumnOracleValuation(oracle))
    b = g.new_batch(3, seed=1)
    for _ in range(7):                                   # a few decisions in: cards partly filled
        step_shared(g, b, np.argmax(search.q(b), axis=1))
    while not g.turn_start(b).all():
        step_shared(g, b, np.argmax(search.q(b), axis=1))
    enc, values, owner = successor_samples(search, b, np.arange(3), 4, np.random.default_rng(0))
    cards = decode_yamb_card(enc, g.rules)
    want = [oracle.state_value(card[0].tolist()) for card in cards]
    assert np.allclose(values, want, atol=1e-9) and len(values) == len(owner) > 0


class _CardValuation:
    """A made-up valuation of boundary cards (any function of the card will do): each open box
    of the announce column is worth 9 points, every other open box 4, and a filled box its
    score times a factor that depends on where it lies, so boxes are not interchangeable."""

    def __init__(self, rules):
        self.rules = rules
        self.weight = 0.2 + 0.05 * np.arange(rules.n_columns * rules.n_rows).reshape(rules.n_columns, rules.n_rows) % 0.7

    def values(self, enc):
        from yamblab.games.encoding import decode_yamb_card

        card = decode_yamb_card(enc, self.rules).astype(np.float64)
        ac = self.rules.announce_column
        open_ = card < 0
        per_open = np.full(card.shape[1:], 4.0)
        per_open[ac] = 9.0
        return (open_ * per_open).sum(axis=(1, 2)) + (np.where(open_, 0, card) * self.weight).sum(axis=(1, 2))


def _jamb_card(rng, n_open, announce_only=False, rules=None):
    """A card of ``rules`` (default jamb_nn) with ``n_open`` open boxes, scores drawn from what
    each row can take: only announce boxes, or (``announce_only`` false) down's last, up's first,
    free and announce boxes; one open box is a free one."""
    from yamblab.games.yamb.scoring import score_table

    r = rules or make_game("yamb", preset="jamb_nn").rules
    S = score_table(r)
    card = np.empty((r.n_columns, r.n_rows), np.int16)
    for c in range(r.n_columns):
        for row in range(r.n_rows):
            card[c, row] = rng.choice(np.unique(S[:, row, :r.rolls]))
    down, free, up, ann = range(4)
    if announce_only:
        card[ann, rng.permutation(r.n_rows)[:n_open]] = -1
    elif n_open == 1:
        card[free, rng.integers(r.n_rows)] = -1
    else:
        k = n_open // 4
        card[down, r.n_rows - k:] = -1
        card[up, :k] = -1
        card[free, rng.permutation(r.n_rows)[:k]] = -1
        card[ann, rng.permutation(r.n_rows)[:n_open - 3 * k]] = -1
    return r, card


@pytest.mark.parametrize("n_open,announce_only,always,vs_plain", [
    (9, False, False, ">"),      # the option to announce is worth something
    (3, True, False, ">"),       # only announce boxes open: announcing is compulsory
    (1, True, False, ">"),       # the last turn (5 rolls), an announce box
    (1, False, False, "="),      # the last turn, a free box: nothing to announce
    (9, False, True, "<"),       # announcing compulsory on every turn: a constraint, not an option
])
def test_yamb_turn_start_values_weigh_the_announce_option(n_open, announce_only, always, vs_plain):
    """A Yamb card's turn-start value with announcing: the average over every first roll of the
    best Q the full-turn search gives that roll through the engine's own legal actions (play on,
    score now, or announce a row), computed here one roll at a time. Also covered: a card with
    only announce boxes open (announcing compulsory), a last turn (5 rolls), and rules where
    announcing is compulsory on every turn."""
    from yamblab.games.dice6 import dice_tables
    from yamblab.games.yamb.engine import YambBatch
    from yamblab.oracle.yamb.turn import _p_empty
    from yamblab.search.yamb_search import YambFullTurnSearch, _Cards, turn_start_values

    rules = make_game("yamb", preset="jamb_nn").rules
    if always:
        rules = rules.replace(announce_compulsory="always", announce_free_on_pure_roll=False)
    r, card = _jamb_card(np.random.default_rng(n_open), n_open, announce_only, rules)
    got = turn_start_values(YambFullTurnSearch(r, _CardValuation(r)), card[None])
    t = dice_tables(r.n_dice)
    b = YambBatch(t.n_rolls, r, seed=0)
    turn = r.n_turns - n_open
    for i in range(t.n_rolls):
        b.core.set_state(i, card, np.repeat(np.arange(1, 7), t.rolls[i]), turn, 1, -1)
    best_q = YambFullTurnSearch(r, _CardValuation(r)).action_values(b).max(axis=1)
    assert np.isfinite(best_q).all()
    assert got.shape == (1,) and got[0] == pytest.approx(best_q @ _p_empty(r.n_dice), rel=1e-12)
    # against the unannounced plan alone (the value successor samples had before)
    plain = YambFullTurnSearch(r, _CardValuation(r))
    cb = _Cards(r, card[None])
    plain._K = np.zeros((1, r.max_rolls - 1, t.n_keeps))
    plain._key = np.full(1, -1, np.int64)
    v0 = plain._plan(cb, np.arange(1), plain.box_values(cb, np.arange(1)))[0]
    assert {">": got[0] > v0 + 1e-6, "=": got[0] == pytest.approx(v0, rel=1e-12), "<": got[0] < v0 - 1e-6}[vs_plain]


def test_yamb_turn_start_values_of_many_cards_are_each_cards_own():
    """Cards valued together (different open boxes and turn lengths) get what each gets alone."""
    from yamblab.search.yamb_search import YambFullTurnSearch, turn_start_values

    rng = np.random.default_rng(5)
    cards = [_jamb_card(rng, n, only)[1] for n, only in ((9, False), (3, True), (1, True), (1, False), (13, False))]
    r = make_game("yamb", preset="jamb_nn").rules
    search = YambFullTurnSearch(r, _CardValuation(r))
    together = turn_start_values(search, np.stack(cards))
    alone = [turn_start_values(search, c[None])[0] for c in cards]
    assert np.allclose(together, alone, rtol=1e-12) and len(set(np.round(alone, 6))) == 5


def test_start_values_of_some_games_leave_the_plans_being_played_alone():
    """TurnPlanner.start_values on a subset of a batch's games (in any order) gives what each
    card gets alone, and the plans the planner holds for the batch it plays stay as they were."""
    from yamblab.search.yamb_search import YambFullTurnSearch, _Cards, turn_start_values

    rng = np.random.default_rng(7)
    cards = np.stack([_jamb_card(rng, n, only)[1] for n, only in ((9, False), (1, True), (5, True), (13, False))])
    r = make_game("yamb", preset="jamb_nn").rules
    search = YambFullTurnSearch(r, _CardValuation(r))
    alone = turn_start_values(search, cards)
    cb = _Cards(r, cards)
    games = np.array([3, 0, 1])
    W = search.box_values(cb, games)
    K = rng.random((cb.n, r.max_rolls - 1, search.tables.n_keeps))
    key = np.arange(cb.n, dtype=np.int64)
    search._K, search._key = K.copy(), key.copy()
    assert np.allclose(search.start_values(cb, games, W), alone[games], rtol=1e-12)
    assert np.array_equal(search._K, K) and np.array_equal(search._key, key)
    cb.done[1] = True
    with pytest.raises(ValueError, match="finished game"):
        search.start_values(cb, games, W)


def test_a_full_card_has_no_turn_start_value():
    from yamblab.search.yamb_search import YambFullTurnSearch, turn_start_values

    r, card = _jamb_card(np.random.default_rng(0), 0, True)
    with pytest.raises(ValueError, match="full card"):
        turn_start_values(YambFullTurnSearch(r, _CardValuation(r)), card[None])


def test_lookahead_search_with_an_exact_valuation_changes_no_value():
    """The exact oracle of a single free column is its own one-turn search: valuing the best
    boxes of the last roll a turn deeper gives the Q full-turn search gives, at every decision
    of whole games (and some box choices are revalued)."""
    from yamblab.games.yamb.engine import YambBatch
    from yamblab.games.yamb.rules import FIXED_ROWS, get_preset
    from yamblab.oracle.yamb.free import FreeColumnOracle
    from yamblab.search.valuation import YambColumnOracleValuation
    from yamblab.search.yamb_search import YambFullTurnSearch, YambLookaheadSearch

    rules = get_preset("croatian").replace(rows=FIXED_ROWS + ("yamb",), upper_bonus=0)
    o = FreeColumnOracle(rules, n_threads=1)
    plain = YambFullTurnSearch(o.rules, YambColumnOracleValuation(o))
    deep = YambLookaheadSearch(o.rules, YambColumnOracleValuation(o), k=4)
    b = YambBatch(6, o.rules, seed=3)
    while not b.done.all():
        qp, qd = plain.action_values(b), deep.action_values(b)
        assert np.array_equal(np.isfinite(qp), np.isfinite(qd))
        assert np.allclose(qd[np.isfinite(qd)], qp[np.isfinite(qp)], atol=1e-9)
        b.step(np.where(b.done, -1, np.argmax(qp, axis=1)))
    assert deep.revalued > 0 and deep.changed == 0


def test_lookahead_search_values_the_best_boxes_through_the_engine():
    """Each of the k best boxes of a last roll is worth what the engine scores for it plus the
    turn-start value of the card the engine leaves; the other boxes keep full-turn search's Q."""
    from yamblab.games.yamb.engine import YambBatch
    from yamblab.search.yamb_search import YambFullTurnSearch, YambLookaheadSearch, turn_start_values

    r, card = _jamb_card(np.random.default_rng(11), 9)
    dice = np.array([6, 6, 5, 5, 2, 1])
    turn = r.n_turns - 9

    def at_last_roll():
        b = YambBatch(1, r, seed=0)
        b.core.set_state(0, card, dice, turn, r.rolls, -1, False)
        return b

    b = at_last_roll()
    qp = YambFullTurnSearch(r, _CardValuation(r)).action_values(b)[0]
    deep = YambLookaheadSearch(r, _CardValuation(r), k=3)
    qd = deep.action_values(b)[0]
    P = b.n_placements
    legal = np.flatnonzero(np.isfinite(qp[:P]))
    top = legal[np.argsort(-qp[legal], kind="stable")[:3]]
    assert legal.size > 3 and deep.revalued == 1
    for a in top:
        e = at_last_roll()
        before = float(e.total[0])
        e.step(np.array([a]))
        want = float(e.total[0]) - before + turn_start_values(YambFullTurnSearch(r, _CardValuation(r)),
                                                               np.asarray(e.card)[:1])[0]
        assert qd[a] == pytest.approx(want, rel=1e-12)
        assert qd[a] != pytest.approx(qp[a], rel=1e-9)          # a made-up valuation is not its own search
    rest = np.setdiff1d(np.arange(len(qp)), top)
    assert np.array_equal(qd[rest], qp[rest])
    with pytest.raises(ValueError, match="k=0"):
        YambLookaheadSearch(r, _CardValuation(r), k=0)


@pytest.mark.parametrize("given, needle", [
    ({"game": "yamb", "columns": []}, "name at least one column"),
    ({"game": "yahtzee", "preset": ""}, "`preset` is a Yamb option"),
    ({"game": "yahtzee", "columns": []}, "`columns` is a Yamb option"),
    ({"game": "yamb", "rules": ""}, "`rules` is a Yahtzee option"),
])
def test_an_empty_game_option_is_refused_like_any_other(given, needle):
    """An option given empty is still given: refused for the other game, and an empty column
    list refused by the card, never read as "not set"."""
    from yamblab.training.config import RunConfig

    with pytest.raises(ValueError, match=needle):
        RunConfig.model_validate(given)
