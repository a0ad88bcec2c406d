"""MLflow tracking: how yamblab's experiments present themselves, nothing logged twice, and a
tracking server that goes away in the middle of a run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yamblab.training.tracking import EXPERIMENT_KIND, Tracker

ROOT = Path(__file__).resolve().parents[1]

KEY, TRAINING = EXPERIMENT_KIND


def test_experiments_are_tagged_as_model_training(tmp_path):
    """MLflow's UI opens an experiment on the page its kind tag names: yamblab's experiments say
    model training (new ones, and old ones that lack the tag or hold the UI's guess), while a
    kind someone chose in the UI is kept."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    tags = lambda name: client.get_experiment_by_name(name).tags

    Tracker(uri, "fresh")
    assert tags("fresh")[KEY] == TRAINING

    client.create_experiment("old")                                   # made before the tag
    client.create_experiment("guessed", tags={KEY: "genai_development_inferred"})
    client.create_experiment("chosen", tags={KEY: "genai_development"})
    for name in ("old", "guessed", "chosen"):
        Tracker(uri, name)
    assert tags("old")[KEY] == TRAINING and tags("guessed")[KEY] == TRAINING
    assert tags("chosen")[KEY] == "genai_development"
    assert Tracker(uri, "fresh").experiment_id == client.get_experiment_by_name("fresh").experiment_id


def test_the_ui_link_opens_the_experiment_on_its_training_runs(tmp_path):
    """MLflow 3's UI shows an experiment's GenAI pages unless the link asks for model training."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    t = Tracker(uri, "yamblab")
    page = f"#/experiments/{t.experiment_id}?workflowType=machine_learning"
    assert t.ui_command() == f"mlflow ui --backend-store-uri {uri}, then open http://127.0.0.1:5000/{page}"
    t.uri = "http://mlflow:5000/"
    assert t.ui_command().startswith(f"open http://mlflow:5000/{page} ")


def test_a_metric_step_is_logged_once_even_by_a_second_driver(tmp_path):
    """A step the store has is never sent again: not by the same tracker, and not by a new one
    (a resumed driver) that logs the whole history again; only the steps it lacks go out."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    t = Tracker(uri, "x")
    run = t.start_run("r")
    t.log_metrics(run, {"loss": 3.0, "eval.regret": 9.0}, step=1)
    t.log_metrics(run, {"loss": 2.0}, step=2)
    t.log_metrics(run, {"loss": 2.5, "eval.regret": 9.5}, step=1)       # the same steps again
    resumed = Tracker(uri, "x")
    for step, m in [(1, {"loss": 3.0, "eval.regret": 9.0}), (2, {"loss": 2.0, "eval.regret": 8.0}),
                    (3, {"loss": 1.0})]:
        resumed.log_metrics(run, m, step=step)
    hist = {k: [(m.step, m.value) for m in t.client.get_metric_history(run, k)] for k in ("loss", "eval.regret")}
    assert sorted(hist["loss"]) == [(1, 3.0), (2, 2.0), (3, 1.0)]
    assert sorted(hist["eval.regret"]) == [(1, 9.0), (2, 8.0)]


def test_a_run_a_killed_driver_left_is_found_by_its_tags(tmp_path):
    """A driver killed after it created a run, before it wrote the run's id anywhere: the next
    one finds the run by its tags (unfinished runs only), quotes in the value included."""
    t = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "x")
    where = "/runs/it's here"
    left = t.start_run("r", tags={"yamblab.run_dir": where})
    assert t.find_run({"yamblab.run_dir": where}) == left
    assert t.find_run({"yamblab.run_dir": "/elsewhere"}) is None
    t.end_run(left, "KILLED")           # Ctrl-C before its first checkpoint: still carried on
    assert t.unfinished_runs({"yamblab.run_dir": where}) == [(left, "KILLED")]
    t.end_run(left)
    assert t.find_run({"yamblab.run_dir": where}) is None


def test_a_tracking_server_that_does_not_answer_is_named_at_the_start(tmp_path):
    """No server at the address: one error naming it and what to do, within seconds."""
    import socket
    import time

    from yamblab.errors import YamblabError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(YamblabError, match=rf"MLflow tracking server at http://127.0.0.1:{port} does not answer "
                                           r"\(.*\); start it, or choose another store with --tracking-uri"):
        Tracker(f"http://127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 30


def test_the_outbox_keeps_records_while_the_server_is_away_and_says_so_once(tmp_path, capsys):
    """The sending thread, with a store whose writes fail as a server that went away does: the
    caller is not held up, the user is told once that the server is away and once that it is
    back, every record then arrives once; records still waiting at the end are named with the
    command that sends them later."""
    from mlflow.exceptions import MlflowException

    from yamblab.training.outbox import Outbox

    t = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "x", patience_s=10, retry_s=0.05)
    run = t.start_run("r")
    t.remote, t.uri, t._outbox = True, "http://mlflow:5000", Outbox(t)     # as a server's tracker
    real, away = t.client.log_batch, [True]

    def log_batch(*args, **kwargs):
        if away[0]:
            time.sleep(0.01)
            raise MlflowException("API request to http://mlflow:5000/api/2.0/mlflow/runs/log-batch failed "
                                  "with exception ... [Errno 111] Connection refused")
        return real(*args, **kwargs)

    t.client.log_batch = log_batch
    t0 = time.perf_counter()
    for step in range(1, 6):
        t.log_metrics(run, {"loss": 1.0 / step}, step=step)
    assert time.perf_counter() - t0 < 1.0           # the caller does not wait for the server
    time.sleep(0.3)
    away[0] = False
    assert t.flush(10)
    t.log_metrics(run, {"loss": 1.0}, step=1)      # a step the store has: not sent again
    t.end_run(run)
    assert t.close(backfill="yamblab train --resume runs/RUN")
    err = capsys.readouterr().err
    assert err.count("MLflow: the tracking server at http://mlflow:5000 does not answer (connection refused); "
                     "training goes on") == 1, err
    assert err.count("MLflow: the tracking server at http://mlflow:5000 answers again after") == 1, err
    assert "sending the 5 metric values kept meanwhile" in err
    assert sorted(m.step for m in t.client.get_metric_history(run, "loss")) == [1, 2, 3, 4, 5]
    assert t.client.get_run(run).info.status == "FINISHED"

    t.patience_s, away[0] = 0.3, True             # away at the end, and not back in time
    t.log_metrics(run, {"loss": 0.1}, step=6)
    assert not t.close(backfill="yamblab train --resume runs/RUN")
    err = capsys.readouterr().err
    assert ("MLflow: the tracking server at http://mlflow:5000 is still away after waiting 0 s; not sent: 1 metric "
            "value; the run's checkpoint keeps them: once the server is back, `yamblab train --resume runs/RUN` "
            "sends them (nothing is logged twice)") in err, err


