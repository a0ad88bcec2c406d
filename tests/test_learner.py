"""The training step: self-play samples, losses, EMA cadence, PPG, checkpoints, probes, health."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from yamblab.errors import DamagedFileError
from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.model.checkpoint import load_checkpoint, load_network, save_checkpoint
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.learner import Learner
from yamblab.learners.samples import SampleBatch
from yamblab.learners.selfplay import SelfPlay
from yamblab.model.config import ModelConfig
from yamblab.model.tokenizer import Inputs


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


TINY = ModelConfig.preset("tiny")


@pytest.fixture(scope="module")
def samples():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    sp = SelfPlay(TINY, TrainConfig(), SearchConfig(), OFFICIAL)
    s, stats = sp.play_games(12, seed=4, n_bot=3)
    torch.set_num_threads(old)
    return s, stats


def test_self_play_samples(samples):
    s, stats = samples
    n = len(s)
    assert s.columns.shape == (n, 8, 16, 2) and s.policy_target.shape == (n, 208)
    assert s.legal.shape == (n, 208) and s.value_target.shape == (n,)
    # 12 games x 13 boundary positions, no policy target there
    assert int((~s.has_policy).sum()) == 12 * 13
    assert np.all(s.policy_target[~s.has_policy] == 0)
    pt = s.policy_target[s.has_policy]
    np.testing.assert_allclose(pt.sum(axis=1), 1.0, rtol=1e-5)
    assert np.all(pt[~s.legal[s.has_policy]] == 0)            # never a target on an illegal move
    assert np.all(s.value_target >= 0) and s.value_target.max() > 100
    # value targets at game start are the final scores
    first = s.has_policy & (s.columns[:, 0, :13, 0].sum(axis=1) == 0) & (s.state[:, 2] == 1)
    assert first.sum() == 12
    assert stats["positions"] == n and stats["leaf_positions"] > 0
    assert np.isfinite(stats["score_mean"]) and np.isfinite(stats["bot_score_mean"])


def test_bot_games_get_one_hot_targets():
    sp = SelfPlay(TINY, TrainConfig(), SearchConfig(), OFFICIAL)
    s, _ = sp.play_games(2, seed=1, n_bot=2)
    pt = s.policy_target[s.has_policy]
    assert np.all(np.isin(pt, [0.0, 1.0])) and np.all(pt.sum(axis=1) == 1)


def test_set_weights_only_on_new_version():
    sp = SelfPlay(TINY, TrainConfig(), SearchConfig(), OFFICIAL)
    learner = Learner(TINY, TrainConfig())
    v, w = learner.get_weights()
    assert sp.set_weights(w, v) is True
    assert sp.set_weights(w, v) is False
    bad = dict(w)
    bad.pop(next(iter(bad)))
    with pytest.raises(RuntimeError):
        sp.set_weights(bad, v + 1)


def test_ema_is_updated_after_every_optimiser_step(samples):
    s, _ = samples
    cfg = TrainConfig(batch_size=64, ema_decay=0.9)
    learner = Learner(TINY, cfg)
    p0 = {k: v.clone() for k, v in learner.ema.model.state_dict().items()}
    m = learner.train_iteration(s, health=False)
    steps = len(s) // 64
    assert learner.steps == steps == learner.ema.updates == m["ema_updates"] == m["version"]
    assert steps > 1
    # the EMA formula after one more step
    before = {k: v.clone() for k, v in learner.ema.model.named_parameters()}
    x, t = s.take(slice(0, 64)).to_torch()
    learner._step(x, t)
    for k, p in learner.net.named_parameters():
        np.testing.assert_allclose(dict(learner.ema.model.named_parameters())[k].detach().numpy(),
                                   (0.9 * before[k] + 0.1 * p.detach()).numpy(), rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(p0[k], v) for k, v in learner.ema.model.state_dict().items())
    version, weights = learner.get_weights()
    assert version == steps + 1 and set(weights) == set(learner.net.state_dict())


def test_a_learner_restored_from_its_state_trains_as_the_unbroken_one(samples, tmp_path):
    """The minibatch order is in the learner's state: a run resumed from a checkpoint draws the
    minibatches (so the weights) an unbroken run draws."""
    s, _ = samples
    cfg = TrainConfig(batch_size=32)
    straight = Learner(TINY, cfg)
    straight.train_iteration(s, health=False)
    resumed = Learner(TINY, cfg)
    resumed.load_state_dict(load_checkpoint(save_checkpoint(tmp_path / "c.pt", straight.state_dict())))
    straight.train_iteration(s, health=False)
    resumed.train_iteration(s, health=False)
    for k, v in straight.net.state_dict().items():
        assert torch.equal(v, resumed.net.state_dict()[k]), k
    old = {k: v for k, v in straight.state_dict().items() if k != "rng"}    # a checkpoint from before
    Learner(TINY, cfg).load_state_dict(old)


def test_training_lowers_the_loss_on_a_fixed_batch(samples):
    s, _ = samples
    learner = Learner(TINY, TrainConfig(batch_size=len(s), lr=3e-3, entropy_coef=0.0))
    first = learner.train_iteration(s, health=False)
    for _ in range(25):
        last = learner.train_iteration(s, health=False)
    assert last["policy"] < first["policy"] - 0.1
    assert last["value"] < first["value"] - 0.1
    assert all(np.isfinite(v) for v in last.values())


def test_kl_and_plain_targets_differ(samples):
    sp_kl = SelfPlay(TINY, TrainConfig(kl_targets=True), SearchConfig(), OFFICIAL)
    sp_pl = SelfPlay(TINY, TrainConfig(kl_targets=False), SearchConfig(), OFFICIAL)
    w = Learner(TINY, TrainConfig()).get_weights()[1]
    sp_kl.set_weights(w, 0)
    sp_pl.set_weights(w, 0)
    a, _ = sp_kl.play_games(2, seed=9, noise=False)
    b, _ = sp_pl.play_games(2, seed=9, noise=False)
    # rows 0-1: the two boundary positions, rows 2-3: the first decisions (same positions)
    assert np.array_equal(a.columns[:4], b.columns[:4]) and np.array_equal(a.dice[:4], b.dice[:4])
    assert a.has_policy[2:4].all()
    assert not np.allclose(a.policy_target[2:4], b.policy_target[2:4])


def test_retired_settings_load_at_their_old_value_and_are_refused_otherwise():
    """A config recorded before a setting was removed (phasic policy gradient, max_in_flight)
    holds its old default: it still loads, the key dropped; any other value is refused with the
    reason, never silently ignored."""
    from pydantic import ValidationError

    from yamblab.training.config import RunConfig

    recorded = RunConfig().model_dump(mode="json")
    recorded["train"].update(phasic=False, phasic_every=4, phasic_aux_epochs=2, phasic_clone_coef=1.0)
    recorded["runtime"]["max_in_flight"] = 2
    assert RunConfig.model_validate(recorded) == RunConfig()
    with pytest.raises(ValidationError, match="phasic policy gradient was removed"):
        TrainConfig(phasic=True)
    with pytest.raises(ValidationError, match="max_in_flight"):
        RunConfig.model_validate({"runtime": {"max_in_flight": 3}})
    with pytest.raises(ValidationError, match="replaced by train.replay_ratio"):
        TrainConfig(epochs=2)


def test_health_metrics(samples):
    s, _ = samples
    m = Learner(TINY, TrainConfig(batch_size=128)).train_iteration(s)
    assert m["grad_norm"] > 0 and m["grad_norm/trunk"] > 0
    assert 0.0 <= m["dead_units"] <= 1.0
    ents = [v for k, v in m.items() if k.startswith("attention_entropy/")]
    assert len(ents) == TINY.n_shared + TINY.n_policy + TINY.n_value + 2  # + policy cross, value pool
    assert all(0.0 <= e <= 1.0 for e in ents)


def test_distill_oracle_is_off_by_default_and_changes_targets(official_table):
    assert TrainConfig().distill_oracle is False
    w = Learner(TINY, TrainConfig()).get_weights()[1]
    a = SelfPlay(TINY, TrainConfig(), SearchConfig(), OFFICIAL)
    b = SelfPlay(TINY, TrainConfig(distill_oracle=True), SearchConfig(), OFFICIAL, oracle_table=official_table)
    a.set_weights(w, 0)
    b.set_weights(w, 0)
    sa, _ = a.play_games(2, seed=3, noise=False)
    sb, _ = b.play_games(2, seed=3, noise=False)
    np.testing.assert_allclose(sb.value_target[0], official_table.new_game_value, rtol=1e-6)
    assert not np.allclose(sa.value_target, sb.value_target)


def test_train_config_validation():
    with pytest.raises(ValidationError):
        TrainConfig(temperature=0)
    with pytest.raises(ValidationError):
        TrainConfig(dirichlet_fraction=1.5)
    with pytest.raises(ValidationError):
        TrainConfig(nonsense=True)
    with pytest.raises(ValidationError):
        SearchConfig(depth="two_turns")
    assert TrainConfig().dirichlet_fraction == 0.15
    cfg = TrainConfig(bot_share=0.3, bot_taper_iterations=10)
    assert cfg.bot_share_at(0) == 0.3 and cfg.bot_share_at(5) == pytest.approx(0.15) and cfg.bot_share_at(12) == 0


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_and_refusals(tmp_path, samples):
    s, _ = samples
    learner = Learner(TINY, TrainConfig(batch_size=128))
    learner.train_iteration(s, health=False)
    path = save_checkpoint(tmp_path / "run" / "last.ckpt", learner.state_dict())
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]     # no temporary left over
    state = load_checkpoint(path)
    assert state["steps"] == learner.steps
    net = load_network(path)
    x = Inputs.from_encoded(_enc(s))
    with torch.no_grad():
        a, b = net(x), learner.ema.model.eval()(x)
    assert torch.allclose(a.logits, b.logits, atol=1e-6) and torch.allclose(a.value, b.value, atol=1e-4)
    for k, v in learner.ema.model.state_dict().items():
        assert torch.equal(net.state_dict()[k], v), k
    other = Learner(TINY, TrainConfig(seed=5))
    other.load_state_dict(state)
    assert other.steps == learner.steps

    raw = path.read_bytes()
    trunc = tmp_path / "trunc.ckpt"
    trunc.write_bytes(raw[: len(raw) - 1000])
    with pytest.raises(DamagedFileError, match="truncated"):
        load_checkpoint(trunc)
    with pytest.raises(DamagedFileError):
        load_network(trunc)
    flipped = bytearray(raw)
    flipped[-50] ^= 0xFF
    bad = tmp_path / "flipped.ckpt"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(DamagedFileError, match="checksum"):
        load_checkpoint(bad)
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(DamagedFileError):
        load_checkpoint(junk)
    # a complete file whose weights are incomplete is refused, never filled at random
    st = learner.state_dict()
    st["ema"] = {k: v for i, (k, v) in enumerate(st["ema"].items()) if i != 3}
    partial = save_checkpoint(tmp_path / "partial.ckpt", st)
    with pytest.raises(DamagedFileError, match="complete network"):
        load_network(partial)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.ckpt")
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))


def _enc(s: SampleBatch):
    from yamblab.games.encoding import EncodedBatch

    return EncodedBatch(columns=s.columns[:32], column_type=s.column_type[:32].astype(np.int64),
                        column_features=s.column_features[:32], dice=s.dice[:32].astype(np.int64),
                        state=s.state[:32], legal=s.legal[:32])


# ----------------------------------------------------------------------------- probes
def test_probes(official_table):
    from yamblab.agents.base import make_agent
    from yamblab.oracle.yahtzee.probes import PROBES, correct_actions, run_probes

    ok = correct_actions(OFFICIAL, official_table)
    assert ok.shape == (len(PROBES), 45) and ok.any(axis=1).all()
    assert run_probes(make_agent("oracle", OFFICIAL, table=official_table), OFFICIAL, official_table).pass_rate == 1.0
    rnd = run_probes(make_agent("random", OFFICIAL, seed=3), OFFICIAL, official_table)
    assert rnd.pass_rate < 1.0
    assert set(rnd.passed) == {p.name for p in PROBES}


def test_one_step_and_policy_only_self_play():
    """YoloYamb's one-step search and the policy alone also drive self-play legally."""
    for depth in ("one_step", "none"):
        sp = SelfPlay(TINY, TrainConfig(), SearchConfig(depth=depth), OFFICIAL)
        s, stats = sp.play_games(1, seed=2)
        assert int((~s.has_policy).sum()) == 13
        pt = s.policy_target[s.has_policy]
        assert np.all(pt[~s.legal[s.has_policy]] == 0)
        np.testing.assert_allclose(pt.sum(axis=1), 1.0, rtol=1e-5)
        assert (stats["leaf_positions"] > 1000) == (depth == "one_step")


