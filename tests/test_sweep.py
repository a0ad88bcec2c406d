"""Sweeps through Ray, Optuna and MLflow."""

from pathlib import Path

import numpy as np
import pytest

from yamblab.errors import ConfigError
from yamblab.sweeps.report import format_run_summaries, format_table
from yamblab.sweeps.spec import load_sweep
from yamblab.sweeps.stats import ArmResult, summarise

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.ray
def test_two_arm_sweep_leaves_parent_and_child_runs_and_resumes(ray_cluster, tmp_path, monkeypatch):
    from yamblab.sweeps.driver import Sweep

    import yaml

    monkeypatch.chdir(tmp_path)
    # the test sweep, its trials graded on two modes (main: full-turn search on 10 games; the
    # policy head alone on 16), the no-kl arm judged on the policy head alone
    data = yaml.safe_load((ROOT / "experiments" / "test-sweep.yaml").read_text())
    data["base"] = str(ROOT / "configs" / "yahtzee-tiny.yaml")
    data["overrides"]["runtime.eval_modes"] = {"none": 16}
    data["judge"] = {"no-kl": "none"}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(data))
    spec, base = load_sweep(tmp_path / "sweep.yaml", storage=str(tmp_path / "study.journal"))
    base = base.model_copy(update={"runtime": base.runtime.model_copy(update={"run_dir": str(tmp_path / "runs")})})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sw = Sweep(spec, base, tracking_uri=uri, progress=False)
    rows = sw.run()
    assert [(r["arm"], r["mode"]) for r in rows] == [("baseline", "none"), ("no-kl", "none")]
    assert all(r["games"] == 16 and np.isfinite(r["regret"]) for r in rows)
    assert "diff" in rows[1] and rows[1]["diff_low"] <= rows[1]["diff"] <= rows[1]["diff_high"]
    assert rows[1]["mde"] >= 0 and "mode" in sw.table_text.splitlines()[0] and "mode none:" in sw.table_text
    for t in sw._study().trials:      # every mode's per-game regrets, for a resumed sweep's table
        assert t.user_attrs["eval_mode"] == "full_turn"
        assert {m: len(v) for m, v in t.user_attrs["per_game_regret_modes"].items()} == {"full_turn": 10, "none": 16}
        assert t.user_attrs["summary"]["summary.policy_regret"] == pytest.approx(
            np.mean(t.user_attrs["per_game_regret_modes"]["none"]), abs=1e-4)
    assert "Each run's own curve" in sw.table_text      # trained from scratch: each run's summary

    client = sw.tracker.client
    runs = client.search_runs([sw.tracker.experiment_id])
    parents = [r for r in runs if r.data.tags.get("yamblab.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and len(children) == 2
    for child in children:
        assert "eval.regret_mean" in child.data.metrics and "eval.none.regret_mean" in child.data.metrics
        assert child.data.params["train.kl_targets"] in ("True", "False")
        assert child.data.tags["yamblab.rules_hash"] == base.rules_obj.digest
        names = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"config.yaml", "learning_curve.png", "score_histogram.png", "regret_breakdown.png"} <= names
        assert "checkpoint.pt" not in names        # the resumable checkpoint stays in runs/
        logged_models = client.search_logged_models([sw.tracker.experiment_id]) if hasattr(
            client, "search_logged_models") else None
        assert logged_models is None or any(m.source_run_id == child.info.run_id for m in logged_models)
    assert {"results.txt", "regret_by_arm.png", "results_table.json", "curves.json", "curves_full_turn.png",
            "curves_none.png"} <= {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    import json

    table = json.loads(Path(client.download_artifacts(parents[0].info.run_id, "results_table.json",
                                                      str(tmp_path))).read_text())
    assert "mode" in table["columns"] and "mde" in table["columns"]
    curves = json.loads(Path(client.download_artifacts(parents[0].info.run_id, "curves.json", str(tmp_path))).read_text())
    assert set(curves) == {"full_turn", "none"} and set(curves["none"]) == {"baseline", "no-kl"}
    # seeds named apart in every run; per-arm aggregates with intervals on the parent run
    for child in children:
        assert child.data.tags["yamblab.training_seed"] == "0"
        assert child.data.tags["yamblab.evaluation_seed"] == str(base.runtime.eval_seed)
    assert parents[0].data.tags["yamblab.training_seeds"] == "0"
    pm = client.get_run(parents[0].info.run_id).data.metrics
    for r in rows:
        assert pm[f"{r['key']}.regret"] == pytest.approx(r["regret"])
        assert pm[f"{r['key']}.ci_low"] <= pm[f"{r['key']}.regret"] <= pm[f"{r['key']}.ci_high"]
    assert rows[0]["key"] == "baseline.none"        # the baseline off its main mode
    assert pm["no-kl.diff_low"] <= pm["no-kl.diff"] <= pm["no-kl.diff_high"]
    assert pm["no-kl.mde"] == pytest.approx(rows[1]["mde"])

    # resuming a finished sweep reruns nothing
    import optuna

    study_before = len(sw._study().trials)
    sw2 = Sweep(spec, base, tracking_uri=uri, progress=False)
    assert sw2._pending(sw2._study()) == []
    rows2 = sw2.run()
    assert len(sw2._study().trials) == study_before
    assert [r["regret"] for r in rows2] == [r["regret"] for r in rows]
    assert len(client.search_runs([sw.tracker.experiment_id],
                                  "tags.`yamblab.kind` = 'trial'")) == 2
    assert "resuming: 2 finished trials kept, 0 to run" in sw2.plan_text

    # an edited spec: baseline unchanged (kept), no-kl dropped, a new arm runs, and it says so
    edited = spec.model_copy(update={"arms": {"baseline": {}, "no-entropy": {"train.entropy_coef": 0.0}},
                                     "judge": {"no-entropy": ["none"]}})
    sw3 = Sweep(edited, base, tracking_uri=uri, progress=False)
    rows3 = sw3.run()
    assert "unchanged, kept: baseline/seed0" in sw3.plan_text
    assert "new (not run before): no-entropy/seed0" in sw3.plan_text
    assert "no longer in the spec (kept in the study, left out of the table): no-kl" in sw3.plan_text
    assert [r["arm"] for r in rows3] == ["baseline", "no-entropy"]
    assert rows3[0]["regret"] == rows[0]["regret"]          # the baseline was not run again
    assert len(client.search_runs([sw.tracker.experiment_id], "tags.`yamblab.kind` = 'trial'")) == 3
    del optuna


def test_resume_plan_after_an_edited_spec(tmp_path, monkeypatch):
    """What a resumed grid keeps and runs, from the study alone (no Ray): unchanged arms kept,
    changed and new arms run, dropped arms named, interrupted trials carried on in their run."""
    import optuna
    from yamblab.sweeps.branch import config_digest
    from yamblab.sweeps.driver import Sweep

    monkeypatch.chdir(tmp_path)
    spec, base = load_sweep(ROOT / "experiments" / "test-sweep.yaml")
    sw = Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", progress=False)
    study = optuna.create_study(direction="minimize")
    want = sw.grid()
    def add(arm, state, digest, run_id="r"):
        study.add_trial(optuna.trial.create_trial(
            params={}, distributions={}, state=state,
            value=1.0 if state == optuna.trial.TrialState.COMPLETE else None,
            user_attrs={"arm": arm, "seed": 0, "config_digest": digest, "mlflow_run_id": run_id,
                        "per_game_regret": [1.0]}))

    C, F = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL
    add("baseline", C, want[("baseline", 0)].digest)       # unchanged: kept
    add("no-kl", C, "0123456789ab")                    # ran with another config: changed
    add("gone", C, "whatever")                         # no longer in the spec
    plan = sw.plan(study)
    assert plan.kept == ["baseline/seed0"] and plan.dropped == ["gone"]
    assert [(s.key, s.why) for s in plan.slots] == [("no-kl/seed0", "changed")]
    text = plan.describe(spec.name)
    assert "changed since they ran (run again): no-kl/seed0" in text and "gone" in text

    # an interrupted trial (its driver killed) carries on in its own MLflow run
    add("no-kl", optuna.trial.TrialState.RUNNING, want[("no-kl", 0)].digest, run_id="run-7")
    plan = sw.plan(study)
    assert [(s.key, s.why, s.run_id) for s in plan.slots] == [("no-kl/seed0", "interrupted", "run-7")]
    assert study.trials[-1].state == F
    assert "interrupted (carried on from their checkpoints): no-kl/seed0" in plan.describe(spec.name)
    # the digest ignores the run folder, and sees any change that matters
    cfg = want[("baseline", 0)].cfg
    moved = cfg.model_copy(update={"runtime": cfg.runtime.model_copy(update={"run_dir": "/elsewhere"})})
    assert config_digest(moved) == config_digest(cfg)
    assert config_digest(cfg.model_copy(update={"train": cfg.train.model_copy(update={"lr": 0.5})})) != config_digest(cfg)


def test_runs_a_killed_driver_left_are_carried_on_not_doubled(tmp_path, monkeypatch):
    """A driver killed after it created the sweep's and a trial's MLflow runs but before the
    study held their ids: the next driver carries on in those runs instead of making new ones
    (no Ray). And a trial the study has finished whose run a killed driver left running is
    ended."""
    import optuna

    from yamblab.sweeps.driver import Slot, Sweep

    monkeypatch.chdir(tmp_path)
    spec, base = load_sweep(ROOT / "experiments" / "test-sweep.yaml", storage=str(tmp_path / "s.journal"))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = Sweep(spec, base, tracking_uri=uri, progress=False)
    parent = first._parent_run(optuna.create_study(direction="minimize"))
    slot = Slot("baseline/seed0", {"arm": "baseline", "seed": 0})
    first.open_trial(optuna.create_study(direction="minimize"), parent, slot)

    study = optuna.create_study(direction="minimize")      # a study that never learned their ids
    again = Sweep(spec, base, tracking_uri=uri, progress=False)
    assert again._parent_run(study) == parent == study.user_attrs["mlflow_parent_run_id"]
    slot2 = Slot("baseline/seed0", {"arm": "baseline", "seed": 0})
    again.open_trial(study, parent, slot2)
    assert slot2.run_id == slot.run_id
    client = again.tracker.client
    assert len(client.search_runs([again.tracker.experiment_id])) == 2
    study.tell(slot2.trial, 1.0)        # killed right after telling Optuna
    assert client.get_run(slot.run_id).info.status == "RUNNING"
    again._end_finished_runs(study)
    assert client.get_run(slot.run_id).info.status == "FINISHED"


def test_bad_sweep_file_is_refused_with_the_key_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: x\nkind: grid\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
                   "arms:\n  a: {{}}\n  b: {{train.learning_rate: 0.1}}\n".replace("{{}}", "{}").replace(
                       "{{train.learning_rate: 0.1}}", "{train.learning_rate: 0.1}"))
    with pytest.raises(ConfigError, match=r"arms\.b.*train\.learning_rate.*unknown key"):
        load_sweep(bad)
    bad.write_text("name: x\nkind: grid\nbase: nowhere.yaml\narms: {a: {}}\n")
    with pytest.raises(ConfigError, match="no such config file"):
        load_sweep(bad)
    bad.write_text(f"name: x\nkind: grid\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\narms: {{a: {{}}}}\nparalel: 2\n")
    with pytest.raises(ConfigError, match="paralel: unknown key"):
        load_sweep(bad)
    bad.write_text(f"name: x\nkind: grid\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
                   "arms: {a: {train.lr: -1}}\n")
    with pytest.raises(ConfigError, match=r"train\.lr.*greater than 0"):
        load_sweep(bad)


def test_bad_run_config_names_file_and_key(tmp_path):
    from yamblab.training.config import load_run_config

    p = tmp_path / "run.yaml"
    p.write_text("name: x\ntrain: {batch_size: 0}\n")
    with pytest.raises(ConfigError, match=r"run\.yaml: train\.batch_size: Input should be greater than or equal to 1"):
        load_run_config(p)
    p.write_text("name: x\nrules: strict\n")
    with pytest.raises(ConfigError, match="rules.*strict"):
        load_run_config(p)
    p.write_text("size: huge\n")
    with pytest.raises(ConfigError, match="size"):
        load_run_config(p)


def test_summary_paired_difference():
    base = ArmResult("base", np.array([[10.0, 20.0, 30.0, 40.0]]), [0])
    better = ArmResult("better", np.array([[8.0, 17.0, 29.0, 37.0]]), [0])
    rows = summarise({"base": base, "better": better}, "base")
    assert rows[1]["diff"] == pytest.approx(-2.25)
    # one seed: Student t over the 4 paired games
    from scipy import stats

    d = np.array([-2.0, -3.0, -1.0, -3.0])
    half = stats.t.ppf(0.975, 3) * stats.sem(d)
    assert rows[1]["diff_high"] == pytest.approx(-2.25 + half) and rows[1]["matters"] is True
    text = format_table(rows, "base")
    assert "better" in text and "(baseline)" in text


def test_arms_that_played_the_same_games_are_said_not_measured():
    """A deterministic mode on the same dice can give two arms identical games: the table must
    not call the zero-width interval a precise verdict, and says which modes can tell them apart."""
    games = np.array([[310.0, 280.0, 295.0, 301.0]])
    rows = summarise({"base": ArmResult("base", games, [0]), "same": ArmResult("same", games.copy(), [0])}, "base")
    text = format_table(rows, "base", loss="points below heuristic")
    assert "the same games: not measured" in text and "no clear difference" not in text
    assert "cannot tell these arms apart" in text and "runtime.solver_eval" in text and "within the" not in text
    other = summarise({"base": ArmResult("base", games, [0]), "up": ArmResult("up", games + [[1, -2, 3, 0]], [0])},
                      "base")
    assert "(points behind the bot per game); 0 of 1 within" in format_table(other, "base", loss="points below heuristic")
    assert "0.0031" in format_run_summaries({"a": [(0, {"summary.positions": 3100})]})   # not 0.00 M positions


def test_seed_spread_widens_the_interval():
    rng = np.random.default_rng(0)
    games = rng.normal(40, 10, size=200)
    base = ArmResult("base", np.stack([games, games]), [0, 1])
    # the arm is 3 points better on one seed and 3 points worse on the other: no clear verdict
    arm = ArmResult("arm", np.stack([games - 3, games + 3.2]), [0, 1])
    rows = summarise({"base": base, "arm": arm}, "base")
    assert rows[1]["diff_low"] < 0 < rows[1]["diff_high"] and rows[1]["matters"] is False
    assert rows[1]["seed_means"][0] < rows[1]["seed_means"][1]


def test_per_seed_means_print_with_the_tables_two_decimals():
    """Exact regrets of 0.14 and 0.16 a game must not print as 0.1, 0.2 under a table that
    shows two decimals."""
    base = ArmResult("base", np.array([[0.13, 0.15], [0.15, 0.17]]), [0, 1])
    text = format_table(summarise({"base": base}, "base"), "base")
    assert "per-seed mean  base: 0.14, 0.16" in text


def _judge_spec(tmp_path, **extra):
    import yaml

    spec = {"name": "judge", "kind": "grid", "base": str(ROOT / "configs" / "yahtzee-tiny.yaml"),
            "overrides": {"runtime.worker_cpus": 0.5, "runtime.learner_cpus": 0.25, "runtime.eval_cpus": 0.25,
                          "runtime.eval_modes": {"none": 20}},
            "arms": {"baseline": {}, "no-kl": {"train.kl_targets": False}, "outcome": {"train.value_target_mix": 0.0}},
            **extra}
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_judge_names_an_arm_and_a_mode_the_trials_grade(tmp_path):
    """Each arm's mode: named arms must exist, and the mode must be graded by the arm's and the
    baseline's trials (the main mode or runtime.eval_modes); else one clear error naming both."""
    from yamblab.sweeps.driver import Sweep

    spec, base = load_sweep(_judge_spec(tmp_path, judge={"no-kl": "none"}))
    assert spec.judge_modes(base) == {"baseline": ["full_turn"], "no-kl": ["none"], "outcome": ["full_turn"]}
    with pytest.raises(ConfigError, match=r"judge\.nokl: no arm is called 'nokl' \(the arms: baseline, no-kl, outcome\)"):
        load_sweep(_judge_spec(tmp_path, judge={"nokl": "none"}))
    with pytest.raises(ConfigError, match=r"judge\.no-kl\.0: Input should be 'none', 'one_step', 'full_turn', 'policy_regret'.* or 'full_turn_exact'"):
        load_sweep(_judge_spec(tmp_path, judge={"no-kl": "policy"}))
    with pytest.raises(ConfigError, match=r"judge\.baseline: 'baseline' is the baseline arm"):
        load_sweep(_judge_spec(tmp_path, judge={"baseline": "none"}))
    with pytest.raises(ConfigError, match=r"arm 'no-kl' is judged on mode 'one_step', which its trials do not grade"):
        spec, base = load_sweep(_judge_spec(tmp_path, judge={"no-kl": "one_step"}))
        Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", progress=False)
    # a mode the arm grades but the baseline does not: refused when the spec is read
    with pytest.raises(ConfigError, match=r"judge\.no-kl: arm 'no-kl' is judged on mode 'one_step', which the "
                                          r"trials of the baseline arm 'baseline' do not grade.*runtime\.eval_modes\.one_step"):
        load_sweep(_judge_spec(tmp_path, judge={"no-kl": "one_step"},
                               arms={"baseline": {}, "no-kl": {"runtime.eval_modes.one_step": 10}}))
    tpe = tmp_path / "tpe.yaml"
    tpe.write_text(f"name: t\nkind: tpe\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
                   "params: {train.lr: {low: 0.001, high: 0.01}}\njudge: {a: none}\n")
    with pytest.raises(ConfigError, match="judge: a tpe sweep has no arms to judge"):
        load_sweep(tpe)


def _mode_arms(rng, games_none=2000, games_full=200, seeds=(0, 1), effect_none=0.0, effect_full=2.0):
    """A baseline and two arms graded on two modes (main: full_turn; none on more games)."""
    g_full = rng.gamma(2.0, 5.0, size=(len(seeds), games_full))
    g_none = rng.gamma(2.0, 8.0, size=(len(seeds), games_none))
    base = ArmResult("base", g_full, list(seeds), mode="full_turn", modes={"none": g_none})
    noise = lambda shape: rng.normal(0.0, 2.0, size=shape)  # noqa: E731 - paired per-game noise
    policy = ArmResult("policy-idea", g_full + noise(g_full.shape), list(seeds), mode="full_turn",
                       modes={"none": g_none + effect_none + noise(g_none.shape)})
    value = ArmResult("value-idea", g_full + effect_full + noise(g_full.shape), list(seeds), mode="full_turn",
                      modes={"none": g_none + noise(g_none.shape)})
    return {"base": base, "policy-idea": policy, "value-idea": value}


def test_each_arm_is_judged_on_its_mode_with_its_mde():
    from yamblab.sweeps.stats import minimum_detectable_effect

    rng = np.random.default_rng(1)
    arms = _mode_arms(rng, seeds=tuple(range(6)))      # six training seeds: their spread is measured
    rows = summarise(arms, "base", {"policy-idea": "none"})
    assert [(r["arm"], r["mode"]) for r in rows] == [("base", "none"), ("base", "full_turn"),
                                                      ("policy-idea", "none"), ("value-idea", "full_turn")]
    pol, val = rows[2], rows[3]
    assert pol["games"] == 2000 and val["games"] == 200
    # no effect, many games: a tight interval around 0 and a small MDE
    assert pol["diff_low"] < 0 < pol["diff_high"] and pol["matters"] is False
    assert pol["half_width"] < 0.15 and pol["mde"] < 0.25
    assert pol["mde"] == pytest.approx(minimum_detectable_effect(pol["half_width"]))
    from scipy import stats

    z = stats.norm.ppf(0.975)
    assert minimum_detectable_effect(1.0) == pytest.approx((z + stats.norm.ppf(0.8)) / z)
    assert val["matters"] is True and val["diff"] == pytest.approx(2.0, abs=0.4)
    assert rows[0]["key"] == "base.none" and rows[1]["key"] == "base"
    text = format_table(rows, "base")
    head = text.splitlines()[0]
    assert "mode" in head and "MDE" in head
    assert any(line.startswith("policy-idea") and " none " in line for line in text.splitlines())
    assert "mode none: paired 95% half-widths policy-idea ±" in text and "all within the ±0.5 target" in text
    assert "mode full_turn: paired 95% half-widths value-idea ±" in text
    # one arm short of the target says how far it is
    few = _mode_arms(np.random.default_rng(2), games_none=20, seeds=(0,))
    text = format_table(summarise(few, "base", {"policy-idea": "none"}), "base")
    assert "mode none:" in text and "0 of 1 within the ±0.5 target" in text
    # the arms' default mode is their main one: the table is the old one plus its columns
    rows = summarise(arms, "base")
    assert [(r["arm"], r["mode"]) for r in rows] == [("base", "full_turn"), ("policy-idea", "full_turn"),
                                                      ("value-idea", "full_turn")]
    from yamblab.sweeps.report import plot_table

    plot_table(summarise(arms, "base", {"policy-idea": "none"}), "base")


def test_mde_shrinks_as_one_over_root_games():
    rng = np.random.default_rng(3)
    mdes = []
    for games in (400, 1600, 6400):
        base = rng.normal(20.0, 8.0, size=(1, games))
        arm = base + rng.normal(0.0, 3.0, size=(1, games))
        mdes.append(summarise({"b": ArmResult("b", base, [0]), "a": ArmResult("a", arm, [0])}, "b")[1]["mde"])
    assert mdes[0] / mdes[1] == pytest.approx(2.0, rel=0.12)
    assert mdes[1] / mdes[2] == pytest.approx(2.0, rel=0.12)
    # six seeds, no seed effect: the same scaling, within the noise of six seeds' spread (the
    # interval never drops below the seeds' own t interval, 5 degrees of freedom): medians of 9
    rng, mdes, seeds = np.random.default_rng(0), [], list(range(6))
    for games in (400, 3600):
        reps = []
        for _ in range(9):
            base = rng.normal(20.0, 8.0, size=(6, games))
            arm = base + rng.normal(0.0, 3.0, size=(6, games))
            reps.append(summarise({"b": ArmResult("b", base, seeds), "a": ArmResult("a", arm, seeds)}, "b")[1]["mde"])
        mdes.append(np.median(reps))
    assert mdes[0] / mdes[1] == pytest.approx(3.0, rel=0.25)


def test_arm_curves_overlay_the_arms():
    from yamblab.training import plots

    seed = lambda off, ci=True: {"step": [2, 4, 6], "mean": [10 + off, 8 + off, 7 + off],  # noqa: E731
                                 **({"ci_low": [9, 7, 6], "ci_high": [11, 9, 8]} if ci else {}),
                                 "positions": [1000, 2000, 3000]}
    fig = plots.arm_curves({"base": [seed(0), seed(1)], "arm": [seed(2, ci=False)], "one": [seed(3)]}, "none",
                           baseline="base", judged=["arm"])
    labels = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert "base (baseline); band: 95% CI over 2 seeds" in labels
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]      # mean 10.5 ± t(1) × 0.707 / √2
    assert max(band) == pytest.approx(10.5 + 12.706 * 0.5, abs=0.01)
    assert "one; band: evaluation's 95% CI" in labels and len(fig.axes) == 2
    plots.close(fig)


