"""A full disk stops a run with one error naming the file, keeps the last good checkpoint, and
the same command carries on once space is back.

The disk is a small tmpfs mounted for the test (``mount -t tmpfs``: root only; skipped where
mounting is not permitted), filled with a filler file at the moment that matters.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from yamblab.errors import DiskFullError, is_disk_full

ROOT = Path(__file__).resolve().parents[1]


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")


@pytest.fixture()
def small_disk(tmp_path):
    """A mounted 4 MB tmpfs (unmounted after the test)."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "4m")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` with a filler file, leaving about ``leave`` bytes free; returns the filler."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize - leave
    with open(filler, "ab") as f:
        try:
            f.write(b"\0" * max(free, 0))
            f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_is_disk_full_sees_through_wrapping():
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    try:      # as MLflow raises it: its exception, from SQLAlchemy's, from sqlite3's
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)
    assert not is_disk_full(RuntimeError(sqlite3.OperationalError("database is locked")))
    assert is_disk_full(DiskFullError("disk full"))


def test_an_atomic_write_on_a_full_disk_keeps_the_old_file(small_disk):
    from yamblab.atomic import atomic_write

    target = small_disk / "runs" / "checkpoint.pt"
    atomic_write(target, b"the good checkpoint")
    fill(small_disk, leave=4096)
    with pytest.raises(DiskFullError, match=f"no space left on the device to write {target} "
                                            r"\(the file there before is kept as it was\)"):
        atomic_write(target, os.urandom(64 * 1024))
    assert target.read_bytes() == b"the good checkpoint"
    assert [p.name for p in target.parent.iterdir()] == ["checkpoint.pt"]       # no temporary file left
    with pytest.raises(DiskFullError, match="nothing was written"):
        atomic_write(small_disk / "runs" / "new.pt", os.urandom(64 * 1024))
    (small_disk / "filler").unlink()
    atomic_write(target, b"the next one")
    assert target.read_bytes() == b"the next one"


def test_mlflow_on_a_full_disk_names_its_database_and_keeps_what_it_had(small_disk, capsys, caplog):
    from yamblab.training.tracking import Tracker

    db = small_disk / "mlflow.db"
    t = Tracker(f"sqlite:///{db}", "yamblab")
    rid = t.start_run("r", params={"a": 1})
    t.log_metrics(rid, {"loss": 1.0}, step=1)
    filler = fill(small_disk)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(DiskFullError, match=f"no space left on the device to write the MLflow database {db} "
                                                r"\(logging metrics\)"):
            for step in range(2, 200):
                t.log_metrics(rid, {f"m{i}": float(i) for i in range(500)}, step=step)
    # MLflow's own traceback of the failure is not shown to the user
    assert "Traceback" not in capsys.readouterr().err
    assert not any(r.exc_info and is_disk_full(r.exc_info[1]) for r in caplog.records)
    filler.unlink()
    t.log_metrics(rid, {"loss": 0.5}, step=2)
    t.end_run(rid)
    history = t.client.get_metric_history(rid, "loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]


def test_mlflow_artifacts_on_a_full_disk_name_the_run_folder(small_disk, tmp_path, monkeypatch):
    from yamblab.training.tracking import Tracker

    monkeypatch.chdir(small_disk)             # MLflow's artifacts go to ./mlruns, the database elsewhere
    t = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "yamblab")
    rid = t.start_run("r")
    t.log_text(rid, "small", "small.txt")
    filler = fill(small_disk)
    with pytest.raises(DiskFullError, match=f"the MLflow artifacts of run {rid} in {small_disk}/mlruns/.*"
                                            r"/artifacts \(logging a text artifact\)$"):
        t.log_text(rid, "x" * 100_000, "big.txt")
    filler.unlink()
    t.log_text(rid, "x" * 100_000, "big.txt")
    assert sorted(p.name for p in (small_disk / "mlruns").rglob("*.txt")) == ["big.txt", "small.txt"]


