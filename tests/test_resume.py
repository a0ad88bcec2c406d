"""A driver killed mid-run resumes from its last checkpoint: same iteration count, buffer
restored, nothing lost or counted twice."""

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yamblab.errors import DamagedFileError

ROOT = Path(__file__).resolve().parents[1]


def _yamblab(*args, **kw):
    return [sys.executable, "-m", "yamblab.cli.main", *args]


@pytest.mark.slow
@pytest.mark.parametrize("config,n", [("yahtzee-tiny", 16), ("yamb-tiny", 8)])
def test_killed_driver_resumes_at_the_right_iteration(tmp_path, config, n):
    """The driver (with its own local Ray cluster and actors) is killed; rerunning resumes."""
    from yamblab.model.checkpoint import load_checkpoint

    runs = tmp_path / "runs"
    env = {**os.environ, "YAMBLAB_CACHE_DIR": os.environ.get("YAMBLAB_CACHE_DIR", str(tmp_path))}
    common = ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    proc = subprocess.Popen(_yamblab("train", "-c", str(ROOT / "configs" / f"{config}.yaml"), *common,
                                     "--set", "runtime.iterations=4", "--set", f"runtime.run_dir={runs}",
                                     "--set", "runtime.eval_every=10"),
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    ckpt = None
    while time.time() < deadline and proc.poll() is None:
        found = list(runs.glob("*/checkpoint.pt"))
        if found:
            ckpt = found[0]
            break
        time.sleep(0.2)
    assert ckpt is not None, proc.stdout.read().decode()[-2000:] if proc.poll() is not None else "no checkpoint"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = load_checkpoint(ckpt)
    k = int(state["iteration"])
    assert 1 <= k < 4 and int(state["games_played"]) == n * k
    assert len(json.loads(state["history"])) == k
    buffered = int(state["buffer"]["size"])          # its positions in RUN/replay/, beside checkpoint.pt
    assert buffered > 0 and sum(s["count"] for s in state["buffer"]["segments"]) >= buffered
    assert {s["name"] for s in state["buffer"]["segments"]} <= {p.name for p in (ckpt.parent / "replay").iterdir()}

    res = subprocess.run(_yamblab("train", "--resume", str(ckpt.parent), *common), cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"(iteration {k} of 4)" in res.stdout
    final = load_checkpoint(ckpt)
    history = json.loads(final["history"])
    assert [h["iteration"] for h in history] == [1, 2, 3, 4]
    assert [h["games_played"] for h in history] == [n, 2 * n, 3 * n, 4 * n]
    assert int(final["buffer"]["added"]) > buffered
    summary = json.loads((ckpt.parent / "summary.json").read_text())
    # both tiny games are graded by an exact oracle: the end summary is printed and logged
    assert "regret (points/game, last evaluation): " in res.stdout
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs_logged = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.data.metrics["summary.regret"] for r in runs_logged] == [summary["summary.regret"]]
    # the machine's speed before and after the (resumed) run, printed, logged and in the summary
    for when in ("start", "end"):
        seconds = summary[f"machine.oracle_seconds_{when}"]
        assert 0 < seconds < 60 and runs_logged[0].data.metrics[f"machine.oracle_seconds_{when}"] == seconds
    assert (f"the oracle table built in {summary['machine.oracle_seconds_start']:.2f} s on one thread before "
            f"the run, {summary['machine.oracle_seconds_end']:.2f} s after it") in res.stdout


@pytest.mark.slow
def test_a_terminated_run_is_marked_killed_and_says_how_to_resume(tmp_path):
    """SIGTERM (kill, a scheduler's stop) takes Ctrl-C's path even after Ray's init has set its
    own handler: status 130, the resume command printed, the MLflow run marked KILLED."""
    runs = tmp_path / "runs"
    env = {**os.environ, "YAMBLAB_CACHE_DIR": os.environ.get("YAMBLAB_CACHE_DIR", str(tmp_path))}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.Popen(_yamblab("train", "-c", str(ROOT / "configs" / "yahtzee-tiny.yaml"), "--tracking-uri", uri,
                                     "--set", "runtime.iterations=1000", "--set", f"runtime.run_dir={runs}",
                                     "--set", "runtime.eval_every=1000"),
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not list(runs.glob("*/checkpoint.pt")):
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
        assert list(runs.glob("*/checkpoint.pt")), "no checkpoint within 240 s"
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out[-2000:]
    assert re.search(r"interrupted: the last checkpoint \(iteration \d+\) is kept; resume with: yamblab train "
                     r"--resume ", out), out[-2000:]
    assert "SIGTERM received" not in out and "Traceback" not in out
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    logged = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in logged] == ["KILLED"]


@pytest.mark.slow
def test_an_interrupted_sweep_says_what_it_kept_and_how_to_resume(tmp_path):
    """Ctrl-C in a sweep: status 130 within seconds, one line of what is kept and the command
    that resumes it, its MLflow runs marked KILLED (it used to exit 130 saying nothing)."""
    env = {**os.environ, "YAMBLAB_CACHE_DIR": os.environ.get("YAMBLAB_CACHE_DIR", str(tmp_path))}
    env.pop("RAY_ADDRESS", None)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ("sweep", str(ROOT / "experiments" / "test-sweep.yaml"), "--tracking-uri", uri,
            "--set", "overrides.runtime.iterations=1000", "--set", f"overrides.runtime.run_dir={tmp_path / 'runs'}")
    # a shell's background job inherits SIGINT ignored, and Python then never sees Ctrl-C: the
    # command gets it as a terminal's foreground job would
    proc = subprocess.Popen(_yamblab(*args), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not list(tmp_path.glob("runs/**/checkpoint.pt")):
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
        proc.send_signal(signal.SIGINT)
        sent = time.time()
        out = proc.communicate(timeout=120)[0].decode()
        took = time.time() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out[-2000:]
    assert "interrupted: the study keeps every finished trial" in out and "Traceback" not in out, out[-2000:]
    assert "resume with: yamblab sweep " + str(ROOT / "experiments" / "test-sweep.yaml") in out
    assert took < 60, f"the sweep took {took:.0f} s to stop"
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    logged = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert logged and {r.info.status for r in logged} == {"KILLED"}, [r.info.status for r in logged]


def test_the_sigterm_handler_is_put_back():
    from yamblab.cli.common import interrupt_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    undo = interrupt_on_sigterm()
    try:
        assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
    finally:
        undo()
    assert signal.getsignal(signal.SIGTERM) == before


def test_damaged_checkpoint_is_refused_by_grade(tmp_path):
    from typer.testing import CliRunner

    from yamblab.cli.main import app

    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(b"YAMBLAB-CHECKPOINT\n{\"format\": 1, \"size\": 100, \"sha256\": \"00\"}\nshort")
    res = CliRunner().invoke(app, ["grade", "--checkpoint", str(bad), "--games", "2"])
    assert res.exit_code == 2 and "truncated" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["grade", "--checkpoint", str(tmp_path / "nope.pt")])
    assert res.exit_code == 2 and "no checkpoint" in res.output
    assert issubclass(DamagedFileError, Exception)


@pytest.mark.slow
def test_a_run_carried_on_after_its_driver_died_logs_what_an_unbroken_run_logs(tmp_path, tiny_config):
    """In process, no Ray: a driver that dies after creating its MLflow run but before its first
    checkpoint, and one that dies after an iteration, leave one MLflow run that ends with the
    unbroken run's metrics, each step logged once (the minibatch order and the history carry on)."""
    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun
    from yamblab.training.tracking import Tracker

    cfg = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                        "runtime.iterations": 2, "runtime.eval_games": 4,
                                        "train.games_per_iteration": 4}, "test")

    def logged(tracker, run_id):
        out = {}
        for key in tracker.client.get_run(run_id).data.metrics:
            steps = [(m.step, m.value) for m in tracker.client.get_metric_history(run_id, key)]
            assert len({s for s, _ in steps}) == len(steps), f"{key} logged twice: {steps}"
            if not any(w in key for w in ("seconds", "minutes", "_per_s", "time.", "utilisation.")):
                out[key] = sorted(steps)
        return out

    straight = TrainingRun(cfg, tmp_path / "a", tracker=Tracker(f"sqlite:///{tmp_path / 'a.db'}"), progress=False)
    straight.run()
    straight.finish()
    want = logged(straight.tracker, straight.run_id)

    uri = f"sqlite:///{tmp_path / 'b.db'}"
    TrainingRun(cfg, tmp_path / "b", tracker=Tracker(uri), progress=False)        # dies before a checkpoint
    first = TrainingRun(cfg, tmp_path / "b", tracker=Tracker(uri), progress=False)
    first.step()                                                                  # dies after an iteration
    run = TrainingRun(cfg, tmp_path / "b", resume=True, tracker=Tracker(uri), progress=False)
    assert run.iteration == 1 and run.run_id == first.run_id
    run.run()
    run.finish()
    tracker = run.tracker
    assert [r.info.run_id for r in tracker.client.search_runs([tracker.experiment_id])] == [run.run_id]
    assert tracker.client.get_run(run.run_id).info.status == "FINISHED"
    assert logged(tracker, run.run_id) == want


