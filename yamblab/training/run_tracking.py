"""The MLflow run of one training run: found again on resume, sent what it lacks, given each
iteration's metrics, and closed with the run's files and network. The training loop is its
only writer."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from yamblab.training.config import RunConfig


def numbers(metrics: dict) -> dict:
    """The numeric entries of a metrics dict (what MLflow takes)."""
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


class RunTracking:
    """One training run's MLflow run.

    Args:
        tracker: a :class:`~yamblab.training.tracking.Tracker`, or None (nothing is logged).
        cfg: the run config (its name, params and tags).
        run_dir: the run's folder (the run is tagged with it, so a driver killed before its
            first checkpoint finds its run again).
        run_id: the run a checkpoint names (None: found by folder, or new).
        parent_run_id, tags: the MLflow run this one is a child of (a branched sweep's base),
            and further tags.
    """

    def __init__(self, tracker, cfg: RunConfig, run_dir: Path, run_id: str | None = None,
                 parent_run_id: str | None = None, tags: dict | None = None):
        self.tracker, self.cfg, self.run_dir, self.run_id = tracker, cfg, run_dir, run_id
        self._parent_run_id, self._tags = parent_run_id, dict(tags or {})

    def open(self, history: list[dict], tags: dict) -> None:
        """The run's MLflow run: the one its checkpoint names, else the unfinished one tagged with
        its folder, else a new one (tagged with ``tags`` besides the config's). Either gets what
        it lacks of ``history`` (the tracker sends only the steps the store does not have)."""
        from yamblab.training.tracking import code_version

        if self.tracker is None:
            return
        where = str(self.run_dir.absolute())
        if not self.run_id:
            self.run_id = self.tracker.find_run({"yamblab.run_dir": where})
        if self.run_id:
            try:
                self.tracker.client.get_run(self.run_id)
            except Exception:  # noqa: BLE001 - a lost run gets a new one
                self.run_id = None
            else:
                self.tracker.reopen(self.run_id)
                self.log_history(history)
                return
        self.run_id = self.tracker.start_run(
            self.cfg.name, params=self.cfg.model_dump(mode="json"),
            tags={"yamblab.kind": "train", "yamblab.code_version": code_version(),
                  "yamblab.rules_hash": self.cfg.rules_obj.digest, "yamblab.preset": self.cfg.preset,
                  "yamblab.run_dir": where, **tags, **self._tags},
            parent_run_id=self._parent_run_id)
        self.tracker.log_text(self.run_id, self.cfg.to_yaml(), "config.yaml")
        self.log_history(history)

    def log_history(self, history: list[dict]) -> None:
        """Log a history's metrics as the loop does (what the store has already is not sent
        again)."""
        for h in history:
            self.log(numbers(h), int(h["iteration"]))

    def log(self, metrics: dict, step: int) -> None:
        """Log an iteration's metrics at ``step``: its training figures, then its evaluation's
        (``eval.*``) if it has one."""
        if self.tracker is None:
            return
        train = {k: v for k, v in metrics.items() if not k.startswith("eval.")}
        evals = {k: v for k, v in metrics.items() if k.startswith("eval.")}
        for part in (train, evals):
            if part:
                self.tracker.log_metrics(self.run_id, part, step=step)

    def close(self, files: list[str], end_figures: dict, step: int, network: Callable, keep: str) -> None:
        """Log the run's ``files`` (but ``keep``, the resumable checkpoint, which stays in the run
        folder), its end figures at ``step`` and the network ``network()`` gives, and end the
        run."""
        if self.tracker is None:
            return
        for f in files:
            if Path(f).name != keep:
                self.tracker.log_artifact(self.run_id, f)
        if end_figures:
            self.tracker.log_metrics(self.run_id, end_figures, step=step)
        self.tracker.log_torch_model(self.run_id, network())
        self.tracker.end_run(self.run_id)

    def kill(self) -> None:
        """Mark the run KILLED (Ctrl-C while it was being made: the caller never got the run)."""
        if self.tracker is not None and self.run_id:
            self.tracker.end_run(self.run_id, "KILLED")