def test_an_optuna_journal_append_on_a_full_disk_leaves_the_journal_whole(small_disk):
    import optuna

    from yamblab.sweeps.journal import check_journal, journal_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = small_disk / "s.journal"
    study = optuna.create_study(study_name="s", storage=journal_storage(path))
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=1.0))
    before = path.read_bytes()
    fill(small_disk)
    with pytest.raises(DiskFullError, match=f"the Optuna journal {path} \\(the records before are kept"):
        study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=2.0,
                                                  user_attrs={"big": "x" * 20000}))
    assert path.read_bytes() == before                  # no record cut short
    assert check_journal(path) == before.count(b"\n")
    (small_disk / "filler").unlink()
    study = optuna.load_study(study_name="s", storage=journal_storage(path))
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=2.0))
    assert [t.value for t in study.trials] == [1.0, 2.0]


def _train(*args, cwd):
    env = {**os.environ, "YAMBLAB_CACHE_DIR": os.environ["YAMBLAB_CACHE_DIR"]}
    return subprocess.run([sys.executable, "-m", "yamblab.cli.main", "train", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_run_stopped_by_a_full_disk_keeps_its_checkpoint_and_resumes(tmp_path, official_table):
    """The run folder and the MLflow database on two small tmpfs. One iteration is checkpointed;
    then the resumed run meets a full disk twice: first MLflow's (its second iteration's metrics),
    then, with that space back, the run folder's (its second checkpoint). Each time: status 2,
    one error naming the file, the first checkpoint unchanged. With the space back, the same
    command finishes the run, in the same MLflow run."""
    import mlflow

    from yamblab.model.checkpoint import load_checkpoint

    disk, store = tmp_path / "disk", tmp_path / "store"
    _mount_tmpfs(disk, "12m")
    try:
        _mount_tmpfs(store, "4m")
        runs, db = disk / "runs", store / "mlflow.db"
        common = ["--tracking-uri", f"sqlite:///{db}"]
        res = _train("-c", str(ROOT / "configs" / "yahtzee-tiny.yaml"), *common,
                     "--set", "runtime.actors=in_process", "--set", "runtime.max_policy_lag=0",
                     "--set", "runtime.eval_games=4", "--set", "runtime.iterations=1",
                     "--set", f"runtime.run_dir={runs}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        (run_dir,) = runs.iterdir()
        ckpt = run_dir / "checkpoint.pt"
        first = ckpt.read_bytes()
        assert int(load_checkpoint(ckpt)["iteration"]) == 1
        replay = run_dir / "replay"                 # the buffer's positions, beside the checkpoint
        segments = {p.name: p.read_bytes() for p in replay.iterdir()}
        assert segments
        again = ["--resume", str(run_dir), *common, "--set", "runtime.iterations=2"]
        kept = (f"The last good checkpoint {ckpt} (iteration 1) is kept: free some space, then resume with: "
                f"yamblab train --resume {run_dir}")

        def stopped(res) -> str:
            assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
            assert "Traceback" not in res.stderr, res.stderr[-3000:]
            assert ckpt.read_bytes() == first
            assert {p.name: p.read_bytes() for p in replay.iterdir()} == segments
            left = [p.name for p in [*run_dir.iterdir(), *replay.iterdir()] if p.name.startswith(".")]
            assert left == []                                        # no temporary file
            return res.stderr.strip().splitlines()[-1]

        filler = fill(store)
        assert stopped(_train(*again, cwd=tmp_path)) == (
            f"error: disk full: no space left on the device to write the MLflow database {db} (marking the run as "
            "running again). " + kept)
        filler.unlink()

        # room for the small files, not the next checkpoint: its new positions, written first, stop it
        filler = fill(disk, leave=len(first) // 4)
        assert re.fullmatch(re.escape(f"error: disk full: no space left on the device to write {replay}/seg-")
                            + r"\d{12}\.bin" + re.escape(" (nothing was written). " + kept),
                            stopped(_train(*again, cwd=tmp_path)))
        filler.unlink()

        res = _train(*again, cwd=tmp_path)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        assert "(iteration 1 of 2)" in res.stdout
        final = load_checkpoint(ckpt)
        assert [h["iteration"] for h in json.loads(final["history"])] == [1, 2]
        runs_logged = mlflow.MlflowClient(f"sqlite:///{db}").search_runs(["1"])
        assert [r.info.status for r in runs_logged] == ["FINISHED"]
        assert runs_logged[0].info.run_id == final["mlflow_run_id"]
    finally:
        for d in (store, disk):
            subprocess.run(["umount", "-l", str(d)], check=False)