def test_an_interrupt_while_the_run_is_being_created_marks_its_mlflow_run_killed(tmp_path, tiny_config,
                                                                                   monkeypatch):
    """Ctrl-C after the MLflow run is created but before TrainingRun(...) returns (the caller
    has no run to end) leaves that MLflow run KILLED, not RUNNING for ever."""
    from yamblab.training.config import apply_overrides
    from yamblab.training.run_tracking import RunTracking
    from yamblab.training.runtime import TrainingRun
    from yamblab.training.tracking import Tracker

    cfg = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                        "runtime.iterations": 1}, "test")

    def interrupted(self, history):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunTracking, "log_history", interrupted)
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(KeyboardInterrupt):
        TrainingRun(cfg, tmp_path / "run", tracker=tracker, progress=False)
    runs = tracker.client.search_runs([tracker.experiment_id])
    assert [r.info.status for r in runs] == ["KILLED"]


def test_self_play_batches_take_the_annealed_value_target_mix(tmp_path, tiny_config):
    """train.value_target_mix_final: each iteration's games take λ where the run's clock stood
    when they started (here iterations: 3 iterations, so the clock reads 0, 1/3 and 2/3), and
    the run logs it."""
    import math

    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun

    cfg = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                        "runtime.iterations": 3, "runtime.eval_every": 3, "runtime.eval_games": 2,
                                        "train.games_per_iteration": 2, "train.value_target_mix": 0.5,
                                        "train.value_target_mix_final": 1.0}, "test")
    run = TrainingRun(cfg, tmp_path / "run", progress=False)
    run.run()
    want = [1.0 - 0.5 * 0.5 * (1 + math.cos(math.pi * p)) for p in (0, 1 / 3, 2 / 3)]    # 0.5, 0.625, 0.875
    assert [h["selfplay.value_target_mix"] for h in run.history] == pytest.approx(want)