@pytest.mark.ray
def test_tpe_study_reports_and_resumes(ray_cluster, tmp_path, monkeypatch):
    import optuna

    from yamblab.sweeps.driver import Sweep

    monkeypatch.chdir(tmp_path)
    spec_path = tmp_path / "tpe.yaml"
    spec_path.write_text(
        f"name: tpe-test\nkind: tpe\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
        "overrides: {runtime.iterations: 2, runtime.eval_every: 1, runtime.eval_games: 6, "
        "train.games_per_iteration: 4, runtime.worker_cpus: 0.5, runtime.learner_cpus: 0.25, "
        "runtime.eval_cpus: 0.25}\n"
        "params:\n  train.lr: {low: 0.0001, high: 0.01, log: true}\n"
        "  train.kl_targets: {choices: [true, false]}\n"
        "n_trials: 2\nparallel: 2\n")
    spec, base = load_sweep(spec_path, storage=str(tmp_path / "tpe.journal"))
    base = base.model_copy(update={"runtime": base.runtime.model_copy(update={"run_dir": str(tmp_path / "runs")})})
    sw = Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", progress=False)
    rows = sw.run()
    study = sw._study()
    done = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert len(done) == 2
    for t in done:
        assert 1e-4 <= t.params["train.lr"] <= 1e-2 and t.intermediate_values  # regret reported per evaluation
    assert len(rows) == sum(t.state == optuna.trial.TrialState.COMPLETE for t in done) >= 1
    assert sw._pending(study) == []                   # resuming reruns nothing


