"""Branched sweeps: arms that continue one trained base, each switch applied after the branch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from yamblab.errors import ConfigError
from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.learner import Learner
from yamblab.learners.selfplay import SelfPlay
from yamblab.model.config import ModelConfig
from yamblab.sweeps.branch import adapt_learner_state, check_branchable
from yamblab.sweeps.spec import load_sweep

ROOT = Path(__file__).resolve().parents[1]
TINY = ModelConfig.preset("tiny")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained():
    """A learner with a hold-correction head after two training iterations, and its samples."""
    torch.set_num_threads(1)
    sp = SelfPlay(TINY, TrainConfig(), SearchConfig(), OFFICIAL)
    samples, _ = sp.play_games(6, seed=3)
    learner = Learner(TINY, TrainConfig(batch_size=64))
    learner.train_iteration(samples, health=False)
    learner.train_iteration(samples, health=False)
    return learner, samples


def _policy(net, samples):
    net.eval()
    x, _ = samples.to_torch("cpu")
    with torch.no_grad():
        return net(x).logits


def test_dropping_the_hold_correction_keeps_every_other_weight_and_moment(trained):
    learner, samples = trained
    off = TINY.model_copy(update={"hold_correction": False})
    state = adapt_learner_state(learner.state_dict(), off)
    assert not any("hold_correction" in k for k in state["model"]) and not any("hold_correction" in k for k in state["ema"])
    branch = Learner(off, TrainConfig(batch_size=64))
    branch.load_state_dict(state)                     # strict: every weight present, none unexpected
    old = dict(learner.net.named_parameters())
    old_index = {n: i for i, n in enumerate(old)}
    old_moments = learner.optimizer.state_dict()["state"]
    for j, (name, p) in enumerate(branch.net.named_parameters()):
        assert torch.equal(p, old[name])
        got = branch.optimizer.state_dict()["state"][j]
        assert torch.equal(got["exp_avg"], old_moments[old_index[name]]["exp_avg"])
    # the switch takes effect: the policy without the head differs, and training goes on
    assert not torch.allclose(_policy(branch.net, samples), _policy(learner.net, samples))
    m = branch.train_iteration(samples, health=False)
    assert np.isfinite(m["total"])


def test_turning_the_hold_correction_on_starts_it_at_zero(trained):
    learner, samples = trained
    off = TINY.model_copy(update={"hold_correction": False})
    base = Learner(off, TrainConfig(batch_size=64))
    base.load_state_dict(adapt_learner_state(learner.state_dict(), off))
    on = adapt_learner_state(base.state_dict(), TINY, seed=5)
    branch = Learner(TINY, TrainConfig(batch_size=64))
    branch.load_state_dict(on)
    assert torch.equal(_policy(branch.net, samples), _policy(base.net, samples))     # unchanged at the branch
    branch.train_iteration(samples, health=False)
    w = branch.net.policy_head.hold_correction[-1].weight
    assert float(w.detach().abs().sum()) > 0                 # and then it learns


def test_the_entropy_term_is_zero_after_branching_with_the_bonus_off(trained):
    learner, samples = trained
    cfg = TrainConfig(batch_size=64, entropy_coef=0.0)
    branch = Learner(TINY, cfg)
    branch.load_state_dict(adapt_learner_state(learner.state_dict(), TINY))
    m = branch.train_iteration(samples, health=False)
    rest = m["policy"] + cfg.value_coef * m["value"] + cfg.aux_coef * (m["aux_bonus"] + m["aux_straight"])
    assert m["entropy"] > 0 and m["total"] == pytest.approx(rest, rel=1e-6, abs=1e-7)
    with_bonus = Learner(TINY, TrainConfig(batch_size=64))
    with_bonus.load_state_dict(adapt_learner_state(learner.state_dict(), TINY))
    m2 = with_bonus.train_iteration(samples, health=False)
    rest2 = m2["policy"] + m2["value"] + 0.1 * (m2["aux_bonus"] + m2["aux_straight"])
    assert m2["total"] == pytest.approx(rest2 - 0.003 * m2["entropy"], rel=1e-6, abs=1e-7)
    assert abs(m2["total"] - rest2) > 1e-6


def _spec(tmp_path, **extra) -> Path:
    data = yaml.safe_load((ROOT / "experiments" / "test-sweep.yaml").read_text())
    data["base"] = str(ROOT / "configs" / "yahtzee-tiny.yaml")
    data.update(extra)
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_an_arm_that_changes_the_network_or_the_game_is_refused_by_name(tmp_path):
    from yamblab.sweeps.driver import Sweep

    for arm, ov, word in [("wider", {"model.d_model": 64}, "model.d_model"),
                          ("other-rules", {"rules": "free"}, "rules")]:
        p = _spec(tmp_path, branch_from={"iterations": 2},
                  arms={"baseline": {}, arm: ov})
        spec, base = load_sweep(p, storage=str(tmp_path / "s.journal"))
        with pytest.raises(ConfigError, match=rf"arms\.{arm} cannot branch.*{word}"):
            Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", progress=False)
    with pytest.raises(ConfigError, match="exactly one of iterations, minutes or checkpoint"):
        load_sweep(_spec(tmp_path, branch_from={"iterations": 2, "minutes": 1.0}))
    with pytest.raises(ConfigError, match="no such file"):
        p = _spec(tmp_path, branch_from={"checkpoint": str(tmp_path / "nothing.pt")})
        spec, base = load_sweep(p, storage=str(tmp_path / "s2.journal"))
        Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", progress=False)


def test_check_branchable_allows_the_switchable_fields(tiny_config):
    from yamblab.sweeps.spec import SweepConfig

    spec = SweepConfig(name="s", base="x", branch_from={"iterations": 1}, arms={
        "baseline": {}, "no-hc": {"model.hold_correction": False}, "no-kl": {"train.kl_targets": False},
        "depth": {"search.depth": "one_step"}})
    check_branchable(spec, tiny_config, tiny_config)       # no error


def test_judging_on_a_solver_loss_needs_solver_eval(tmp_path):
    p = _spec(tmp_path, judge={"no-kl": "policy_regret"})
    with pytest.raises(ConfigError, match="runtime.solver_eval"):
        load_sweep(p)
    p = _spec(tmp_path, judge={"no-kl": "full_turn_exact"})
    with pytest.raises(ConfigError, match="boundary_head"):
        load_sweep(p)


def test_the_exact_regret_is_graded_only_where_an_arm_is_judged_on_it(tmp_path):
    """The main job grades the exact full-turn regret (about 3 s a trial) for the baseline and
    the arm judged on it only; an arm judged on it with ``runtime.exact_eval: false`` is
    refused by name before any work starts."""
    from yamblab.sweeps.branch import base_config
    from yamblab.training.config import apply_overrides

    spec, base = load_sweep(ROOT / "experiments" / "ablation-small.yaml", storage=str(tmp_path / "s.journal"))
    graded = {arm: apply_overrides(base, {**spec.overrides, **ov}).exact_evaluated
              for arm, ov in spec.arm_overrides().items()}
    assert graded == {"baseline": True, "no-kl-targets": False, "no-entropy-bonus": False,
                      "no-hold-correction": False, "outcome-value-targets": True}
    assert base_config(spec, base).exact_evaluated          # the branch point carries it for every arm
    cpu = str(ROOT / "configs" / "yahtzee-cpu.yaml")     # full-turn search on the boundary head
    load_sweep(_spec(tmp_path, base=cpu, judge={"no-kl": "full_turn_exact"}))      # graded: accepted
    p = _spec(tmp_path, base=cpu, overrides={"runtime.exact_eval": False}, judge={"no-kl": "full_turn_exact"})
    with pytest.raises(ConfigError, match="runtime.exact_eval"):
        load_sweep(p)


@pytest.mark.ray
def test_branched_sweep_starts_every_arm_from_the_base_and_reuses_it(ray_cluster, tmp_path, monkeypatch):
    """The base trains once; each trial evaluates the base's network at the branch point (the
    baseline's first evaluation equals the base's last, bit for bit); a rerun after a killed
    driver reuses the base; the arms are judged on a solver-graded loss."""
    from yamblab.sweeps.driver import Sweep

    monkeypatch.chdir(tmp_path)
    overrides = yaml.safe_load((ROOT / "experiments" / "test-sweep.yaml").read_text())["overrides"]
    overrides.update({"runtime.solver_eval": True, "runtime.solver_games": 12, "runtime.iterations": 1})
    p = _spec(tmp_path, overrides=overrides, branch_from={"iterations": 2, "seed": 7, "evaluate": "always"},
              arms={"baseline": {}, "no-hold-correction": {"model.hold_correction": False}},
              judge={"no-hold-correction": "policy_regret"})
    spec, base = load_sweep(p, storage=str(tmp_path / "study.journal"))
    base = base.model_copy(update={"runtime": base.runtime.model_copy(update={"run_dir": str(tmp_path / "runs")})})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    # a driver killed after training the base, before its trials finished
    killed = Sweep(spec, base, tracking_uri=uri, progress=False)
    monkeypatch.setattr(Sweep, "_run_trials", lambda self, *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        killed.run()
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    done = killed.base_run_dir() / "base-done.json"
    assert json.loads(done.read_text())["iteration"] == 2
    stamp = done.stat().st_mtime_ns

    sw = Sweep(spec, base, tracking_uri=uri, progress=False)
    rows = sw.run()
    assert any("already trained (2 iterations): reused" in m for m in sw.messages)
    assert done.stat().st_mtime_ns == stamp
    assert [(r["arm"], r["mode"]) for r in rows] == [("baseline", "policy_regret"), ("no-hold-correction", "policy_regret")]
    assert rows[0]["games"] == 12 and "diff" in rows[1] and rows[1]["half_width"] >= 0

    client = sw.tracker.client
    runs = client.search_runs([sw.tracker.experiment_id])
    bases = [r for r in runs if r.data.tags.get("yamblab.kind") == "base"]
    assert len(bases) == 1
    base_run = bases[0].info.run_id
    trials = {r.data.tags["yamblab.arm"]: r for r in runs if r.data.tags.get("yamblab.kind") == "trial"}
    assert set(trials) == {"baseline", "no-hold-correction"}

    def at(run_id, key):
        return {int(m.step): m.value for m in client.get_metric_history(run_id, key)}

    for key in ("eval.solver.all.expected_regret", "eval.regret_mean", "eval.policy_regret.regret_mean"):
        assert at(trials["baseline"].info.run_id, key)[2] == at(base_run, key)[2]        # bit for bit
    # the switch acts from the branch point: the network without the head plays differently
    assert (at(trials["no-hold-correction"].info.run_id, "eval.solver.all.expected_regret")[2]
            != at(base_run, "eval.solver.all.expected_regret")[2])
    for r in trials.values():
        assert sorted(at(r.info.run_id, "iteration")) == [3]                  # one iteration after the branch
        # the base's replay buffer carried on, the iteration's new positions added to it
        assert at(r.info.run_id, "buffer.positions")[3] == (at(base_run, "buffer.positions")[2]
                                                             + at(r.info.run_id, "selfplay.positions")[3])
        assert r.data.tags["yamblab.branch_iteration"] == "2"
        assert "checkpoint.pt" not in {a.path for a in client.list_artifacts(r.info.run_id)}
    # different training seeds than the base's: each trial's self-play played its own games
    from yamblab.model.checkpoint import load_checkpoint

    for d in (tmp_path / "runs" / "sweeps" / "test-sweep").iterdir():
        st = load_checkpoint(d / "checkpoint.pt")
        assert st["iteration"] == 3 and st["branch_iteration"] == 2 and "branch_eval_due" not in st


def test_the_judgeable_solver_losses_are_the_decision_sets_per_game_losses():
    from yamblab.actors.actors import EXACT_MODE as EVALUATOR_EXACT
    from yamblab.search.decision_set import DecisionSet, solver_losses
    from yamblab.training.config import EXACT_MODE, SOLVER_MODES

    assert EVALUATOR_EXACT == EXACT_MODE

    class Flat:            # a stub network: uniform over legal actions, value 0
        def predict(self, enc, chunk=8192):
            legal = np.asarray(enc.legal, np.float32)
            return legal / legal.sum(axis=1, keepdims=True), np.zeros(len(legal))

    from yamblab.games.protocol import make_game
    from yamblab.search.decision_set import decision_set

    dset = decision_set(make_game("yahtzee"), games=3, cache=False)
    assert isinstance(dset, DecisionSet)
    assert tuple(solver_losses(Flat(), dset).per_game) == SOLVER_MODES


def test_dropping_the_auxiliary_heads_leaves_the_policy_and_trains_on(trained):
    learner, samples = trained
    off = TINY.model_copy(update={"aux_heads": False})
    branch = Learner(off, TrainConfig(batch_size=64))
    branch.load_state_dict(adapt_learner_state(learner.state_dict(), off))
    assert branch.net.aux is None
    assert torch.equal(_policy(branch.net, samples), _policy(learner.net, samples))
    m = branch.train_iteration(samples, health=False)
    assert "aux_bonus" not in m and "aux_straight" not in m and np.isfinite(m["total"])   # no aux heads: no aux terms


def test_solver_eval_on_a_full_yamb_card_is_judged_on_its_endgame():
    from yamblab.training.config import RunConfig

    RunConfig(game="yamb", preset="croatian", runtime={"solver_eval": True})               # the endgame's set
    RunConfig(game="yamb", preset="croatian", columns=["down"], runtime={"solver_eval": True})   # a column: fine


def test_a_branch_takes_the_bases_last_evaluation_only_when_its_network_is_the_bases(trained, tiny_config, tmp_path):
    from yamblab.actors.replay import ReplayBuffer
    from yamblab.model.checkpoint import load_checkpoint, save_checkpoint
    from yamblab.sweeps.branch import branch_checkpoint
    from yamblab.training.config import apply_overrides
    from yamblab.training.resume import np_to_torch

    learner, _ = trained
    buf = ReplayBuffer(100, seed=1)
    history = [{"iteration": 4, "train.total": 1.0}, {"iteration": 5, "train.total": 0.5, "eval.regret_mean": 7.25}]
    evals = [{"iteration": 5, "per_game_regret": [7.0, 7.5]}]
    base = save_checkpoint(tmp_path / "base" / "checkpoint.pt", {
        "learner": learner.state_dict(), "buffer": np_to_torch(buf.state_dict()), "iteration": 5,
        "games_played": 40, "positions_total": 1500, "history": json.dumps(history), "evals": json.dumps(evals),
        "config": tiny_config.to_yaml(), "mlflow_run_id": "abc", "elapsed": 60.0,
        "model_config": TINY.model_dump(), "ema": learner.state_dict()["ema"], "model": learner.state_dict()["model"]})
    same = apply_overrides(tiny_config, {"train.seed": 3, "train.entropy_coef": 0.0, "train.weight_decay": 0.0})
    st = load_checkpoint(branch_checkpoint(base, same, tmp_path / "a"))
    assert not st["branch_eval_due"] and st["branch_iteration"] == 5 and st["mlflow_run_id"] == ""
    assert json.loads(st["history"]) == [{"iteration": 5, "games_played": 40, "selfplay.positions_total": 1500,
                                          "branch_point": 1.0, "seconds": 0.0, "minutes": 0.0,
                                          "eval.regret_mean": 7.25}]
    assert json.loads(st["evals"]) == evals
    assert st["buffer"]["rng"] != buf.state_dict()["rng"]          # the trial's own replay sampling
    assert st["buffer"]["data"] == {} and st["buffer_from"] == str(base.absolute())   # positions by reference
    assert st["learner"]["train_config"]["entropy_coef"] == 0.0
    assert [g["weight_decay"] for g in st["learner"]["optimizer"]["param_groups"]] == [0.0]   # AdamW's own copy
    other_eval = apply_overrides(same, {"runtime.eval_games": 7})        # graded otherwise: evaluates itself
    assert load_checkpoint(branch_checkpoint(base, other_eval, tmp_path / "e"))["branch_eval_due"]
    for cfg, how in [(apply_overrides(tiny_config, {"model.hold_correction": False}), "changed"), (same, "always")]:
        st = load_checkpoint(branch_checkpoint(base, cfg, tmp_path / how, evaluate=how))
        assert st["branch_eval_due"] and json.loads(st["history"]) == [] and json.loads(st["evals"]) == []


def test_spec_overrides_replace_the_files_spelling_and_the_base_keeps_its_length(tmp_path):
    from yamblab.sweeps.branch import base_config

    spec, base = load_sweep(ROOT / "experiments" / "ablation-small.yaml", storage=str(tmp_path / "s.journal"),
                            overrides={"overrides.runtime.iterations": 8, "arms.baseline.train.lr": 0.002,
                                       "seeds": [4, 5], "name": "b"})
    assert spec.overrides["runtime.iterations"] == 8 and "runtime" not in spec.overrides
    cfg = base_config(spec, base)
    assert cfg.runtime.iterations == 80 and cfg.train.lr == 0.002 and cfg.train.seed == 0
    for bad in ({"branch_from.overrides.runtime.iterations": 3}, {"branch_from.overrides.model.d_model": 64},
                {"branch_from.overrides.train.seed": 3}):
        with pytest.raises(ConfigError, match="branch_from.overrides"):
            load_sweep(ROOT / "experiments" / "ablation-small.yaml", overrides=bad)
    for arm_ov, word in [({"runtime.time_budget_minutes": 2}, "time_budget_minutes"),
                         ({"train.bot_share": 0.5}, "bot_share"), ({"runtime.replay_positions": 100}, "replay_positions")]:
        spec, base = load_sweep(_spec(tmp_path, branch_from={"iterations": 2}, arms={"baseline": {}, "x": arm_ov}))
        from yamblab.sweeps.driver import Sweep

        with pytest.raises(ConfigError, match=rf"arms\.x cannot branch.*{word}"):
            Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", progress=False)


def test_a_size_override_changes_the_network_and_a_branch_refuses_it(tmp_path):
    """``size`` among overrides (an arm, ``--set``) takes the new preset's shape, keeping the
    config's own model switches; a branched arm that sets it is refused by name."""
    from yamblab.sweeps.driver import Sweep
    from yamblab.training.config import apply_overrides, load_run_config

    cpu = load_run_config(ROOT / "configs" / "yahtzee-cpu.yaml")
    seed = apply_overrides(cpu, {"size": "seed"})
    assert (seed.size, seed.model.d_model, seed.model.n_shared) == ("seed", 192, 3)
    assert seed.model.boundary_head and seed.model.boundary_hidden == 256      # the config's own
    assert apply_overrides(cpu, {"size": "seed", "model.d_model": 128}).model.d_model == 128
    p = _spec(tmp_path, branch_from={"iterations": 2}, arms={"baseline": {}, "bigger": {"size": "small"}})
    spec, base = load_sweep(p, storage=str(tmp_path / "s.journal"))
    with pytest.raises(ConfigError, match=r"arms\.bigger cannot branch.*model\.d_model"):
        Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", progress=False)