def test_successor_samples_bootstrap_to_the_oracle_with_a_perfect_valuation():
    """Extra successor samples get their full-turn search value: with the oracle as the
    valuation of the next turn's boundary states, exactly the oracle's value of each."""
    import numpy as np

    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.games.yahtzee.rules import OFFICIAL
    from yamblab.search.expectimax import successor_samples
    from yamblab.oracle.yahtzee.table import OracleTable
    from yamblab.search.expectimax import decode_yahtzee, oracle_position_values

    table = OracleTable.get(OFFICIAL)

    class Perfect:
        def values(self, enc):
            return oracle_position_values(enc, OFFICIAL, table)

    b = new_batch(3, OFFICIAL, seed=5)
    enc, target, owner = successor_samples(b, np.arange(3), 4, OFFICIAL, Perfect(), np.random.default_rng(0))
    assert len(target) == 12 and sorted(owner.tolist()) == [0] * 4 + [1] * 4 + [2] * 4
    _, _, states = decode_yahtzee(enc)
    np.testing.assert_allclose(target, table.values[states[:, 0], states[:, 1], states[:, 2]], atol=1e-9)


def test_ema_warmup_follows_the_early_weights_then_settles_at_its_decay():
    """With warmup the n-th update uses min(decay, (1 + n) / (10 + n)): 0.1 first (the average
    jumps most of the way to the net), 0.999 from update 8,990 on; without it, decay always."""
    from yamblab.learners.ema import EMA

    net = torch.nn.Linear(2, 1)
    ema = EMA(net, 0.999, warmup=True)
    assert ema.current_decay() == pytest.approx(0.1)
    with torch.no_grad():
        w0 = ema.model.weight.clone()
        net.weight.add_(1.0)
    ema.update(net)
    np.testing.assert_allclose(ema.model.weight.numpy(), (0.1 * w0 + 0.9 * net.weight.detach()).numpy(), rtol=1e-6)
    ema.updates = 8989
    assert ema.current_decay() < 0.999
    ema.updates = 8990
    assert ema.current_decay() == pytest.approx(0.999)
    assert EMA(net, 0.999).current_decay() == 0.999