@pytest.mark.ray
def test_trials_on_a_time_budget_stop_at_it_and_the_bar_shows_minutes(ray_cluster, tmp_path, monkeypatch, capsys):
    """A trial stops when its time budget is spent, far short of its iterations, and the
    sweep's progress bar counts trial-minutes of the budget (not an ETA over iterations)."""
    import optuna

    from yamblab.sweeps.driver import Sweep

    monkeypatch.chdir(tmp_path)
    spec_path = tmp_path / "timed.yaml"
    spec_path.write_text(
        f"name: timed\nkind: grid\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
        "overrides: {runtime.iterations: 100000, runtime.time_budget_minutes: 0.05, runtime.eval_every: 100000, "
        "runtime.eval_games: 4, train.games_per_iteration: 4, runtime.worker_cpus: 0.5, "
        "runtime.learner_cpus: 0.25, runtime.eval_cpus: 0.25}\n"
        "arms: {baseline: {}}\nseeds: [0]\nparallel: 1\n")
    spec, base = load_sweep(spec_path)
    base = base.model_copy(update={"runtime": base.runtime.model_copy(update={"run_dir": str(tmp_path / "runs")})})
    sw = Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", progress=True)
    sw.run()
    (trial,) = [t for t in sw._study().trials if t.state == optuna.trial.TrialState.COMPLETE]
    run = sw.tracker.client.get_run(trial.user_attrs["mlflow_run_id"])
    assert 1 <= run.data.metrics["iteration"] < 1000          # stopped by the 3-second budget
    err = capsys.readouterr().err
    assert "trial-min" in err and "0.1/0.1 trial-min" in err and "iterations/s" not in err


