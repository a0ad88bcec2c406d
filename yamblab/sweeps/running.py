"""Running a sweep's trials on Ray, ``parallel`` at a time: each trial a
:class:`~yamblab.sweeps.trial.TrialRunner` actor in its own placement group, driven an
iteration at a time; its metrics logged to its MLflow run (by the same
:class:`~yamblab.training.run_tracking.RunTracking` path as ``yamblab train``), reported to Optuna
(pruning a tuning trial), and a trial that lost its node started again from its checkpoint."""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yamblab.sweeps.trial import TrialRunner
from yamblab.sweeps.trials import TrialResult, rounded

log = logging.getLogger(__name__)

#: attempts a trial gets when its node (or one of its actors) is lost; each attempt after the
#: first resumes from the trial's last checkpoint
MAX_ATTEMPTS = 3


def lost(exc: BaseException) -> bool:
    """Whether a trial's failure is the cluster's (a node, a worker process or an object was
    lost) rather than the trial's own (an exception raised by its code)."""
    import ray.exceptions as rx

    kinds = tuple(k for k in (getattr(rx, n, None) for n in (
        "RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
        "ObjectFetchTimedOutError", "ActorPlacementGroupRemoved", "LocalRayletDiedError",
        "ActorUnschedulableError", "RaySystemError")) if isinstance(k, type))
    if isinstance(exc, rx.RayTaskError):
        cause = getattr(exc, "cause", None)
        return isinstance(cause, kinds)
    return isinstance(exc, kinds)


@dataclass
class Slot:
    """One trial to run (or to carry on) and its state while it runs.

    Attributes:
        key: ``ARM/seedN`` (grid) or ``trialN`` (tpe); params: the Optuna parameters to enqueue
            (``{}``: let the sampler choose); why: ``new``, ``changed`` (the arm's config changed
            since it ran), ``interrupted`` (its driver was killed) or ``failed``.
        run_dir, run_id: the checkpoint folder and MLflow child run of an earlier attempt.
        it, logged: the trial's iteration, and the last one logged to MLflow (each once).
        offset: a branched trial's first iteration (its base's).
    """

    key: str
    params: dict
    why: str = "new"
    run_dir: str | None = None
    run_id: str | None = None
    trial: Any = None
    cfg: Any = None
    name: str = ""
    tracking: Any = None
    actor: Any = None
    pg: Any = None
    it: int = 0
    logged: int = 0
    attempts: int = 0
    nodes: list = field(default_factory=list)
    last: dict = field(default_factory=dict)
    done: bool = False
    minutes: float = 0.0
    offset: int = 0
    counted: int = 0

    def budget(self) -> float | None:
        """The trial's time budget in minutes (``runtime.time_budget_minutes``), or None."""
        return self.cfg.runtime.time_budget_minutes if self.cfg is not None else None


@dataclass
class Plan:
    """What a (re)started sweep will do: trials kept, trials to run, arms left out."""

    kept: list[str] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    fresh_start: bool = True

    def describe(self, name: str) -> str:
        """The plan in words (printed when a sweep starts, and logged to its parent run)."""
        if self.fresh_start and not self.kept and not self.dropped and all(s.why == "new" for s in self.slots):
            return f"sweep {name}: {len(self.slots)} trials to run"
        lines = [f"sweep {name}: resuming: {len(self.kept)} finished trials kept, {len(self.slots)} to run"]
        by = {}
        for s in self.slots:
            by.setdefault(s.why, []).append(s.key)
        words = {"interrupted": "interrupted (carried on from their checkpoints)",
                 "changed": "changed since they ran (run again)", "new": "new (not run before)",
                 "failed": "failed before (run again, from a checkpoint if they left one)"}
        for why in ("interrupted", "changed", "new", "failed"):
            if by.get(why):
                lines.append(f"  {words[why]}: {', '.join(by[why])}")
        if self.kept:
            lines.append(f"  unchanged, kept: {', '.join(self.kept)}")
        if self.dropped:
            lines.append(f"  no longer in the spec (kept in the study, left out of the table): "
                         f"{', '.join(self.dropped)}")
        return "\n".join(lines)


