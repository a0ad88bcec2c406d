"""Evaluations beside the training loop: when one is due, starting it on the evaluator while the
loop goes on, and recording it at the iteration whose weights it graded once it finishes."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from yamblab.training.config import RunConfig


class Evaluations:
    """The evaluations of one run: those recorded (:attr:`done`, kept in its checkpoint) and
    those still running on the evaluator.

    Args:
        cfg: the run config (``runtime.eval_every``/``eval_early`` say when one is due,
            ``runtime.snapshots`` whether the graded weights are kept).
        backend: the run's roles (:class:`~yamblab.training.backends.Backend`).
        run_dir: the run's folder (snapshots go under it).
        done: evaluations recorded before (a resumed run's).
        record: called with ``(iteration, metrics)`` when an evaluation finishes.
    """

    def __init__(self, cfg: RunConfig, backend, run_dir: Path, done: list[dict],
                 record: Callable[[int, dict], None]):
        self.cfg, self.backend, self.run_dir, self.done, self._record = cfg, backend, run_dir, done, record
        self.pending: list[dict] = []
        self.owed: str | None = None    # an evaluation due while the evaluator was busy: its kind

    def after_iteration(self, iteration: int, since: int, where: dict) -> None:
        """Start the evaluation due after ``iteration`` (counted from ``since``, a branch point)
        or one owed; one at a time: while the evaluator is still busy, a due evaluation waits for
        the first iteration after it finishes, so they never queue up behind a slow evaluator.
        The serial loop (``max_policy_lag: 0``) then waits for it, so the iteration's metrics
        carry it."""
        rt = self.cfg.runtime
        due = rt.evaluation_due(iteration, since=since)
        if due is not None and self.owed != "full":
            self.owed = due
        if self.owed:
            self.poll(block=False)
            if not self.pending or iteration >= rt.iterations:
                self.start(where, whole=self.owed == "full")
                self.owed = None
        self.poll(block=rt.max_policy_lag == 0)

    def start(self, where: dict, whole: bool = True) -> None:
        """Start an evaluation of the current weights: ``whole`` grades every mode, else the
        main mode and the exact regret only (``runtime.eval_early``'s evaluations). ``where``
        says where the run stands (``iteration``, ``minutes``, ``positions``, ``steps``,
        ``samples``, ``games_played``)."""
        last = self.pending[-1] if self.pending else None
        if last and last["iteration"] == where["iteration"] and (last["whole"] or not whole):
            return
        version, weights = self.backend.weights()
        if self.cfg.runtime.snapshots:
            self._snapshot(weights, where)
        self.pending.append({"ref": self.backend.start_evaluation(version, weights, whole), "whole": whole, **where})

    def finish_on(self, iteration: int, where: dict) -> None:
        """End the run on a whole evaluation of its last weights (an early one of the same
        iteration lacks the other modes the summary reports), every evaluation waited for."""
        if iteration > 0 and not any(e["iteration"] == iteration and e.get("whole", True) for e in self.done):
            self.start(where)
        self.poll(block=True)

    def _snapshot(self, weights, where: dict) -> Path:
        """Keep the weights an evaluation grades as ``RUN/snapshots/iteration-NNNNNN.pt``
        (``runtime.snapshots``): the network (as ``ema`` and ``model``, for
        :func:`~yamblab.model.checkpoint.load_network`), its config and where the run stood."""
        from yamblab.actors.actors import weights_state
        from yamblab.model.checkpoint import save_checkpoint

        state = weights_state(weights)
        it = where["iteration"]
        payload = {"model_config": self.cfg.model.model_dump(), "ema": state, "model": state,
                   "iteration": it, "minutes": where["minutes"],
                   "positions_total": where["positions"], "config": self.cfg.to_yaml()}
        return save_checkpoint(self.run_dir / "snapshots" / f"iteration-{it:06d}.pt", payload)

    def poll(self, block: bool) -> list[dict]:
        """Record the evaluations that finished (all of them with ``block``); returns their
        metrics."""
        out = []
        while self.pending:
            head = self.pending[0]
            if not block and not self.backend.ready(head["ref"]):
                break
            ev = self.backend.get(head["ref"])
            self.pending.pop(0)
            ev["metrics"].update({
                "eval.iteration": head["iteration"], "eval.minutes": head["minutes"],
                "eval.selfplay_positions": head["positions"], "eval.optimiser_steps": head["steps"],
                "eval.samples_trained": head["samples"], "eval.games_played": head["games_played"]})
            self.done.append(_evaluation_record(head, ev))
            self._record(head["iteration"], ev["metrics"])
            out.append(ev["metrics"])
        return out


def _evaluation_record(head: dict, ev: dict) -> dict:
    """What the checkpoint keeps of an evaluation: where the run stood, its per-game figures
    and its breakdowns."""
    def regrets(v):
        return np.round(v, 6).tolist()

    return {"iteration": head["iteration"], "whole": head["whole"], "minutes": head["minutes"],
            "positions": head["positions"], "steps": head["steps"], "samples": head["samples"],
            "per_game_regret": regrets(ev["per_game_regret"]), "scores": ev["scores"].tolist(),
            "by_box": ev["by_box"], "by_decision": ev["by_decision"], "loss": ev["loss"], "mode": ev.get("mode"),
            "modes": {k: {"per_game_regret": regrets(v["per_game_regret"]), "loss": v["loss"]}
                      for k, v in ev.get("modes", {}).items()}}
