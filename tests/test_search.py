"""Expectimax search: oracle-driven full-turn search is optimal, the network paths agree with
the table paths, one-step search averages the dice exactly, and the policy targets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from yamblab.agents.base import make_agent
from yamblab.games.encoding import shared_action_to_yahtzee
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules
from yamblab.oracle.yahtzee.grading import grade
from yamblab.search.expectimax import FullTurnSearch, OneStepSearch, oracle_position_values
from yamblab.search.registry import make_search
from yamblab.search.targets import add_dirichlet_noise, policy_targets, two_hot

import yamblab.agents.search_agent  # noqa: F401  (registers "search")


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


class OracleValuation:
    """A perfect 'value head': the oracle's value of any encoded position."""

    def __init__(self, rules, table):
        self.rules, self.table = rules, table

    def values(self, enc):
        return oracle_position_values(enc, self.rules, self.table)


def test_full_turn_search_with_oracle_table_has_zero_regret(official_table):
    agent = make_agent("search", OFFICIAL, table=official_table, valuation="oracle")
    rep = grade(agent, OFFICIAL, games=50, seed=11, table=official_table)
    assert abs(rep.regret_mean) < 1e-9
    assert rep.regret_ci[1] < 1e-9


def test_search_through_encodings_matches_the_table_exactly(official_table):
    """Full-turn search through boundary encodings (the network path) reproduces the table's Q."""
    a = FullTurnSearch(OFFICIAL, official_table)
    b = FullTurnSearch(OFFICIAL, OracleValuation(OFFICIAL, official_table))
    batch = new_batch(40, OFFICIAL, seed=5)
    checked = 0
    while not batch.done.all():
        qa, qb = a.q(batch), b.q(batch)
        assert np.array_equal(np.isfinite(qa), np.isfinite(qb))
        f = np.isfinite(qa)
        np.testing.assert_allclose(qa[f], qb[f], atol=1e-9)
        checked += int(f.sum())
        act = np.where(batch.done, 0, np.argmax(qa, axis=1))
        batch.step(shared_action_to_yahtzee(act))
    assert checked > 40 * 13 * 10


def test_one_step_search_averages_every_roll_exactly(official_table):
    """With a perfect position valuation, one-step Q equals the oracle's action values."""
    rules = OFFICIAL
    a = FullTurnSearch(rules, official_table)
    s = OneStepSearch(rules, OracleValuation(rules, official_table))
    batch = new_batch(3, rules, seed=8)
    for step in range(6):
        qa, qs = a.q(batch), s.q(batch)
        f = np.isfinite(qa)
        assert np.array_equal(f, np.isfinite(qs))
        np.testing.assert_allclose(qs[f], qa[f], atol=1e-6)
        act = np.where(batch.done, 0, np.argmax(qa, axis=1))
        batch.step(shared_action_to_yahtzee(act))


def test_network_search_agent_plays_only_legal_moves(tmp_path):
    """Network-driven searches (every depth) never choose an illegal action."""
    from yamblab.agents.search_agent import network_agent
    from yamblab.model.network import build_model

    net = build_model("tiny", seed=3)
    for depth in ("none", "full_turn"):
        agent = network_agent(net, OFFICIAL, depth)
        batch = new_batch(30, OFFICIAL, seed=2)
        agent.reset(batch)
        while not batch.done.all():
            act = agent.act(batch)
            legal = batch.legal_actions()
            live = ~batch.done
            assert legal[np.flatnonzero(live), act[live]].all()
            batch.step(act)
        assert (batch.total > 0).all()


def test_checkpoint_valuation_agent(tmp_path, official_table):
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.config import ModelConfig

    state = Learner(ModelConfig.preset("tiny"), TrainConfig()).state_dict()
    path = save_checkpoint(tmp_path / "c.ckpt", {**state, "config": "game: yahtzee\nrules: forced\n"})
    agent = make_agent("search", OFFICIAL, table=official_table, valuation=str(path))
    rep = grade(agent, OFFICIAL, games=10, seed=1, table=official_table)
    assert rep.regret_mean > 0          # an untrained value head is not optimal
    with pytest.raises(ValueError):
        make_search("one_step", OFFICIAL, official_table.values)