def test_the_learner_draws_take_the_rising_policy_share(tmp_path, tiny_config):
    """train.policy_share_final: each iteration's draw from the replay buffer takes the share of
    decisions where the run's clock stands when the learner starts (here iterations: 3
    iterations, so the clock reads 1/3, 2/3 and 1 after each one's games), the run logs it, and
    the drawn batches hold that share."""
    import math

    import numpy as np

    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun

    cfg = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                        "runtime.iterations": 3, "runtime.eval_every": 3, "runtime.eval_games": 2,
                                        "train.games_per_iteration": 2, "train.policy_share": 0.1,
                                        "train.policy_share_final": 0.5}, "test")
    run = TrainingRun(cfg, tmp_path / "run", progress=False)
    buffer, drawn = run.backend.buffer, []
    sample = buffer.sample

    def spy(n, policy_share=None):
        out = sample(n, policy_share)
        drawn.append((policy_share, float(np.mean(out["has_policy"]))))
        return out

    buffer.sample = spy
    run.run()
    want = [0.5 - 0.4 * 0.5 * (1 + math.cos(math.pi * p)) for p in (1 / 3, 2 / 3, 1)]    # 0.2, 0.4, 0.5
    assert [h["train.policy_share"] for h in run.history] == pytest.approx(want)
    assert [s for s, _ in drawn] == pytest.approx(want)
    assert [f for _, f in drawn] == pytest.approx(want, abs=0.01)            # rounded to whole rows