@pytest.mark.ray
def test_sweep_trial_runs_the_training_actors_in_its_cpus(ray_cluster, tiny_config, tmp_path):
    """A trial drives the same actors as `yamblab train`, placed in the trial's placement group."""
    from ray._private.state import actors as actor_table   # the GCS actor table (no dashboard needed)
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from yamblab.errors import ConfigError
    from yamblab.training.config import apply_overrides
    from yamblab.sweeps.trial import TrialRunner

    cfg = apply_overrides(tiny_config, {"runtime.worker_cpus": 0.5, "runtime.learner_cpus": 0.25,
                                        "runtime.eval_cpus": 0.25, "runtime.iterations": 1})
    pg = placement_group([{"CPU": 1.0}], strategy="STRICT_PACK")
    actor = ray_cluster.remote(num_cpus=0)(TrialRunner).options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
    ).remote(cfg, str(tmp_path / "trial"), 1.0)
    try:
        m = ray_cluster.get(actor.iteration.remote())
        assert m["iteration"] == 1 and m["traffic.weight_loads"] >= 1
        ids = ray_cluster.get(actor.actors.remote())
        table = actor_table()
        mine = [*ids["workers"], ids["learner"], ids["evaluator"], ids["buffer"], ids["oracle"]]
        assert {table[a]["State"] for a in mine} == {"ALIVE"}
        # the actors' CPUs (0.5 + 0.25 + 0.25) come out of the trial's bundle, not the cluster's rest
        free = ray_cluster.available_resources().get("CPU", 0.0)
        assert free == pytest.approx(ray_cluster.cluster_resources()["CPU"] - 1.0)
        out = ray_cluster.get(actor.finish.remote())
        assert np.isfinite(np.mean(out.per_game_regret))
    finally:
        ray_cluster.kill(actor)
        remove_placement_group(pg)
    too_big = apply_overrides(tiny_config, {"runtime.worker_cpus": 1, "runtime.learner_cpus": 0.5,
                                            "runtime.eval_cpus": 0.5})
    with pytest.raises(ConfigError, match="the trial offers 1 CPUs"):
        TrialRunner(too_big, str(tmp_path / "too-big"), 1.0)


