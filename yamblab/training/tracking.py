"""MLflow tracking: the driver is the only writer.

Runs, parameters, metrics and artifacts go through :class:`Tracker`, a thin layer over
``mlflow.MlflowClient``. The default store is an embedded SQLite database in the working
directory (``sqlite:///mlflow.db``; MLflow 3 refuses the old file store); ``--tracking-uri``
points at an MLflow server instead. Actors never write: they return their figures to the
driver, which logs them here.

A damaged SQLite store is refused by name before MLflow opens it (:func:`check_sqlite_store`),
and a write that meets a full disk raises one :class:`~yamblab.errors.DiskFullError` naming the
database or the run's artifact folder.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from yamblab.errors import DamagedFileError, DiskFullError, is_disk_full
from yamblab.training.configio import flatten

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
#: MLflow's experiment-kind tag, set on yamblab's experiments: model training (not GenAI). MLflow
#: UIs that choose an experiment's first page by it open the training runs; the 3.17 UI goes by
#: its GenAI / Model training switch instead (:meth:`Tracker.ui_command` links with it set).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
log = logging.getLogger(__name__)


def code_version() -> str:
    """The git commit of the code (with ``-dirty`` if modified), or the package version."""
    try:
        here = Path(__file__).resolve().parent
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        if sha.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from yamblab import __version__

    return __version__


def seed_tags(params: dict) -> dict[str, str]:
    """Tags that name a run's seeds apart, from its config (``params``, a run config's dump):
    ``yamblab.training_seed`` (``train.seed``: self-play dice, network initialisation, replay
    sampling) and ``yamblab.evaluation_seed`` (``runtime.eval_seed``: the dice of the
    evaluation games, the same for every run so that runs compare on equal luck), with
    ``yamblab.evaluation_games``. Empty for params that are not a run config."""
    train, runtime = params.get("train"), params.get("runtime")
    if not isinstance(train, dict) or not isinstance(runtime, dict):
        return {}
    out = {}
    if "seed" in train:
        out["yamblab.training_seed"] = str(train["seed"])
    if "eval_seed" in runtime:
        out["yamblab.evaluation_seed"] = str(runtime["eval_seed"])
    if "eval_games" in runtime:
        out["yamblab.evaluation_games"] = str(runtime["eval_games"])
    return out


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI (None: another store, or in memory)."""
    if not uri.startswith("sqlite:"):
        return None
    from sqlalchemy.engine import make_url

    db = make_url(uri).database
    return None if not db or db == ":memory:" else Path(db)


def check_sqlite_store(uri: str) -> None:
    """Refuse a damaged SQLite MLflow store before MLflow opens it (MLflow would build empty
    tables in an emptied file, and answer a damaged one with a traceback).

    A missing file is fine (MLflow creates it). An existing one must be a non-empty SQLite
    database that passes SQLite's ``PRAGMA quick_check``; the check only reads (SQLite itself
    rolls back a transaction a killed writer left half done, as MLflow's first connection would).
    A database another process holds locked is left to MLflow.

    Raises:
        DamagedFileError: the file is empty, not an SQLite database, or fails the check; the
            message names it and says how to keep the runs.
    """
    import sqlite3

    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return
    reason = None
    if path.stat().st_size == 0:
        reason = "it is empty: 0 bytes"
    else:
        try:
            con = sqlite3.connect(str(path), timeout=5.0)
            try:
                rows = [r[0] for r in con.execute("PRAGMA quick_check(3)").fetchall()]
            finally:
                con.close()
            if rows != ["ok"]:
                reason = "SQLite's quick_check finds: " + "; ".join(rows)
        except sqlite3.OperationalError:     # locked by another writer, unreadable: MLflow says so
            return
        except sqlite3.DatabaseError as exc:   # not a database, a malformed image
            reason = str(exc)
    if reason:
        raise DamagedFileError(
            f"the MLflow database {path} is damaged ({reason}); yamblab will not write over it, which "
            f"would lose its runs: restore it from a backup, or move it aside (mv {path} {path}.damaged) "
            f"to start an empty one")