def _recorded_run(tmp_path, tiny_config, overrides=None):
    """A run folder as a driver killed before its first checkpoint leaves it: its config only."""
    from yamblab.training.config import apply_overrides

    cfg = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                        **(overrides or {})}, "test")
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(cfg.to_yaml())
    return run, cfg


def test_a_resume_refuses_a_change_of_the_run_before_touching_its_folder(tmp_path, tiny_config, monkeypatch):
    """--set or -c on a resume: a setting of the run itself (the network, training, what an
    evaluation grades) is refused by name with both values, and nothing in the run folder
    changes; only what docs/training.md lists may change, and each change is said."""
    from typer.testing import CliRunner

    from yamblab.cli.main import app

    run, cfg = _recorded_run(tmp_path, tiny_config)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    started = []
    monkeypatch.setattr("yamblab.cli.train._train", lambda cfg, *a: started.append(cfg))
    for sets, named in [(["model.value_max=2.0"], "model.value_max 500.0 -> 2.0"),
                        (["model.d_model=64", "train.lr=0.1"], "model.d_model 32 -> 64; train.lr 0.001 -> 0.1"),
                        (["runtime.eval_games=50"], f"runtime.eval_games {cfg.runtime.eval_games} -> 50")]:
        args = ["train", "--resume", str(run), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"]
        res = CliRunner().invoke(app, args + [a for s in sets for a in ("--set", s)])
        assert res.exit_code == 2 and named in res.output and "a resumed run keeps its settings" in res.output, \
            res.output
        assert "Traceback" not in res.output
    other = tmp_path / "other.yaml"
    other.write_text((ROOT / "configs" / "yahtzee-tiny.yaml").read_text() + "\nsize: small\n")
    res = CliRunner().invoke(app, ["train", "--resume", str(run), "-c", str(other)])
    assert res.exit_code == 2 and "size 'tiny' -> 'small'" in res.output, res.output
    assert started == [] and {p.name: p.read_bytes() for p in run.iterdir()} == before

    res = CliRunner().invoke(app, ["train", "--resume", str(run), "--set", "runtime.iterations=25",
                                   "--set", "runtime.eval_every=5", "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])
    assert res.exit_code == 0, res.output
    assert f"resume changes runtime.eval_every: {cfg.runtime.eval_every} -> 5" in res.output
    assert f"resume changes runtime.iterations: {cfg.runtime.iterations} -> 25" in res.output
    assert started[0].runtime.iterations == 25 and started[0].model == cfg.model


def test_a_run_to_resume_that_is_not_there_is_named_where_it_was_looked_for(tmp_path, monkeypatch):
    """`--resume runs/nosuch` used to say it looked for runs/runs/nosuch/checkpoint.pt."""
    from typer.testing import CliRunner

    from yamblab.cli.main import app

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["train", "--resume", "runs/nosuch"])
    assert res.exit_code == 2 and "no run to resume at runs/nosuch: it holds no checkpoint.pt" in res.output
    assert "runs/runs" not in res.output
    res = CliRunner().invoke(app, ["train", "--resume", "nosuch"])
    assert res.exit_code == 2 and "neither nosuch/ nor runs/nosuch/ holds" in res.output, res.output