def test_unreachable_optuna_database_is_named(tmp_path):
    """A wrong or unreachable storage URL is the user's to fix: one clear error, no traceback."""
    from yamblab.errors import YamblabError
    from yamblab.sweeps.driver import Sweep

    spec, base = load_sweep(ROOT / "experiments" / "test-sweep.yaml", storage="postgresql://nobody@127.0.0.1:1/none")
    sw = Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", progress=False)
    with pytest.raises(YamblabError, match=r"cannot open the Optuna storage postgresql://nobody@127\.0\.0\.1:1/none"):
        sw._study()


def test_variance_components_recover_a_known_design_and_plan_the_seeds():
    from yamblab.sweeps.stats import seeds_needed, variance_components

    rng = np.random.default_rng(5)
    n_s, n_g = 400, 300
    d = (1.0 + rng.normal(0, 1.5, (n_s, 1)) + rng.normal(0, 0.8, (1, n_g))
         + rng.normal(0, 4.0, (n_s, n_g)))
    vc = variance_components(d)
    assert vc["seed"] == pytest.approx(1.5 ** 2, rel=0.15)
    assert vc["game"] == pytest.approx(0.8 ** 2, rel=0.25)
    assert vc["resid"] == pytest.approx(4.0 ** 2, rel=0.02)
    assert variance_components(d[:1]) is None                   # one seed: the seed spread is unknown
    # the planner inverts the variance of the mean: S seeds at G games reach the target
    z = 1.959963984540054
    known = {"seed": 4.0, "game": 1.0, "resid": 100.0}
    s = seeds_needed(known, games=500, target=0.5)
    var = lambda S: known["seed"] / S + known["game"] / 500 + known["resid"] / (S * 500)  # noqa: E731
    assert z * var(s) ** 0.5 <= 0.5 < z * var(s - 1) ** 0.5
    assert seeds_needed({"seed": 0.0, "game": 0.0, "resid": 1.0}, games=1000) == 1
    assert seeds_needed(known, games=10, target=0.5) is None    # the games' own spread is too wide
    from yamblab.sweeps.stats import design_for_target

    assert design_for_target(known, 500) == (s, 500)
    n_s, n_g = design_for_target(known, 10)
    assert n_g == 31 and n_s == seeds_needed(known, 31)          # 2 * 1.96² * 1 / 0.25 = 30.7