class _QuietDiskFull(logging.Filter):
    """Drops MLflow's own traceback of a full disk (it logs one before raising; the user gets
    :class:`DiskFullError` instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[1] is not None and is_disk_full(record.exc_info[1]))


def _writes(what: str, artifacts: bool = False):
    """Decorate a :class:`Tracker` method that writes: a full disk becomes one
    :class:`DiskFullError` naming the store (the SQLite database, or with ``artifacts`` the
    artifact folder of the run given as the method's first argument) and ``what`` was written."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except DiskFullError:
                raise
            except Exception as exc:
                if not is_disk_full(exc):
                    raise
                where = self._artifact_place(args[0] if args else None) if artifacts else self._store_place()
                raise DiskFullError(f"disk full: no space left on the device to write {where} ({what})") from None
        return wrapper
    return deco


class Tracker:
    """Create runs and log to MLflow.

    Args:
        tracking_uri: MLflow tracking URI (default: SQLite ``mlflow.db`` in the working directory).
        experiment: experiment name (created if missing).

    Raises:
        DamagedFileError: a damaged SQLite store (:func:`check_sqlite_store`), never written over.
        DiskFullError: here or from any method that writes: no space left for the store.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "yamblab"):
        import mlflow
        from mlflow import MlflowClient

        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        self.uri = tracking_uri or DEFAULT_TRACKING_URI
        check_sqlite_store(self.uri)
        quiet = logging.getLogger("mlflow.store.db.utils")
        if not any(isinstance(f, _QuietDiskFull) for f in quiet.filters):
            quiet.addFilter(_QuietDiskFull())
        mlflow.set_tracking_uri(self.uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_id = self._experiment_id(experiment)
        self.experiment = experiment

    def _store_place(self) -> str:
        path = sqlite_path(self.uri)
        return f"the MLflow database {path}" if path is not None else f"the MLflow store {self.uri}"

    def _artifact_place(self, run_id) -> str:
        try:
            uri = self.client.get_run(run_id).info.artifact_uri
        except Exception:  # noqa: BLE001 - only the message is at stake
            return f"the MLflow artifacts of run {run_id}"
        return f"the MLflow artifacts of run {run_id} in {uri.removeprefix('file://')}"

    @_writes("opening the store and its experiment")
    def _experiment_id(self, name: str) -> str:
        """The experiment's id, created if missing (two drivers starting at once on one server
        both find it missing; the second one's create fails and it reads the first one's),
        tagged as model training (:data:`EXPERIMENT_KIND`)."""
        from mlflow.exceptions import MlflowException

        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            key, kind = EXPERIMENT_KIND
            try:
                return self.client.create_experiment(name, tags={key: kind})
            except MlflowException:
                exp = self.client.get_experiment_by_name(name)
                if exp is None:
                    raise
        self._tag_kind(exp)
        return exp.experiment_id

    def _tag_kind(self, exp) -> None:
        """Tag an existing experiment as model training, unless someone chose its kind: the tag
        is missing (made before yamblab set it) or holds what the MLflow UI guessed (its
        ``…_inferred`` and ``no_inferred_type`` values); a chosen kind is kept."""
        from mlflow.exceptions import MlflowException

        key, kind = EXPERIMENT_KIND
        now = (exp.tags or {}).get(key, "")
        if now == kind or (now and not now.endswith("_inferred") and now != "no_inferred_type"):
            return
        try:
            self.client.set_experiment_tag(exp.experiment_id, key, kind)
        except MlflowException as exc:   # a server that refuses: only the UI's first page is at stake
            log.debug("could not tag experiment %s as %s: %s", exp.name, kind, exc)

    @_writes("starting a run")
    def start_run(self, name: str, params: dict | None = None, tags: dict | None = None,
                  parent_run_id: str | None = None) -> str:
        """Create a run (a child of ``parent_run_id`` if given) and log its params and tags.

        Returns:
            the run id.
        """
        all_tags = {"mlflow.runName": name, **seed_tags(params or {}),
                    **{k: str(v) for k, v in (tags or {}).items()}}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name)
        if params:
            self.log_params(run.info.run_id, params)
        return run.info.run_id

    @_writes("logging parameters")
    def log_params(self, run_id: str, params: dict) -> None:
        """Log a (nested) dict of parameters as dotted keys."""
        from mlflow.entities import Param

        flat = flatten(params)
        items = [Param(k, str(v)[:6000]) for k, v in flat.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i:i + 100])

    @_writes("logging metrics")
    def log_metrics(self, run_id: str, metrics: dict[str, Any], step: int) -> None:
        """Log numeric metrics at ``step`` (non-numeric and non-finite values are skipped)."""
        import math
        import time

        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        items = []
        for k, v in flatten(metrics).items():
            try:
                f = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(f):
                items.append(Metric(k.replace("/", "."), f, ts, int(step)))
        for i in range(0, len(items), 500):
            self.client.log_batch(run_id, metrics=items[i:i + 500])

    @_writes("setting tags")
    def set_tags(self, run_id: str, tags: dict) -> None:
        """Set (or overwrite) tags on a run."""
        for k, v in tags.items():
            self.client.set_tag(run_id, k, str(v))

    @_writes("logging an artifact", artifacts=True)
    def log_artifact(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a local file to the run's artifacts."""
        self.client.log_artifact(run_id, str(path), artifact_path)

    @_writes("logging a text artifact", artifacts=True)
    def log_text(self, run_id: str, text: str, name: str) -> None:
        """Write ``text`` as the run's artifact ``name``."""
        self.client.log_text(run_id, text, name)

    @_writes("logging a plot", artifacts=True)
    def log_figure(self, run_id: str, fig, name: str) -> None:
        """Log a matplotlib figure as a PNG artifact and close it."""
        import matplotlib.pyplot as plt

        self.client.log_figure(run_id, fig, name)
        plt.close(fig)

    @_writes("logging the network as an MLflow model", artifacts=True)
    def log_torch_model(self, run_id: str, model, name: str = "model") -> None:
        """Log a torch module as an MLflow model (best effort: a failure is logged, not raised,
        except a full disk: :class:`DiskFullError`).

        The network is pickled (its forward pass takes a dataclass of tensors, which MLflow's
        graph format cannot export), with its pip requirements given (torch and numpy at their
        public version numbers), so MLflow's warnings about pickling and about the CPU build's
        local version label, which a user cannot act on, are not printed on every run.
        """
        import logging as _logging

        import mlflow
        import numpy
        import torch

        reqs = [f"torch=={torch.__version__.split('+')[0]}", f"numpy=={numpy.__version__}"]
        quiet = _logging.getLogger("mlflow.pytorch")
        level = quiet.level
        quiet.setLevel(_logging.ERROR)
        try:
            with mlflow.start_run(run_id=run_id, nested=True):
                try:
                    mlflow.pytorch.log_model(model, name=name, serialization_format="pickle", pip_requirements=reqs)
                except TypeError:  # MLflow 2
                    mlflow.pytorch.log_model(model, artifact_path=name, pip_requirements=reqs)
        except Exception as exc:  # noqa: BLE001 - the run's other records must survive
            if is_disk_full(exc):
                raise
            log.warning("could not log the network as an MLflow model: %s", exc)
        finally:
            quiet.setLevel(level)

    @_writes("ending a run")
    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """Mark the run terminated with ``status`` (FINISHED, FAILED, KILLED)."""
        self.client.set_terminated(run_id, status)

    def ui_command(self) -> str:
        """How to see the runs: the command that opens the MLflow UI on this store (for a
        server: its address) and the experiment's page on its training runs. The page's
        ``workflowType=machine_learning`` is needed: MLflow 3's UI (3.17) opens every experiment
        on its GenAI overview unless its GenAI / Model training switch says otherwise, whatever
        the experiment's kind tag."""
        page = f"#/experiments/{self.experiment_id}?workflowType=machine_learning"
        if self.uri.startswith(("http://", "https://")):
            return f"open {self.uri.rstrip('/')}/{page} in a browser (the MLflow server's UI)"
        return f"mlflow ui --backend-store-uri {self.uri}, then open http://127.0.0.1:5000/{page}"
