"""The outbox of a :class:`~yamblab.training.tracking.Tracker` that writes to a tracking server:
records sent in order by a thread of their own, so that a server that goes away neither stops
nor stalls training; they wait, and go out as soon as the server answers again."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque

log = logging.getLogger(__name__)


#: what each kind of record is, in the words of :meth:`Tracker.close`'s message
WORDS = {"params": "parameters", "tags": "tags", "text": "artifacts", "file": "artifacts",
          "status": "the run's state", "end": "the run's end"}


class QuietRetries(logging.Filter):
    """Drops the HTTP library's warning at every retry of a request (a line per attempt while a
    server is away); the tracker says once that the server is away and once that it is back."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Retrying")


def say(msg: str) -> None:
    """Tell the user (on stderr, above a progress bar if one is drawn)."""
    try:
        from tqdm.auto import tqdm

        tqdm.write(msg, file=sys.stderr)
    except Exception:  # noqa: BLE001 - a message, never an error
        print(msg, file=sys.stderr, flush=True)


def reason(exc: BaseException) -> str:
    """An error's gist in one short line (MLflow's messages quote whole URLs and causes)."""
    text = " ".join(str(exc).split())
    for cue in ("Connection refused", "timed out", "Read timed out", "Name or service not known",
                "Max retries exceeded", "Connection reset", "Connection aborted"):
        if cue in text:
            return cue.lower()
    return text[:160]


def server_away(exc: BaseException) -> bool:
    """Whether a failed request means the server is away (no answer, a timeout, a 5xx answer)
    rather than that it refused the record (a 4xx answer: sending it again would not help)."""
    from mlflow.exceptions import MlflowException

    if isinstance(exc, MlflowException):
        return not 400 <= exc.get_http_status_code() < 500
    try:
        import requests

        if isinstance(exc, requests.RequestException):
            return True
    except ImportError:  # pragma: no cover - MLflow depends on requests
        pass
    return isinstance(exc, OSError)


class Outbox:
    """The records a :class:`Tracker` sends to a tracking server, in order, from a thread of
    their own; while the server is away they wait and are tried again every ``retry_s``."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.ops: deque = deque()
        self.cv = threading.Condition()
        self.thread: threading.Thread | None = None
        self.closed = False
        #: when sending started failing (None: the server answers)
        self.away_since: float | None = None
        #: what was not even queued while the server was away (the network as a model)
        self.skipped: list[str] = []

    def put(self, op: tuple) -> None:
        with self.cv:
            self.ops.append(op)
            if self.thread is None or not self.thread.is_alive():
                self.closed = False
                self.thread = threading.Thread(target=self._run, name="yamblab-mlflow-outbox", daemon=True)
                self.thread.start()
            self.cv.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until nothing waits (at most ``timeout`` seconds); returns whether so."""
        with self.cv:
            return self.cv.wait_for(lambda: not self.ops, timeout=max(0.0, timeout))

    def stop(self) -> list[tuple]:
        """Stop the sender; returns the records it did not send."""
        with self.cv:
            self.closed = True
            left = list(self.ops)
            self.ops.clear()
            self.cv.notify_all()
        return left

    def _run(self) -> None:
        t = self.tracker
        while True:
            with self.cv:
                self.cv.wait_for(lambda: self.ops or self.closed)
                if self.closed or not self.ops:
                    return
                op = self.ops[0]
            try:
                t._send(op)
            except Exception as exc:  # noqa: BLE001 - the server's failure must not reach training
                if not server_away(exc):
                    log.warning("MLflow refused a record (%s) of run %s: %s", op[0], op[1], reason(exc))
                    self._done(op)
                    continue
                if self.away_since is None:
                    self.away_since = time.time()
                    say(f"MLflow: the tracking server at {t.uri} does not answer ({reason(exc)}); "
                         f"training goes on, and its records are kept here and sent when the server is back")
                t._marks.pop(op[1], None)      # what reached the store before the answer was lost
                with self.cv:
                    self.cv.wait_for(lambda: self.closed, timeout=t.retry_s)
                continue
            if self.away_since is not None:
                values = sum(len(o[2]) for o in [op, *list(self.ops)[1:]] if o[0] == "metrics")
                say(f"MLflow: the tracking server at {t.uri} answers again after "
                     f"{time.time() - self.away_since:.0f} s; sending the {values} metric values kept meanwhile")
                self.away_since = None
            self._done(op)

    def _done(self, op: tuple) -> None:
        with self.cv:
            if self.ops and self.ops[0] is op:
                self.ops.popleft()
            self.cv.notify_all()