@pytest.mark.parametrize("config,refusal", [
    ("game: yamb\npreset: jamb_nn\n", r"learned yamb jamb_nn\[down,free,up,announce\]; this command plays yahtzee forced"),
    ("game: yahtzee\nrules: free\n", "learned yahtzee free; this command plays yahtzee forced"),
    (None, "records no run config"),
])
def test_a_checkpoint_of_another_game_is_refused_by_name_before_any_game(tmp_path, official_table, config, refusal):
    """The network's inputs fit every game, so a Yamb network graded on Yahtzee (or on other
    Yahtzee rules) would give a silently wrong figure: the recorded run config is checked."""
    from yamblab.errors import ConfigError
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.model.config import ModelConfig

    state = Learner(ModelConfig.preset("tiny"), TrainConfig()).state_dict()
    path = save_checkpoint(tmp_path / "c.ckpt", {**state, **({"config": config} if config else {})})
    with pytest.raises(ConfigError, match=refusal):
        make_agent("search", OFFICIAL, table=official_table, valuation=str(path))


def test_search_with_network_path_on_a_variant_without_upper_bonus():
    """Without the upper bonus the table's upper lane is 0; the encoding path must agree."""
    from yamblab.oracle.yahtzee.table import OracleTable

    rules = YahtzeeRules.parse("free,no-upper-bonus")
    table = OracleTable.get(rules)
    a = FullTurnSearch(rules, table)
    b = FullTurnSearch(rules, OracleValuation(rules, table))
    batch = new_batch(10, rules, seed=3)
    while not batch.done.all():
        qa, qb = a.q(batch), b.q(batch)
        f = np.isfinite(qa)
        np.testing.assert_allclose(qa[f], qb[f], atol=1e-9)
        batch.step(shared_action_to_yahtzee(np.where(batch.done, 0, np.argmax(qa, axis=1))))
    rep = grade(make_agent("search", rules, table=table), rules, games=10, seed=2, table=table)
    assert abs(rep.regret_mean) < 1e-9


# ----------------------------------------------------------------------------- targets
def test_policy_target_formulas():
    rng = np.random.default_rng(0)
    q = rng.normal(200, 10, (5, 208))
    legal = rng.random((5, 208)) < 0.2
    legal[:, 0] = True
    q = np.where(legal, q, -np.inf)
    prior = rng.random((5, 208)) * legal
    prior /= prior.sum(axis=1, keepdims=True)
    T = 3.0
    plain = policy_targets(q, prior, T, kl=False)
    kl = policy_targets(q, prior, T, kl=True)
    for i in range(5):
        li = legal[i]
        e = np.exp((q[i, li] - q[i, li].max()) / T)
        np.testing.assert_allclose(plain[i, li], e / e.sum(), rtol=1e-5)
        w = prior[i, li] * np.exp((q[i, li] - q[i, li].max()) / T)
        np.testing.assert_allclose(kl[i, li], w / w.sum(), rtol=1e-4, atol=1e-7)
    assert np.all(plain[~legal] == 0) and np.all(kl[~legal] == 0)
    np.testing.assert_allclose(kl.sum(axis=1), 1.0, rtol=1e-5)
    # a uniform prior makes the KL target the plain one
    uni = legal / legal.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(policy_targets(q, uni, T, kl=True), plain, rtol=1e-4, atol=1e-7)
    # the KL target keeps a confident prior against a small noisy Q gap (the YoloYamb post's example)
    q2 = np.full((1, 208), -np.inf)
    q2[0, [3, 4]] = [100.0, 110.0]
    p2 = np.zeros((1, 208))
    p2[0, [3, 4]] = [0.999, 0.001]
    assert policy_targets(q2, p2, 8.0, kl=True)[0, 3] > 0.5 > policy_targets(q2, p2, 8.0, kl=False)[0, 3]
    with pytest.raises(ValueError):
        policy_targets(q, None, T, kl=True)
    with pytest.raises(ValueError):
        policy_targets(q, prior, 0.0, kl=False)


def test_two_hot_and_dirichlet_noise():
    centers = torch.linspace(0, 500, 51)
    v = torch.tensor([0.0, 3.0, 254.6, 500.0, 900.0, -5.0])
    t = two_hot(v, centers)
    assert torch.allclose(t.sum(dim=1), torch.ones(6))
    np.testing.assert_allclose((t @ centers).numpy(), [0, 3, 254.6, 500, 500, 0], atol=1e-3)
    assert int((t[2] > 0).sum()) == 2
    rng = np.random.default_rng(1)
    legal = rng.random((20, 208)) < 0.3
    legal[:, 5] = True
    prior = legal / legal.sum(axis=1, keepdims=True)
    noisy = add_dirichlet_noise(prior, legal, 0.15, 0.3, rng)
    assert np.all(noisy[~legal] == 0)
    np.testing.assert_allclose(noisy.sum(axis=1), 1.0)
    assert not np.allclose(noisy, prior)
    assert np.all(noisy >= 0.85 * prior - 1e-12)