# --------------------------------------------------------------------------- learner_compile
def _boundary_batch(samples):
    """A mixed batch (turn starts and decisions) for a network with a boundary head."""
    s, _ = samples
    x, t = s.to_torch()
    return x[:64], {k: v[:64] for k, v in t.items()}


def test_transformer_argument_stands_in_for_the_transformer_pass(samples):
    from yamblab.model.network import YambNet

    torch.manual_seed(0)
    net = YambNet(ModelConfig.preset("tiny", boundary_head=True)).eval()
    x, _ = _boundary_batch(samples)
    rows = []

    def spy(xx):
        rows.append(len(xx))
        return net.transformer_pass(xx)

    with torch.no_grad():
        a, b = net(x), net(x, transformer=spy)
    n_dice = int((x.dice[:, 0] != 0).sum())
    assert 0 < n_dice < len(x) and rows == [n_dice]       # only the rows with dice, once
    for f in ("logits", "value", "value_logits", "bonus_logit", "straight_logits"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f


def test_compile_toolchain_is_checked_with_a_clear_error(monkeypatch):
    from yamblab.errors import ConfigError
    from yamblab.learners import learner as mod

    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="learner_compile needs a C\\+\\+ compiler.*g\\+\\+"):
        mod.check_compile_toolchain("cpu")
    with pytest.raises(ConfigError, match="C\\+\\+ compiler"):
        Learner(TINY, TrainConfig(), compile=True)
    mod.check_compile_toolchain("cuda")                   # Triton, not C++: nothing to check
    monkeypatch.setattr(mod.shutil, "which", lambda name: "/usr/bin/x" if name == "my-cxx" else None)
    monkeypatch.setenv("CXX", "my-cxx")
    mod.check_compile_toolchain("cpu")


