"""A damaged Optuna journal or MLflow database is refused by name, never rebuilt over finished
trials: the command stops with one ``error:`` line naming the file and what to do, and the file
keeps every byte it had.

Each store is made by the real library (a study with finished trials in a journal, an MLflow
run in a SQLite database) and then damaged; no training runs and no Ray starts.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from yamblab.errors import DamagedFileError

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "test-sweep.yaml"
TINY = ROOT / "configs" / "yahtzee-tiny.yaml"


def _finished_study(path: Path, n: int = 3) -> bytes:
    """A journal holding the study ``test-sweep`` with ``n`` finished trials; returns its bytes."""
    import optuna

    from yamblab.sweeps.journal import journal_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="test-sweep", storage=journal_storage(path), direction="minimize")
    for seed in range(n):
        study.add_trial(optuna.trial.create_trial(
            params={}, distributions={}, value=1.0 + seed,
            user_attrs={"arm": "baseline", "seed": seed, "config_digest": "0123456789ab"}))
    return path.read_bytes()


def _damage(raw: bytes, how: str) -> bytes:
    lines = raw.split(b"\n")
    if how == "garbled line":
        return b"\n".join(lines[:2] + [b"\x00\xff" + lines[2][2:]] + lines[3:])
    if how == "cut short":
        return raw[:-25]
    if how == "all garbage":
        return bytes(range(256)).replace(b"\n", b"") * 4
    if how == "foreign record":
        return b'{"not": "optuna"}\n' + raw
    raise ValueError(how)


JOURNAL_DAMAGE = [
    ("garbled line", "line 3 (from byte"),
    ("cut short", "ends in an incomplete record"),
    ("all garbage", "holds no complete journal record"),
    ("foreign record", "line 1 (from byte 0) is not a journal record"),
]


def _run(args, cwd: Path, monkeypatch):
    """Run ``yamblab ARGS`` in ``cwd``; returns (exit code, its one ``error:`` line, all output)."""
    from yamblab.cli.main import app

    monkeypatch.chdir(cwd)
    res = CliRunner().invoke(app, args)
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and res.output.strip().endswith(errors[0]), res.output
    assert "Traceback" not in res.output
    return res.exit_code, errors[0], res.output


@pytest.mark.parametrize("how, words", JOURNAL_DAMAGE)
def test_a_damaged_journal_stops_the_sweep_by_name_and_keeps_its_bytes(tmp_path, monkeypatch, how, words):
    journal = tmp_path / ".yamblab" / "sweeps" / "test-sweep.journal"
    journal.parent.mkdir(parents=True)
    bad = _damage(_finished_study(journal), how)
    journal.write_bytes(bad)
    code, out, _ = _run(["sweep", str(SPEC)], tmp_path, monkeypatch)
    assert code == 2
    assert out.startswith("error: the Optuna journal .yamblab/sweeps/test-sweep.journal ") and words in out
    assert ("truncate -s" in out) == (how == "cut short")
    assert "restore" in out and "will not write" in out
    assert journal.read_bytes() == bad                      # untouched: no record appended, nothing cut
    assert not (tmp_path / "runs").exists()                  # no trial started


def test_the_cut_short_journal_keeps_its_finished_trials_with_the_command_it_names(tmp_path):
    """The ``truncate`` the message gives leaves every complete record: the finished trials are
    all there again (the record cut short was never whole)."""
    import optuna

    from yamblab.sweeps.journal import check_journal, journal_storage

    journal = tmp_path / "s.journal"
    raw = _finished_study(journal, n=3)
    n = check_journal(journal)
    assert n == raw.count(b"\n") and n >= 4                  # the study and its trials' records
    journal.write_bytes(raw + b'{"op_code":5,"worker_id":"x","trial_id":')   # a write cut short
    with pytest.raises(DamagedFileError, match="incomplete record") as err:
        check_journal(journal)
    size = int(str(err.value).split("truncate -s ")[1].split()[0])
    assert size == len(raw)
    os.truncate(journal, size)
    study = optuna.load_study(study_name="test-sweep", storage=journal_storage(journal))
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 3
    assert [t.user_attrs["seed"] for t in study.trials] == [0, 1, 2]


@pytest.mark.parametrize("raw", [b'{"op_code":0,"worker_id":"w"}\n',             # a study without a name
                                 b'{"op_code":99,"worker_id":"w"}\n',            # an operation Optuna lacks
                                 b'{"op_code":0,"worker_id":"w","study_name":"s","directions":"up"}\n'])
def test_a_journal_optuna_cannot_replay_is_refused(tmp_path, raw):
    from yamblab.sweeps.journal import journal_storage

    journal = tmp_path / "s.journal"
    journal.write_bytes(raw)
    with pytest.raises(DamagedFileError, match="cannot replay its records"):
        journal_storage(journal)
    assert journal.read_bytes() == raw


def test_new_and_empty_journals_are_new_studies(tmp_path):
    from yamblab.sweeps.journal import check_journal

    assert check_journal(tmp_path / "missing.journal") == 0
    (tmp_path / "empty.journal").write_bytes(b"")
    assert check_journal(tmp_path / "empty.journal") == 0


# --------------------------------------------------------------------------- MLflow
@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory) -> bytes:
    """The bytes of an MLflow SQLite store holding one finished run."""
    from yamblab.training.tracking import Tracker

    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    t = Tracker(f"sqlite:///{db}", "yamblab")
    rid = t.start_run("finished", params={"a": 1})
    t.log_metrics(rid, {"eval.regret_mean": 3.0}, step=1)
    t.end_run(rid)
    return db.read_bytes()


def _damage_db(raw: bytes, how: str) -> bytes:
    if how == "emptied":
        return b""
    if how == "garbage":
        return bytes(range(256)) * (len(raw) // 256)
    if how == "cut in half":
        return raw[: len(raw) // 2]
    if how == "a page zeroed":
        return raw[:3 * 4096] + bytes(4096) + raw[4 * 4096:]
    raise ValueError(how)


DB_DAMAGE = [("emptied", "it is empty: 0 bytes"), ("garbage", "file is not a database"),
             ("cut in half", "malformed"), ("a page zeroed", "malformed")]
COMMANDS = {
    "sweep": lambda db: ["sweep", str(SPEC), "--tracking-uri", f"sqlite:///{db}"],
    "train": lambda db: ["train", "-c", str(TINY), "--tracking-uri", f"sqlite:///{db}", "--set",
                         f"runtime.run_dir={db.parent / 'runs'}"],
}


@pytest.mark.parametrize("how, words", DB_DAMAGE)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_damaged_mlflow_database_is_refused_by_name_and_keeps_its_bytes(tmp_path, monkeypatch, mlflow_store,
                                                                          command, how, words):
    db = tmp_path / "mlflow.db"
    bad = _damage_db(mlflow_store, how)
    db.write_bytes(bad)
    code, out, _ = _run(COMMANDS[command](db), tmp_path, monkeypatch)
    assert code == 2
    assert out.startswith(f"error: the MLflow database {db} is damaged (") and words in out, out
    assert f"mv {db} {db}.damaged" in out and "restore it from a backup" in out
    assert db.read_bytes() == bad
    assert not (tmp_path / "runs").exists() and not (tmp_path / ".yamblab").exists()


def test_a_sound_mlflow_database_is_opened_and_keeps_its_runs(tmp_path, mlflow_store):
    from yamblab.training.stores import check_sqlite_store
    from yamblab.training.tracking import Tracker

    db = tmp_path / "mlflow.db"
    db.write_bytes(mlflow_store)
    check_sqlite_store(f"sqlite:///{db}")
    check_sqlite_store(f"sqlite:///{tmp_path / 'new.db'}")      # a new store: MLflow creates it
    check_sqlite_store("http://127.0.0.1:5000")                 # a server: not a file of ours
    t = Tracker(f"sqlite:///{db}", "yamblab")
    runs = t.client.search_runs([t.experiment_id])
    assert [(r.info.run_name, r.info.status) for r in runs] == [("finished", "FINISHED")]
    assert runs[0].data.metrics == {"eval.regret_mean": 3.0}