def test_the_table_says_what_the_target_needs():
    rng = np.random.default_rng(3)
    arms = _mode_arms(rng, games_none=300, seeds=(0, 1, 2))
    # a policy idea whose effect differs between training seeds: its seed term dominates
    arms["policy-idea"].modes["none"] = arms["policy-idea"].modes["none"] + np.array([[-3.0], [0.0], [3.0]])
    rows = summarise(arms, "base", {"policy-idea": "none"})
    pol = next(r for r in rows if r["arm"] == "policy-idea")
    assert pol["sd_seed"] == pytest.approx(3.0, rel=0.2) and pol["seeds_needed"] > 100
    text = format_table(rows, "base")
    assert f"policy-idea: the difference's SD between training seeds {pol['sd_seed']:.2f}" in text
    assert pol["games_needed"] == 300
    assert f"±0.5 needs about {pol['seeds_needed']} training seeds at 300 games" in text
    # another target is planned for that target; no target, no plan
    wide = format_table(rows, "base", target=2.0)
    assert "±2 needs about" in wide and "±0.5 needs" not in wide
    plain = format_table(rows, "base", target=None)
    assert "policy-idea: the difference's SD between training seeds" in plain and "needs about" not in plain


def test_interval_over_few_seeds_covers_the_true_mean():
    from yamblab.sweeps.stats import _interval

    # a training-seed effect as large as the main job's (SD 3 points) and noisy games: two seeds
    # give a wide interval that still covers the true mean about 95% of the time
    rng = np.random.default_rng(11)
    hits, widths = 0, []
    for _ in range(400):
        x = 1.0 + rng.normal(0, 3.0, (2, 1)) + rng.normal(0, 2.0, (1, 200)) + rng.normal(0, 25.0, (2, 200))
        lo, hi = _interval(x)
        hits += lo <= 1.0 <= hi
        widths.append(hi - lo)
    assert 0.90 <= hits / 400 <= 0.995
    # with many seeds and no seed effect the interval is the t interval's width
    x = rng.normal(0, 10.0, (8, 500))
    lo, hi = _interval(x)
    assert (hi - lo) / 2 == pytest.approx(1.96 * 10.0 / np.sqrt(4000), rel=0.15)
    assert np.median(widths) > 2 * (hi - lo)


def test_an_arm_judged_on_a_list_of_modes_gets_a_row_each():
    rng = np.random.default_rng(5)
    arms = _mode_arms(rng, games_none=300, games_full=100, seeds=(0, 1, 2))
    rows = summarise(arms, "base", {"policy-idea": ["none", "full_turn"], "value-idea": "full_turn"}, target=1.0)
    assert [(r["arm"], r["mode"]) for r in rows] == [
        ("base", "none"), ("base", "full_turn"), ("policy-idea", "none"), ("policy-idea", "full_turn"),
        ("value-idea", "full_turn")]
    assert [r["key"] for r in rows] == ["base.none", "base", "policy-idea", "policy-idea.full_turn", "value-idea"]
    assert all("diff" in r for r in rows[2:])
    text = format_table(rows, "base", target=1.0)
    assert "±1 target" in text and text.count("policy-idea ") >= 2