class _Bar:
    """The sweep's progress bar: trials on a time budget move it by their minutes (trial-minutes
    of budget), the others by iterations (a branched trial's since its branch point)."""

    def __init__(self, sweep, n: int):
        rt = sweep.base.runtime
        self.iters, self.budget = rt.iterations, rt.time_budget_minutes
        self.timed = self.budget is not None
        self.bar = None
        if sweep.progress and n:
            from tqdm.auto import tqdm

            name = f"sweep {sweep.spec.name}"
            self.bar = tqdm(total=n * self.budget, desc=name, unit="trial-min", bar_format=(
                "{l_bar}{bar}| {n:.1f}/{total:.1f} trial-min of time budget [{elapsed} elapsed]")) if self.timed \
                else tqdm(total=n * self.iters, desc=name, unit="iterations")

    def advance(self, slot: Slot, metrics: dict | None = None, to_end: bool = False) -> None:
        if self.bar is None:
            return
        if not self.timed:
            now = self.iters if to_end else min(self.iters, max(0, slot.it - slot.offset))
            if now > slot.counted:
                self.bar.update(now - slot.counted)
                slot.counted = now
            return
        budget = slot.budget() or self.budget     # an arm may set its own budget
        now = budget if to_end else min(budget, float((metrics or {}).get("minutes", slot.minutes)))
        if now > slot.minutes:
            self.bar.update(now - slot.minutes)
            slot.minutes = now

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class TrialLoop:
    """Runs ``slots`` of ``sweep`` to the end; each answer of a trial actor goes to the handler
    that asked for it (:meth:`_on_info`, :meth:`_on_iteration`, :meth:`_on_finish`).

    Args:
        sweep: the :class:`~yamblab.sweeps.driver.Sweep` (its spec, tracker, and how a trial is
            opened: :meth:`~yamblab.sweeps.driver.Sweep.open_trial`).
        study, parent: the Optuna study and the sweep's parent MLflow run.
    """

    def __init__(self, sweep, study, parent: str, slots: list[Slot]):
        self.sweep, self.study, self.parent = sweep, study, parent
        self.tpe = sweep.spec.kind == "tpe"
        self.queue = list(slots)
        self.active: dict[Any, tuple[Slot, Any]] = {}
        self.bar = _Bar(sweep, len(self.queue))

    def run(self) -> None:
        import ray

        while self.queue and len(self.active) < self.sweep.spec.parallel:
            self._launch(self.queue.pop(0))
        while self.active:
            ready = []
            while not ready:      # a second at a time: Ctrl-C and SIGTERM are handled between waits
                ready, _ = ray.wait(list(self.active), num_returns=1, timeout=1.0)
            slot, handle = self.active.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - one failed trial must not stop the sweep
                self._on_failure(slot, exc)
                continue
            handle(slot, out)
        self.bar.close()

    # -- starting and stopping trial actors
    def _launch(self, slot: Slot) -> None:
        self.sweep.open_trial(self.study, self.parent, slot)
        self._start(slot)

    def _start(self, slot: Slot) -> None:
        """Start the slot's trial actor in a fresh placement group, asking where it runs."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from yamblab.actors.cluster import cluster_has_gpu
        from yamblab.training.placement import trial_bundles

        Actor = ray.remote(num_cpus=0, max_restarts=0)(TrialRunner)
        bundles, strategy = trial_bundles(slot.cfg.runtime, self.sweep.spec.trial_cpus, cluster_has_gpu())
        slot.pg = placement_group(bundles, strategy=strategy)
        slot.actor = Actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            slot.pg, placement_group_capture_child_tasks=True)).remote(
            slot.cfg, slot.run_dir, self.sweep.spec.trial_cpus, True)
        slot.attempts += 1
        self.active[slot.actor.info.remote()] = (slot, self._on_info)

    def _next(self, slot: Slot) -> None:
        if slot.it < slot.cfg.runtime.iterations and not slot.done:
            self.active[slot.actor.iteration.remote()] = (slot, self._on_iteration)
        else:
            self.active[slot.actor.finish.remote()] = (slot, self._on_finish)

    def _close(self, slot: Slot) -> None:
        release(slot)
        if self.queue:
            self._launch(self.queue.pop(0))

    # -- what the trial actors answer
    def _on_failure(self, slot: Slot, exc: BaseException) -> None:
        import optuna

        say = self.sweep.say
        if lost(exc) and slot.attempts < MAX_ATTEMPTS:
            say(f"trial {slot.name}: lost its node or an actor ({type(exc).__name__}) at iteration {slot.it}; "
                f"starting it again from its last checkpoint (attempt {slot.attempts + 1} of {MAX_ATTEMPTS})")
            release(slot)
            self._start(slot)
            return
        log.error("trial %s failed: %s", slot.name, exc)
        say(f"trial {slot.name} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        self.study.tell(slot.trial, state=optuna.trial.TrialState.FAIL)
        self.sweep.tracker.end_run(slot.run_id, "FAILED")
        self._close(slot)

    def _on_info(self, slot: Slot, out: dict) -> None:
        """Where the trial runs and what its checkpoint holds: the iterations MLflow lacks are
        logged (a trial carried on from a checkpoint)."""
        slot.it, slot.done = int(out["iteration"]), bool(out.get("done", False))
        slot.nodes.append(out["node_id"])
        tags = {"yamblab.node": out["node_id"], "yamblab.host": out["host"], "yamblab.attempts": slot.attempts,
                "yamblab.nodes": ",".join(n[:12] for n in slot.nodes)}
        if out["resumed_from"] is not None:
            tags["yamblab.resumed_from_iteration"] = out["resumed_from"]
            if slot.attempts > 1 or slot.why != "new":
                self.sweep.say(f"trial {slot.name}: resumed from its checkpoint at iteration {out['resumed_from']}")
        self.sweep.tracker.set_tags(slot.run_id, tags)
        if slot.attempts == 1 and not self.bar.timed:
            self.bar.advance(slot)
        if out["history"] and not slot.last:
            slot.last = dict(out["history"][-1])      # logged by an earlier attempt or driver
        for m in out["history"]:
            self._log_iteration(slot, m)
            if slot.attempts == 1:     # a carried-on trial's new Optuna trial hears its evaluations
                self._report(slot, m.get("eval.regret_mean"), int(m["iteration"]))
        self._next(slot)

    def _on_iteration(self, slot: Slot, out: dict) -> None:
        import optuna

        slot.it = int(out.get("iteration", slot.it + 1))
        slot.done = bool(out.pop("done", False))
        self._log_late(slot, out.pop("late_evals", None) or [])
        self._log_iteration(slot, out)
        if self._report(slot, out.get("eval.regret_mean"), slot.it) and slot.trial.should_prune():
            self.study.tell(slot.trial, state=optuna.trial.TrialState.PRUNED)
            self.sweep.tracker.set_tags(slot.run_id, {"yamblab.pruned": "true"})
            self.sweep.tracker.end_run(slot.run_id, "KILLED")
            self.bar.advance(slot, to_end=True)
            self._close(slot)
            return
        self._next(slot)

    def _on_finish(self, slot: Slot, result: TrialResult) -> None:
        """The trial's result: its files, network and end figures to MLflow, its per-game losses
        to Optuna (where the table reads them)."""
        tracker, trial = self.sweep.tracker, slot.trial
        self._log_late(slot, result.late_evals)
        # only what the last iteration's record lacks (a final evaluation), never a value twice
        extra = {k: v for k, v in result.metrics.items() if k not in slot.last}
        if extra:
            slot.tracking.log(extra, slot.it)
        with tempfile.TemporaryDirectory(prefix="yamblab-trial-") as tmp:
            for path in result.write_files(Path(tmp)):
                tracker.log_artifact(slot.run_id, path)
        if result.network:       # the resumable checkpoint stays in runs/
            from yamblab.model.checkpoint import network_from_state

            tracker.log_torch_model(slot.run_id, network_from_state(result.network))
        main = slot.cfg.eval_depth
        by_mode = result.by_mode(main)
        attrs = {"per_game_regret": rounded(result.per_game_regret), "eval_mode": main, "per_game_regret_modes": by_mode, "loss": result.loss,
                 "attempts": slot.attempts}
        if reached := result.reached():
            attrs["summary"] = reached
        for k, v in attrs.items():
            trial.set_user_attr(k, v)
        self.study.tell(trial, float(np.mean(result.per_game_regret)))
        tracker.end_run(slot.run_id)
        if self.bar.timed:
            self.bar.advance(slot, to_end=True)
        self._close(slot)

    # -- metrics
    def _log_iteration(self, slot: Slot, metrics: dict) -> None:
        """Log an iteration's metrics once, whatever the attempts (a branch point: its
        evaluation alone, not a training step)."""
        step = int(metrics.get("iteration", slot.it))
        if metrics.get("branch_point"):
            metrics = {k: v for k, v in metrics.items() if k.startswith("eval.")}
        if step > slot.logged:
            slot.tracking.log(metrics, step)
            slot.logged, slot.last, slot.it = step, dict(metrics), max(slot.it, step)
            self.bar.advance(slot, metrics)

    def _log_late(self, slot: Slot, evals: list[dict]) -> None:
        """Log evaluations that finished after their iteration, at their iteration."""
        for ev in evals:
            step = int(ev["eval.iteration"])
            slot.tracking.log(ev, step)
            self._report(slot, ev.get("eval.regret_mean"), step)

    def _report(self, slot: Slot, value, step: int) -> bool:
        """Tell a tuning trial's Optuna trial its regret at ``step``; whether it was told."""
        if not self.tpe or value is None or not math.isfinite(value):
            return False
        slot.trial.report(float(value), step)
        return True


def release(slot: Slot) -> None:
    """Kill the slot's trial actor and free its placement group (either may be gone already)."""
    import ray
    from ray.util.placement_group import remove_placement_group

    if slot.actor is not None:
        try:
            ray.kill(slot.actor)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass
    if slot.pg is not None:
        try:
            remove_placement_group(slot.pg)
        except Exception:  # noqa: BLE001
            pass
    slot.actor = slot.pg = None