def test_a_run_without_a_compiler_is_refused_before_its_folder(monkeypatch, tmp_path):
    from yamblab.errors import ConfigError
    from yamblab.learners import learner as mod
    from yamblab.training.config import RunConfig
    from yamblab.training.runtime import TrainingRun

    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    cfg = RunConfig.model_validate({"runtime": {"learner_compile": True, "actors": "in_process",
                                                "max_policy_lag": 0}})
    with pytest.raises(ConfigError, match="C\\+\\+ compiler"):
        TrainingRun(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_setting_at_its_default_never_moves_a_digest():
    """A config's digest holds only its game's identity and what differs from the defaults, so a
    setting added to yamblab later, at its default, leaves recorded arms alone. Checked for every
    setting of every shipped config: set explicitly to its default, the digest stays; moved off
    it (a changed number, a flipped switch), the digest moves; name and run folder never count."""
    from yamblab.sweeps.branch import config_digest, digest_of
    from yamblab.training.config import RunConfig, apply_overrides, load_run_config
    from yamblab.training.configio import flatten

    root = Path(__file__).resolve().parents[1]
    default = flatten(RunConfig().model_dump(mode="json"))
    for path in sorted((root / "configs").glob("*.yaml")):
        cfg = load_run_config(path)
        d = config_digest(cfg)
        assert config_digest(apply_overrides(cfg, {"name": "other", "runtime.run_dir": "elsewhere"})) == d
        mine = flatten(cfg.model_dump(mode="json"))
        moved = 0
        for key, value in mine.items():
            if key in ("name", "runtime.run_dir") or key not in default or value != default[key]:
                continue
            try:     # an explicit default is no change
                assert config_digest(apply_overrides(cfg, {key: value})) == d, key
            except Exception as exc:  # noqa: BLE001 - a default some validator ties to another field
                if "ConfigError" not in type(exc).__name__:
                    raise
            other = (not value if isinstance(value, bool) else value + 1 if isinstance(value, int)
                     else value * 1.5 + 0.01 if isinstance(value, float) else None)
            if other is None:
                continue
            try:
                changed = apply_overrides(cfg, {key: other})
            except Exception:  # noqa: BLE001 - out of bounds, or refused with this config
                continue
            assert config_digest(changed) != d, key
            moved += 1
        assert moved > 20, (path.name, moved)
        # a config recorded before a setting existed: its dump lacks the key, the digest is the same
        dump = cfg.model_dump(mode="json")
        base = RunConfig.model_validate({k: getattr(cfg, k) for k in ("game", "rules", "preset", "columns", "size")
                                         if getattr(cfg, k) is not None}).model_dump(mode="json")
        assert digest_of(dump, base) == d
        for section, fields in dump.items():
            for key in [k for k in (fields if isinstance(fields, dict) else {}) if fields[k] == base[section].get(k)]:
                older = {**dump, section: {k: v for k, v in fields.items() if k != key}}
                assert digest_of(older, base) == d, f"{section}.{key}"
    assert config_digest(RunConfig()) != config_digest(RunConfig(game="yamb"))


@pytest.mark.skipif(not any(__import__("shutil").which(n) for n in ("g++", "clang++", "c++")),
                    reason="torch.compile on a CPU needs a C++ compiler")
def test_compiled_learner_steps_agree_with_eager_ones(samples):
    """About a minute of compiling on a 2-core machine (once per machine: inductor caches)."""
    model = ModelConfig.preset("tiny", boundary_head=True)
    s, _ = samples
    eager, comp = Learner(model, TrainConfig(seed=3)), Learner(model, TrainConfig(seed=3), compile=True)
    assert eager.transformer is None and comp.transformer is not None
    x, t = _boundary_batch(samples)
    with torch.no_grad():
        a, b = eager.net(x), comp.net(x, transformer=comp.transformer)
    torch.testing.assert_close(b.value, a.value, rtol=1e-4, atol=1e-3)
    legal = x.legal
    torch.testing.assert_close(b.logits[legal], a.logits[legal], rtol=1e-4, atol=1e-4)
    one = x[(x.dice[:, 0] != 0).nonzero()[0]]            # one row: eager, no recompile
    torch.testing.assert_close(comp.transformer(one)[2], eager.net.transformer_pass(one)[2])
    me, mc = eager.train_iteration(s, health=False), comp.train_iteration(s, health=False)
    assert me["steps"] == mc["steps"] > 0
    for k in ("total", "policy", "value"):
        assert mc[k] == pytest.approx(me[k], rel=2e-3, abs=1e-4), k
    for (name, pa), (_, pb) in zip(eager.net.named_parameters(), comp.net.named_parameters()):
        torch.testing.assert_close(pb, pa, rtol=1e-3, atol=1e-4, msg=name)