def test_a_trial_whose_learner_takes_a_gpu_gets_a_bundle_with_the_gpu():
    """Without a GPU for the learner a trial is one bundle of its CPUs; with one, the learner's
    bundle holds the GPU and the learner's CPUs and another bundle the rest (Ray would never
    place a learner that asks for a GPU in a CPU-only bundle)."""
    from yamblab.training.config import RuntimeConfig
    from yamblab.training.resources import resolve_resources
    from yamblab.training.placement import trial_bundles

    rt = RuntimeConfig()
    assert trial_bundles(rt, 2, gpu=False) == ([{"CPU": 2.0}], "STRICT_PACK")
    assert trial_bundles(RuntimeConfig(learner_gpus=0), 2, gpu=True) == ([{"CPU": 2.0}], "STRICT_PACK")
    for cpus in (1, 2, 8):
        bundles, strategy = trial_bundles(rt, cpus, gpu=True)
        lr = resolve_resources(rt, cpus, gpu=True).learner_cpus
        assert strategy == "PACK" and bundles == [{"CPU": pytest.approx(cpus - lr)}, {"CPU": lr, "GPU": 1.0}]
    half = trial_bundles(RuntimeConfig(learner_gpus=0.5, learner_cpus=1), 4, gpu=True)[0]
    assert half == [{"CPU": 3.0}, {"CPU": 1.0, "GPU": 0.5}]
    # resources the trial cannot resolve: the CPU bundle, and the trial's actor says why
    assert trial_bundles(RuntimeConfig(learner_cpus=2, eval_cpus=1), 2, gpu=True) == ([{"CPU": 2.0}], "STRICT_PACK")
    # roles in the trial's own process: no learner actor asks for the GPU
    in_process = RuntimeConfig(actors="in_process", max_policy_lag=0)
    assert trial_bundles(in_process, 2, gpu=True) == ([{"CPU": 2.0}], "STRICT_PACK")


_GPU_TRIAL = r"""
import json, sys
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from yamblab.actors.cluster import cluster_has_gpu
from yamblab.training.config import apply_overrides, load_run_config
from yamblab.training.placement import bundle_options, trial_bundles
from yamblab.sweeps.trial import TrialRunner

root, run_dir = sys.argv[1], sys.argv[2]


def spy():      # each role records what it would pick with CUDA present, then plays on the CPU
    import yamblab.actors.devices as d
    real = d.pick_device

    def pick(ids, role, cuda=None):
        d.WOULD = real(ids, role, cuda=True)
        return "cpu"

    d.pick_device = pick


ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, runtime_env={"worker_process_setup_hook": spy})
cfg = apply_overrides(load_run_config(f"{root}/configs/yahtzee-tiny.yaml", {"runtime.run_dir": run_dir}),
                      {"runtime.iterations": 1})
bundles, strategy = trial_bundles(cfg.runtime, 1.0, cluster_has_gpu())
pg = placement_group(bundles, strategy=strategy)
assert pg.wait(120), "the trial's placement group was not placed"
trial = ray.remote(num_cpus=0)(TrialRunner).options(scheduling_strategy=PlacementGroupSchedulingStrategy(
    pg, placement_group_capture_child_tasks=True)).remote(cfg, run_dir + "/trial", 1.0)
m = ray.get(trial.iteration.remote(), timeout=600)
learner = ray.get(trial.__ray_call__.remote(lambda r: r.run.backend.learner))
worker = ray.get(trial.__ray_call__.remote(lambda r: r.run.backend.workers[0]))
gpus = lambda a: ray.get(a.__ray_call__.remote(lambda _: ray.get_gpu_ids()))
have, total = ray.available_resources(), ray.cluster_resources()   # a used-up resource is left out of have
left = {f"{r}@{i}": have.get(f"{r}_group_{i}_{pg.id.hex()}", 0.0) for i, b in enumerate(bundles) for r in b
        if f"{r}_group_{i}_{pg.id.hex()}" in total}
pins = ray.get(trial.__ray_call__.remote(     # where the trial's actors were sent, from inside it
    lambda r: [o["scheduling_strategy"].placement_group_bundle_index for o in bundle_options(1.0)]))
print("RESULT " + json.dumps({"bundles": bundles, "strategy": strategy, "iteration": m["iteration"], "pins": pins,
                              "pins_outside": list(bundle_options(1.0)),
                              "device": ray.get(learner.device.remote()), "learner_gpus": gpus(learner),
                              "would": [ray.get(a.__ray_call__.remote(
                                  lambda _: __import__("yamblab.actors.devices").actors.devices.WOULD))
                                  for a in (learner, worker)],
                              "worker_gpus": gpus(worker), "left": left}))
ray.shutdown()
"""


@pytest.mark.ray
@pytest.mark.slow
def test_a_trial_on_a_gpu_cluster_places_its_learner_on_the_gpu(tmp_path, script_result):
    """On a cluster with a GPU (a fake one: Ray's own cluster of 2 CPUs and 1 GPU, in a process
    of its own, as the shared test cluster has none) a trial's placement group has a bundle
    with the GPU, the learner is placed in it and gets the GPU, the other actors fill the CPU
    bundle, an iteration runs; the learner would train on CUDA and the worker would not (this
    machine's torch has no CUDA: each role records its pick and plays on the CPU)."""
    out = script_result(_GPU_TRIAL, ROOT, tmp_path / "runs")
    assert out["strategy"] == "PACK" and out["bundles"][-1]["GPU"] == 1.0 and "GPU" not in out["bundles"][0]
    assert out["iteration"] == 1
    assert out["learner_gpus"] and not out["worker_gpus"]
    assert out["would"] == ["cuda", "cpu"] and out["device"] == "cpu"
    # each actor pinned to its bundle (the learner to the GPU's, the others to the CPU one; a
    # run outside a placement group is left to Ray): both bundles are used up, bundle by bundle
    assert out["pins"] == [0, 1] and out["pins_outside"] == [{}, {}]
    assert out["left"] == {"CPU@0": pytest.approx(0.0), "CPU@1": pytest.approx(0.0), "GPU@1": pytest.approx(0.0)}