def test_turn_start_values_of_the_oracle_are_the_table():
    """The turn value behind ``value_target_mix`` (the per-turn pass's last step) reproduces the
    oracle at its own states."""
    import numpy as np
    import pytest

    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.games.yahtzee.rules import OFFICIAL
    from yamblab.oracle.yahtzee import _kernels
    from yamblab.oracle.yahtzee.table import OracleTable

    V = np.ascontiguousarray(OracleTable.get(OFFICIAL).values)
    st = np.ascontiguousarray(new_batch(3, OFFICIAL, seed=1).boundary_states())
    start = np.full(3, np.nan)
    args = (OFFICIAL.joker_code, OFFICIAL.upper_bonus, OFFICIAL.yahtzee_bonus)
    _kernels.turn_solutions(V, *args, st, start)
    np.testing.assert_allclose(start, V[st[:, 0], st[:, 1], st[:, 2]], atol=1e-9)
    with pytest.raises(ValueError, match="start_values has 2 entries for 3 states"):
        _kernels.turn_solutions(V, *args, st, np.zeros(2))


def test_random_state_samples_lie_one_box_on_and_are_one_turn_backups():
    """Each game at a turn's start gets k states with one box more filled than its card, drawn
    from the whole layer (not only its own successors), valued by one exact turn against the
    valuation: with the oracle's values as valuation that is the oracle's own value."""
    from yamblab.oracle.yahtzee.table import OracleTable
    from yamblab.search.expectimax import decode_yahtzee, random_state_samples

    table = OracleTable.get(OFFICIAL)

    class OracleValues:          # a valuation object (as NetworkValuation) that answers exactly
        def values(self, enc):
            return oracle_position_values(enc, OFFICIAL, table)

    batch = new_batch(3, seed=3)
    batch.box_scores[1, :5] = [2, 4, 6, 8, 10]          # game 1: Ones..Fives filled, 5 boxes
    batch.box_scores[2, :12] = 0                         # game 2: its last turn (no layer beyond)
    rng = np.random.default_rng(0)
    enc, values, owner = random_state_samples(batch, np.arange(3), 40, OFFICIAL, OracleValues(), rng)
    assert enc.columns.shape[0] == values.shape[0] == owner.shape[0] == 80
    assert sorted(set(owner.tolist())) == [0, 1]
    scores, raw, states = decode_yahtzee(enc)
    filled = (scores >= 0).sum(axis=1)
    assert (filled[owner == 0] == 1).all() and (filled[owner == 1] == 6).all()
    np.testing.assert_allclose(values, table.values[states[:, 0], states[:, 1], states[:, 2]], atol=1e-9)
    mine = states[owner == 1, 0]
    assert ((mine & 0b11111) != 0b11111).any()            # not only game 1's own successors
    assert len(set(mine.tolist())) > 10                   # spread over the layer


def test_one_step_search_values_each_distinct_leaf_once_and_keeps_its_q():
    """Different keeps that reroll to the same dice in the same slots make the same leaf: valued
    once, fewer leaves, the same Q (to float32 batch rounding) at every decision of 3 games."""
    import numpy as np

    from yamblab.games.protocol import step_shared
    from yamblab.model.network import YambNet
    from yamblab.search.valuation import NetworkValuation
    from yamblab.search.yamb_search import YambOneStepSearch
    from yamblab.training.config import load_run_config

    cfg = load_run_config(Path(__file__).resolve().parents[1] / "configs" / "jamb-cpu.yaml")
    torch.manual_seed(0)
    net = YambNet(cfg.model).eval()
    game = cfg.game_obj
    got = {}
    try:
        for dedup in (True, False):
            YambOneStepSearch.dedup = dedup
            batch, val = game.new_batch(3, seed=5), NetworkValuation(net)
            search = make_search("one_step", game, val)
            qs = []
            for _ in range(5):
                q = search.q(batch)
                qs.append(q)
                step_shared(game, batch, np.argmax(np.where(np.isfinite(q), q, -np.inf), axis=1))
            got[dedup] = (qs, val.positions_evaluated)
    finally:
        YambOneStepSearch.dedup = True
    (on, n_on), (off, n_off) = got[True], got[False]
    assert n_on < 0.8 * n_off
    for a, b in zip(on, off):
        assert np.array_equal(np.isfinite(a), np.isfinite(b))
        assert np.allclose(a[np.isfinite(a)], b[np.isfinite(b)], atol=1e-3)