def _mlflow_server(folder: Path, port: int) -> subprocess.Popen:
    """``mlflow server`` on an SQLite store in ``folder`` (its own process group), once it answers."""
    import urllib.request

    cmd = [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
           f"sqlite:///{folder / 'server.db'}", "--artifacts-destination", str(folder / "artifacts"),
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    p = subprocess.Popen(cmd, cwd=folder, stdout=open(folder / "server.log", "a"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        assert p.poll() is None, (folder / "server.log").read_text()[-2000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return p
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the MLflow server did not start:\n" + (folder / "server.log").read_text()[-2000:])


def _stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)       # the server goes away at once
    except ProcessLookupError:
        pass
    p.wait()


@pytest.mark.slow
def test_training_goes_on_while_the_tracking_server_is_away(tmp_path):
    """``yamblab train`` logging to an MLflow server that dies after iteration 2 and comes back
    (same port, same store) two iterations later: training neither stops nor waits, says once
    that the server is away and once that it is back, and the run ends with every step of every
    metric exactly once, its plots and its network."""
    import socket

    from mlflow import MlflowClient

    from yamblab.model.checkpoint import load_checkpoint

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    server = _mlflow_server(tmp_path, port)
    log = tmp_path / "train.log"
    train = subprocess.Popen(
        [sys.executable, "-m", "yamblab.cli.main", "train", "-c", str(ROOT / "configs" / "yahtzee-tiny.yaml"),
         "--tracking-uri", uri, "--set", "runtime.actors=in_process", "--set", "runtime.max_policy_lag=0",
         "--set", "runtime.iterations=8", "--set", "runtime.eval_games=8", "--set", "train.games_per_iteration=8"],
        cwd=tmp_path, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)

    def checkpoint_iteration() -> int:
        found = list(tmp_path.glob("runs/*/checkpoint.pt"))
        try:
            return int(load_checkpoint(found[0])["iteration"]) if found else 0
        except Exception:  # noqa: BLE001 - being replaced just now
            return 0

    try:
        client = MlflowClient(tracking_uri=uri)
        deadline = time.time() + 300
        run_id = None
        while True:             # iteration 2 reached the server
            assert train.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            runs = client.search_runs([client.get_experiment_by_name("yamblab").experiment_id]) \
                if client.get_experiment_by_name("yamblab") else []
            if runs and max((m.step for m in client.get_metric_history(runs[0].info.run_id, "iteration")),
                            default=0) >= 2:
                run_id = runs[0].info.run_id
                break
            time.sleep(0.3)
        _stop(server)
        away_at = checkpoint_iteration()
        while checkpoint_iteration() < away_at + 2:      # training goes on without the server
            assert train.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        back_at = checkpoint_iteration()
        server = _mlflow_server(tmp_path, port)
        assert train.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if train.poll() is None:
            os.killpg(train.pid, signal.SIGKILL)
        _stop(server)
    out = log.read_text()
    assert out.count(f"MLflow: the tracking server at {uri} does not answer") == 1, out[-3000:]
    assert out.count(f"MLflow: the tracking server at {uri} answers again") == 1, out[-3000:]
    assert "Traceback" not in out and "Retrying" not in out and "still away" not in out
    assert away_at <= 3 and back_at >= away_at + 2
    store = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'server.db'}")     # the server's own store
    run = store.get_run(run_id)
    assert run.info.status == "FINISHED"
    for key in run.data.metrics:
        steps = [m.step for m in store.get_metric_history(run_id, key)]
        assert len(steps) == len(set(steps)), f"{key} logged twice: {sorted(steps)}"
        if key in ("iteration", "train.total", "eval.score_mean"):
            assert sorted(steps) == list(range(1, 9)), (key, sorted(steps))
    files = {p.name for p in (tmp_path / "artifacts").rglob("*") if run_id in str(p)}
    assert {"learning_curve.png", "config.yaml", "summary.json"} <= files, files
    assert store.search_logged_models([run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'")
