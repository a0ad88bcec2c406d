"""MLflow tracking: the driver is the only writer.

Runs, parameters, metrics and artifacts go through :class:`Tracker`, a thin layer over
``mlflow.MlflowClient``. The default store is an embedded SQLite database in the working
directory (``sqlite:///mlflow.db``; MLflow 3 refuses the old file store); ``--tracking-uri``
points at an MLflow server instead. Actors never write: they return their figures to the
driver, which logs them here.

A damaged SQLite store is refused by name before MLflow opens it (:func:`check_sqlite_store`),
and a write that meets a full disk raises one :class:`~yamblab.errors.DiskFullError` naming the
database or the run's artifact folder.

Nothing is logged twice: the tracker knows the last step of every metric of a run (read from the
store when it takes over a run begun by an earlier, killed driver) and sends only newer steps,
so a resumed run can log its whole history again and only what the store lacks goes out. A
server that goes away in the middle of a run neither stops nor stalls it: records wait in the
tracker's outbox, sent in order by a thread of their own as soon as the server answers again
(:class:`Tracker`).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from yamblab.errors import DiskFullError, is_disk_full
from yamblab.training.configio import flatten
from yamblab.training.stores import DEFAULT_TRACKING_URI, check_sqlite_store, check_store_writable, sqlite_path
from yamblab.training.outbox import WORDS, Outbox, QuietRetries, reason, say, server_away

#: MLflow's experiment-kind tag, set on yamblab's experiments: model training (not GenAI). MLflow
#: UIs that choose an experiment's first page by it open the training runs; the 3.17 UI goes by
#: its GenAI / Model training switch instead (:meth:`Tracker.ui_command` links with it set).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
log = logging.getLogger(__name__)
#: MLflow's settings for a tracking server, unless the environment sets them: a request is tried
#: three times within a few seconds (MLflow's own default retries for about four minutes and
#: waits two minutes for an answer), so a server that went away is noticed at once and the
#: records wait in the outbox instead of holding up the caller; and a run's end does not print
#: its links (yamblab prints where to see the runs once).
SERVER_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                   "MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


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

    Every write (metrics, parameters, tags, artifacts, a run's end) goes through the tracker's
    outbox, in the order made. With a local store it is written at once (and raises as MLflow
    does). With a tracking server (an ``http(s)://`` URI) a thread sends it: while the server
    does not answer, the records wait (in memory) and the caller carries on; the user is told
    once when the server goes away and once when it is back and the waiting records are sent;
    :meth:`close` waits for the rest. A record the server refuses (a 4xx answer) is dropped
    with a warning.

    Metrics are sent only at steps newer than the last one the store has for that metric of that
    run (:meth:`log_metrics`), so a record whose answer was lost with the server, or a resumed
    run that logs its history again, is never logged twice.

    Args:
        tracking_uri: MLflow tracking URI (default: SQLite ``mlflow.db`` in the working directory).
        experiment: experiment name (created if missing).
        patience_s: how long :meth:`close` waits for an absent server before it gives up on the
            records still waiting (it says which, and how to send them later).
        retry_s: seconds between attempts to reach an absent server.

    Raises:
        DamagedFileError: a damaged SQLite store (:func:`check_sqlite_store`), never written over.
        DiskFullError: here or from any method that writes: no space left for the store.
        YamblabError: the tracking server does not answer when the tracker starts (the message
            names it).
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "yamblab",
                 patience_s: float = 60.0, retry_s: float = 5.0):
        import mlflow
        from mlflow import MlflowClient

        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        self.uri = tracking_uri or DEFAULT_TRACKING_URI
        check_sqlite_store(self.uri)
        check_store_writable(self.uri)
        quiet = logging.getLogger("mlflow.store.db.utils")
        if not any(isinstance(f, _QuietDiskFull) for f in quiet.filters):
            quiet.addFilter(_QuietDiskFull())
        self.remote = self.uri.startswith(("http://", "https://"))
        if self.remote:
            for key, value in SERVER_SETTINGS.items():
                os.environ.setdefault(key, value)
            pool = logging.getLogger("urllib3.connectionpool")
            if not any(isinstance(f, QuietRetries) for f in pool.filters):
                pool.addFilter(QuietRetries())
        mlflow.set_tracking_uri(self.uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.patience_s, self.retry_s = float(patience_s), float(retry_s)
        #: run id -> metric -> the last step the store has (None until read or the run is new)
        self._marks: dict[str, dict[str, int]] = {}
        self._outbox = Outbox(self) if self.remote else None
        try:
            self.experiment_id = self._experiment_id(experiment)
        except Exception as exc:  # noqa: BLE001 - a server that does not answer is named, not a traceback
            if not (self.remote and server_away(exc)):
                raise
            from yamblab.errors import YamblabError

            raise YamblabError(f"the MLflow tracking server at {self.uri} does not answer "
                               f"({reason(exc)}); start it, or choose another store with --tracking-uri "
                               f"(e.g. {DEFAULT_TRACKING_URI})") from None
        self.experiment = experiment
        if not self.remote:      # a local artifact folder is written by this process: checked now
            from urllib.parse import urlparse

            from yamblab.atomic import check_writable

            where = urlparse(self.client.get_experiment(self.experiment_id).artifact_location or "")
            if where.scheme in ("", "file") and where.path:
                check_writable(where.path, "MLflow's artifact folder")

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
        self._marks[run.info.run_id] = {}
        if params:
            self.log_params(run.info.run_id, params)
        return run.info.run_id

    def find_run(self, tags: dict[str, str]) -> str | None:
        """The newest unfinished run of the experiment that carries every one of ``tags`` (a
        run a killed driver created before it could write its id anywhere), or None."""
        found = self.unfinished_runs(tags, limit=1)
        return found[0][0] if found else None

    def unfinished_runs(self, tags: dict[str, str], limit: int = 10_000) -> list[tuple[str, str]]:
        """``(run id, status)`` of the experiment's runs that carry every one of ``tags`` and are
        not finished, newest first (none where a value holds both kinds of quote)."""
        if any("'" in str(v) and '"' in str(v) for v in tags.values()):
            return []
        quote = lambda v: f"'{v}'" if "'" not in v else f'"{v}"'      # noqa: E731
        where = " and ".join(f"tags.`{k}` = {quote(str(v))}" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], f"{where} and attributes.status != 'FINISHED'",
                                       max_results=limit, order_by=["attributes.start_time DESC"])
        return [(r.info.run_id, r.info.status) for r in runs]

    @_writes("marking the run as running again")
    def reopen(self, run_id: str) -> None:
        """Mark a run taken over from an earlier driver as running again."""
        self._put(("status", run_id, "RUNNING"))

    @_writes("logging parameters")
    def log_params(self, run_id: str, params: dict) -> None:
        """Log a (nested) dict of parameters as dotted keys."""
        from mlflow.entities import Param

        flat = flatten(params)
        self._put(("params", run_id, [Param(k, str(v)[:6000]) for k, v in flat.items()]))

    @_writes("logging metrics")
    def log_metrics(self, run_id: str, metrics: dict[str, Any], step: int) -> None:
        """Log numeric metrics at ``step`` (non-numeric and non-finite values are skipped, and so
        is a metric the store already has at ``step`` or a later step: see the class doc)."""
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
        if items:
            self._put(("metrics", run_id, items))

    @_writes("setting tags")
    def set_tags(self, run_id: str, tags: dict) -> None:
        """Set (or overwrite) tags on a run."""
        self._put(("tags", run_id, {k: str(v) for k, v in tags.items()}))

    @_writes("logging an artifact", artifacts=True)
    def log_artifact(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a local file to the run's artifacts (for a server, its bytes are read now: the
        file may be gone when the record is sent)."""
        data = Path(path).read_bytes() if self.remote else None
        self._put(("file", run_id, (Path(path), artifact_path, data)))

    @_writes("logging a text artifact", artifacts=True)
    def log_text(self, run_id: str, text: str, name: str) -> None:
        """Write ``text`` as the run's artifact ``name``."""
        self._put(("text", run_id, (text, name)))

    @_writes("logging a plot", artifacts=True)
    def log_figure(self, run_id: str, fig, name: str) -> None:
        """Log a matplotlib figure as a PNG artifact and close it."""
        import io

        import matplotlib.pyplot as plt

        png = io.BytesIO()
        fig.savefig(png, format="png")
        plt.close(fig)
        folder, _, base = name.rpartition("/")
        self._put(("file", run_id, (Path(base), folder or None, png.getvalue())))

    @_writes("logging the network as an MLflow model", artifacts=True)
    def log_torch_model(self, run_id: str, model, name: str = "model") -> None:
        """Log a torch module as an MLflow model (best effort: a failure is logged, not raised,
        except a full disk: :class:`DiskFullError`).

        The network is pickled (its forward pass takes a dataclass of tensors, which MLflow's
        graph format cannot export), with its pip requirements given (torch and numpy at their
        public version numbers), so MLflow's warnings about pickling and about the CPU build's
        local version label, which a user cannot act on, are not printed on every run.

        It is logged once per run (a run that has it already is left as it is). With a tracking
        server, the records before it are sent first; a server still away after the tracker's
        patience leaves it out (:meth:`close` says so).
        """
        import logging as _logging

        import mlflow
        import numpy
        import torch

        if self._outbox is not None and not self.flush():     # the server is away: wait for it, a while
            self._outbox.skipped.append("the network as an MLflow model")
            return
        if self._has_model(run_id, name):      # logged by an earlier driver of this run
            return
        reqs = [f"torch=={torch.__version__.split('+')[0]}", f"numpy=={numpy.__version__}"]
        quiet = _logging.getLogger("mlflow.pytorch")
        level = quiet.level
        quiet.setLevel(_logging.ERROR)
        try:
            with mlflow.start_run(run_id=run_id, nested=True):
                mlflow.pytorch.log_model(model, name=name, serialization_format="pickle", pip_requirements=reqs)
        except Exception as exc:  # noqa: BLE001 - the run's other records must survive
            if is_disk_full(exc):
                raise
            log.warning("could not log the network as an MLflow model: %s", exc)
        finally:
            quiet.setLevel(level)

    def _has_model(self, run_id: str, name: str) -> bool:
        """Whether the run has a logged model called ``name`` already (False where the store
        cannot say: it is logged again)."""
        try:
            found = self.client.search_logged_models([self.experiment_id], filter_string=(
                f"source_run_id = '{run_id}' AND name = '{name}'"), max_results=1)
        except Exception:  # noqa: BLE001 - a store without logged-model search: log it
            return False
        return bool(found)

    @_writes("ending a run")
    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """Mark the run terminated with ``status`` (FINISHED, FAILED, KILLED)."""
        self._put(("end", run_id, status))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record is sent (at most ``timeout`` seconds; default: the
        tracker's patience). Returns whether all were."""
        if self._outbox is None:
            return True
        return self._outbox.drain(self.patience_s if timeout is None else timeout)

    def close(self, backfill: str | None = None) -> bool:
        """Send what waits (for at most the tracker's patience) and stop the sender. When records
        are still waiting, say which and, with ``backfill``, the command that sends them once
        the server is back. Returns whether everything was sent."""
        if self._outbox is None:
            return True
        out = self._outbox
        sent = out.drain(self.patience_s)
        left = out.stop()
        if not sent or out.skipped:
            values = sum(len(op[2]) for op in left if op[0] == "metrics")
            others = sorted({WORDS[op[0]] for op in left if op[0] != "metrics"} | set(out.skipped))
            what = ", ".join(([f"{values} metric value{'s' * (values != 1)}"] if values else []) + others)
            how = (f"the run's checkpoint keeps them: once the server is back, `{backfill}` sends them "
                   f"(nothing is logged twice)" if backfill else "they are not in MLflow")
            say(f"MLflow: the tracking server at {self.uri} is still away after waiting "
                 f"{self.patience_s:.0f} s; not sent: {what}; {how}")
        return sent and not out.skipped

    # -- sending
    def _put(self, op: tuple) -> None:
        """Send ``op`` now (a local store) or through the outbox (a server)."""
        if self._outbox is None:
            self._send(op)
        else:
            self._outbox.put(op)

    def _logged_steps(self, run_id: str) -> dict[str, int]:
        """The last step the store has of each metric of a run."""
        out = {}
        for key in self.client.get_run(run_id).data.metrics:
            out[key] = max((int(m.step) for m in self.client.get_metric_history(run_id, key)), default=-1)
        return out

    def _send(self, op: tuple) -> None:
        """Write one record ``(kind, run_id, data)`` to the store (raises as MLflow does)."""
        kind, run_id, data = op
        if kind == "metrics":
            marks = self._marks.get(run_id)
            if marks is None:
                marks = self._marks[run_id] = self._logged_steps(run_id)
            items = [m for m in data if m.step > marks.get(m.key, -1)]
            for i in range(0, len(items), 500):
                chunk = items[i:i + 500]
                self.client.log_batch(run_id, metrics=chunk)
                for m in chunk:
                    marks[m.key] = max(marks.get(m.key, -1), int(m.step))
        elif kind == "params":
            for i in range(0, len(data), 100):
                self.client.log_batch(run_id, params=data[i:i + 100])
        elif kind == "tags":
            for k, v in data.items():
                self.client.set_tag(run_id, k, v)
        elif kind == "text":
            self.client.log_text(run_id, *data)
        elif kind == "file":
            path, artifact_path, raw = data
            if raw is None:
                self.client.log_artifact(run_id, str(path), artifact_path)
            else:
                import tempfile

                with tempfile.TemporaryDirectory(prefix="yamblab-artifact-") as tmp:
                    (Path(tmp) / path.name).write_bytes(raw)
                    self.client.log_artifact(run_id, str(Path(tmp) / path.name), artifact_path)
        elif kind == "status":
            self.client.update_run(run_id, status=data)
        elif kind == "end":
            self.client.set_terminated(run_id, data)

    def artifact_folder(self, run_id: str) -> str:
        """Where a run's artifacts are: a local folder (``file://`` dropped), or the store's URI."""
        return self.client.get_run(run_id).info.artifact_uri.removeprefix("file://")

    def ui_command(self, run_id: str | None = None) -> str:
        """How to see the runs: the command that opens the MLflow UI on this store (for a
        server: its address) and the experiment's page on its training runs (``run_id``: that
        run's page). The page's
        ``workflowType=machine_learning`` is needed: MLflow 3's UI (3.17) opens every experiment
        on its GenAI overview unless its GenAI / Model training switch says otherwise, whatever
        the experiment's kind tag."""
        page = f"#/experiments/{self.experiment_id}" + (f"/runs/{run_id}" if run_id else "")
        page += "?workflowType=machine_learning"
        if self.uri.startswith(("http://", "https://")):
            return f"open {self.uri.rstrip('/')}/{page} in a browser (the MLflow server's UI)"
        return f"mlflow ui --backend-store-uri {self.uri}, then open http://127.0.0.1:5000/{page}"