def test_run_summaries_give_each_seed_and_the_median_and_range():
    """A threshold a run never reached counts as later than any reached: the median of three
    runs, one of which never reached 1, is the later of the two that did."""
    runs = {"baseline": [(1, {"summary.exact_regret": 0.39, "summary.minutes_to_1": 12.7, "summary.positions": 6.1e6}),
                         (0, {"summary.exact_regret": 0.53, "summary.minutes_to_1": 17.2, "summary.positions": 6.3e6}),
                         (2, {"summary.exact_regret": 0.61, "summary.positions": 6.0e6})]}
    lines = format_run_summaries(runs).splitlines()
    assert "min to 1" in lines[1] and "policy alone" not in lines[1]     # only the columns some run has
    assert [ln.split()[:2] for ln in lines[3:6]] == [["baseline", "0"], ["baseline", "1"], ["baseline", "2"]]
    assert lines[5].split()[3] == "-"                                     # seed 2 never reached 1
    assert lines[6].split() == ["median", "0.53", "17.2", "6.10"]
    assert lines[7].split() == ["min..max", "0.39..0.61", "12.7..-", "6.00..6.30"]
    assert format_run_summaries({"a": [(0, {"summary.minutes": 3.0})]}) == ""


def test_a_time_budgeted_trial_times_the_machine_before_and_after(tmp_path, monkeypatch):
    """A trial with a time budget of 5 minutes or more measures the machine's speed (the oracle
    table's build on one thread) before and after its run, into its summary, and the sweep's
    per-run table prints both beside its minutes; shorter trials skip the 6 s."""
    from yamblab.sweeps import trial
    from yamblab.training import runtime
    from yamblab.training.config import load_run_config

    root = Path(__file__).resolve().parents[1]
    cfg = load_run_config(root / "configs" / "yahtzee-tiny.yaml", {
        "runtime.run_dir": str(tmp_path / "runs"), "runtime.iterations": 1, "runtime.max_policy_lag": 0,
        "runtime.actors": "in_process", "runtime.eval_games": 2, "train.games_per_iteration": 2,
        "runtime.time_budget_minutes": 5})
    assert trial.times_machine(cfg) and not trial.times_machine(cfg.model_copy(update={
        "runtime": cfg.runtime.model_copy(update={"time_budget_minutes": 4.9})}))
    speeds = iter([0.61, 0.93])
    monkeypatch.setattr(runtime, "oracle_build_seconds", lambda: next(speeds))
    runner = trial.TrialRunner(cfg, str(tmp_path / "trial"), cpus=1)
    try:
        runner.iteration()
        out = runner.finish()
    finally:
        runner.run.shutdown()
    assert (out.metrics["machine.oracle_seconds_start"], out.metrics["machine.oracle_seconds_end"]) == (0.61, 0.93)
    text = format_run_summaries({"a": [(0, {"summary.exact_regret": 0.2, **{k: v for k, v in out.metrics.items()
                                                                          if k.startswith("machine.")}})]})
    assert "machine s before" in text and text.splitlines()[-1].split()[-2:] == ["0.61", "0.93"]


@pytest.mark.ray
def test_a_sweep_whose_trials_ask_for_a_gpu_the_cluster_lacks_is_refused_before_any_trial(
        ray_cluster, tmp_path, monkeypatch):
    """A trial's placement group with a GPU on a cluster without one would wait for ever: the
    sweep names the arm and both counts before it starts anything."""
    from yamblab.sweeps.driver import Sweep

    monkeypatch.chdir(tmp_path)
    spec_path = tmp_path / "gpu.yaml"
    spec_path.write_text(
        f"name: gpu\nkind: grid\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
        "overrides: {runtime.iterations: 1}\n"
        "arms: {baseline: {}, on-a-gpu: {runtime.learner_gpus: 1}}\nseeds: [0]\nparallel: 1\n")
    spec, base = load_sweep(spec_path)
    base = base.model_copy(update={"runtime": base.runtime.model_copy(update={"run_dir": str(tmp_path / "runs")})})
    sw = Sweep(spec, base, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", progress=False)
    with pytest.raises(ConfigError, match=r"arm on-a-gpu: a trial asks Ray for 1 GPU\(s\).*cluster has 0"):
        sw.run()
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("checkpoint.pt"))


def test_the_readmes_minute_long_spec_is_valid_and_a_sweep_says_where_its_results_are(tmp_path, monkeypatch):
    """The README's try-the-flow spec loads as written (its base resolved from experiments/); a
    sweep ends by naming the folder of its table and plots and its parent run's MLflow page."""
    import os
    import re

    from typer.testing import CliRunner

    from yamblab.cli.main import app

    root = ROOT
    block = re.search(r"```yaml\n(name: my-ablation\n.*?)```", (root / "README.md").read_text(), re.S).group(1)
    spec_file = root / "experiments" / f".readme-spec-{os.getpid()}.yaml"
    spec_file.write_text(block)
    try:
        sp, base = load_sweep(spec_file)
    finally:
        spec_file.unlink()
    assert base.name == "yahtzee-tiny" and sp.seeds == [0, 1] and base.runtime.actors == "in_process"

    class FakeTracker:
        def artifact_folder(self, run_id):
            return f"/store/{run_id}/artifacts"

        def ui_command(self, run_id=None):
            return f"page of {run_id}"

    class FakeSweep:
        def __init__(self, *a, **k):
            self.tracker, self.parent_run_id, self.table_text = FakeTracker(), "p1", "the table"

        def run(self):
            return [{"arm": "baseline"}]

    monkeypatch.setattr("yamblab.sweeps.driver.Sweep", FakeSweep)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["sweep", str(root / "experiments" / "test-sweep.yaml")])
    assert res.exit_code == 0, res.output
    assert "table and plots: /store/p1/artifacts (results.txt" in res.output and "page of p1" in res.output
