"""Ablation sweeps and tuning studies: Optuna decides, Ray runs, MLflow records.

A sweep is an Optuna study whose trials are training runs:

* an **ablation grid**: named arms (or a product of factors) × seeds, every arm evaluated on the
  same evaluation dice, so arms compare on equal luck;
* a **tuning study**: TPE over ranges (learning rate, temperature, noise fraction …) with median
  pruning on the evaluator's regret.

Trials run in parallel as Ray actors, each within its declared CPUs. The driver is the only
writer: it reports to Optuna (a journal file locally, PostgreSQL on a cluster) and to MLflow (a
parent run per sweep, a child run per trial). An interrupted sweep resumes without rerunning
finished trials: trials are identified by arm, training seed and a digest of their config, so an
edited spec keeps its unchanged arms and runs its changed and new ones, and a trial left half
done (a killed driver, a dead node) carries on from its checkpoint in the same MLflow run. The
result is a table of each arm's mean regret per game with a 95% CI and its paired difference
from the baseline arm on the same evaluation games, logged with a comparison plot to the
parent run.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yamblab.errors import ConfigError
from yamblab.sweeps.branch import config_digest
from yamblab.sweeps.report import _grid_key, format_run_summaries, format_table, log_aggregates, log_curves
from yamblab.sweeps.spec import SweepConfig
from yamblab.sweeps.stats import ArmResult, _safe, summarise
from yamblab.sweeps.trial import TrialRunner
from yamblab.training.config import RunConfig, apply_overrides
from yamblab.training.tracking import Tracker, code_version

log = logging.getLogger(__name__)


#: attempts a trial gets when its node (or one of its actors) is lost; each attempt after the
#: first resumes from the trial's last checkpoint
MAX_ATTEMPTS = 3


def _lost(exc: BaseException) -> bool:
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
    """

    key: str
    params: dict
    why: str = "new"
    run_dir: str | None = None
    run_id: str | None = None
    trial: Any = None
    cfg: Any = None
    name: str = ""
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


class Sweep:
    """Run (or resume) the sweep described by a validated :class:`SweepConfig`.

    Resuming is by content: a grid trial is identified by its arm, its training seed and the
    digest of its whole config (:func:`config_digest`), so after an edit of the spec the
    unchanged arms are kept, changed and new arms run, arms no longer in the spec leave the
    table, and trials interrupted by a killed driver carry on from their checkpoints (in the same
    MLflow run). Within a run, a trial whose node dies is started again elsewhere and resumes
    from its last checkpoint (up to :data:`MAX_ATTEMPTS` attempts); its MLflow run and Optuna
    trial stay the same, and no iteration is logged twice.

    Args:
        spec: the sweep.
        base: the run config every trial starts from.
        tracking_uri: MLflow store (default: the spec's, else SQLite in the working directory).
        ray_address: an existing Ray cluster, else a local one is started.
        progress: show a progress bar and say what a resumed sweep keeps and runs (on stderr).

    Raises:
        ConfigError: an arm judged on a decision mode its trials or the baseline's do not grade
            (see :meth:`SweepConfig.judge_modes`).
    """

    def __init__(self, spec: SweepConfig, base: RunConfig, tracking_uri: str | None = None,
                 ray_address: str | None = None, progress: bool = True):
        #: arm -> the decision mode it is judged on (checked against the trials' configs first)
        self.judge = spec.judge_modes(base)
        self.spec = spec
        self.base = base
        #: a branched sweep's base: its run config (None for a checkpoint), its identity (a
        #: digest every trial's digest includes), and once trained its checkpoint and iteration
        self.base_cfg: RunConfig | None = None
        self.branch_id: str | None = None
        self.base_checkpoint: Path | None = None
        self.base_iteration = 0
        self._base_state: dict | None = None     # the base checkpoint, loaded once
        if spec.branch_from is not None:
            from yamblab.sweeps import branch

            b = spec.branch_from
            if b.checkpoint is not None:
                self._base_state, stored = branch.load_base(b.checkpoint)
                branch.check_branchable(spec, base, stored)
                self.branch_id = branch.file_digest(b.checkpoint)
            else:
                self.base_cfg = branch.base_config(spec, base)
                branch.check_branchable(spec, base, self.base_cfg)
                self.branch_id = config_digest(self.base_cfg)
        self.tracker = Tracker(tracking_uri or spec.tracking_uri, spec.experiment)
        self.ray_address = ray_address
        self.progress = progress
        self.messages: list[str] = []
        self.plan_text = ""

    def _say(self, msg: str) -> None:
        self.messages.append(msg)
        if self.progress:
            import sys

            print(msg, file=sys.stderr, flush=True)
        else:
            log.info(msg)

    # -- optuna
    def _study(self):
        import optuna

        storage = self.spec.storage_url()
        if isinstance(storage, str) and storage.startswith("journal:"):
            from yamblab.sweeps.journal import journal_storage

            storage = journal_storage(storage[len("journal:"):])   # a damaged journal is refused by name
        else:   # a database: parallel writers, connections checked before use
            try:
                storage = optuna.storages.RDBStorage(storage, engine_kwargs={"pool_pre_ping": True})
            except Exception as exc:  # noqa: BLE001 - a wrong URL or an unreachable server is the user's to fix
                from yamblab.errors import YamblabError

                msg = " ".join(str(exc).split())[:300]
                raise YamblabError(f"cannot open the Optuna storage {self.spec.storage}: {msg}") from None
        if self.spec.kind == "tpe":
            sampler = optuna.samplers.TPESampler(seed=self.spec.sampler_seed)
            pruner = (optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
                      if self.spec.pruning else optuna.pruners.NopPruner())
        else:
            sampler = optuna.samplers.RandomSampler(seed=0)  # every grid trial is enqueued
            pruner = optuna.pruners.NopPruner()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        return optuna.create_study(study_name=self.spec.name, storage=storage, sampler=sampler,
                                   pruner=pruner, direction="minimize", load_if_exists=True)

    def _parent_run(self, study) -> str:
        tags = {"yamblab.kind": "sweep", "yamblab.code_version": code_version(),
                "yamblab.sweep": self.spec.name, "yamblab.rules_hash": self.base.rules_obj.digest,
                "yamblab.training_seeds": ",".join(str(s) for s in self.spec.seeds)
                if self.spec.kind == "grid" else f"base {self.base.train.seed}",
                "yamblab.evaluation_seed": self.base.runtime.eval_seed,
                "yamblab.evaluation_games": self.base.runtime.eval_games}
        # a driver killed between creating the parent run and writing its id left it unfinished
        rid = study.user_attrs.get("mlflow_parent_run_id") or self.tracker.find_run(
            {"yamblab.kind": "sweep", "yamblab.sweep": self.spec.name})
        if rid:
            try:
                self.tracker.client.get_run(rid)
                self.tracker.client.update_run(rid, status="RUNNING")
                self.tracker.set_tags(rid, tags)
                study.set_user_attr("mlflow_parent_run_id", rid)
                return rid
            except Exception:  # noqa: BLE001 - a store that lost the run gets a new parent
                pass
        rid = self.tracker.start_run(f"sweep:{self.spec.name}", params={"sweep": self.spec.model_dump(mode="json")},
                                     tags=tags)
        study.set_user_attr("mlflow_parent_run_id", rid)
        return rid

    def _digest(self, cfg: RunConfig) -> str:
        """A trial's identity: its config's digest, and in a branched sweep its base's too."""
        d = config_digest(cfg)
        if self.branch_id is None:
            return d
        import hashlib

        return hashlib.sha256(f"{d}:{self.branch_id}".encode()).hexdigest()[:12]

    def _want(self) -> dict[tuple[str, int], tuple[RunConfig, str]]:
        """(arm, seed) -> (its config, its digest), for every trial of a grid spec."""
        out = {}
        for arm, ov in self.spec.arm_overrides().items():
            for seed in self.spec.seeds:
                cfg = apply_overrides(self.base, {**self.spec.overrides, **ov, "train.seed": seed},
                                      source=f"sweep {self.spec.name}")
                out[(arm, seed)] = (cfg, self._digest(cfg))
        return out

    def plan(self, study) -> Plan:
        """What to run: trials left running by a killed driver are failed (and carried on from
        their checkpoints); a grid keeps every finished (arm, seed) whose config is unchanged."""
        import optuna

        TS = optuna.trial.TrialState
        trials = list(study.trials)
        plan = Plan(fresh_start=not trials)
        interrupted = set()
        for t in trials:  # trials left running by an interrupted driver are failed, then carried on
            if t.state == TS.RUNNING:
                study.tell(t.number, state=TS.FAIL)
                interrupted.add(t.number)
        if self.spec.kind == "grid":
            want = self._want()
            done, stale, carry = {}, set(), {}
            for t in sorted(trials, key=lambda t: t.number):
                key = _grid_key(t)
                d = t.user_attrs.get("config_digest")
                ok = key in want and (d is None or d == want[key][1])
                if t.state == TS.COMPLETE:
                    if ok:
                        done[key] = t
                    elif key in want:
                        stale.add(key)
                    elif key[0] not in self.spec.arm_overrides() and key[0] not in plan.dropped:
                        plan.dropped.append(str(key[0]))
                elif ok:   # failed or interrupted with this very config: carry on its run
                    carry[key] = (t, t.number in interrupted)
            for (arm, seed), (cfg, digest) in want.items():
                key = f"{arm}/seed{seed}"
                if (arm, seed) in done:
                    plan.kept.append(key)
                    continue
                why, run_id = "new", None
                if (arm, seed) in carry:
                    t, was_running = carry[(arm, seed)]
                    why = "interrupted" if was_running else "failed"
                    run_id = t.user_attrs.get("mlflow_run_id")
                elif (arm, seed) in stale:
                    why = "changed"
                plan.slots.append(Slot(key, {"arm": arm, "seed": seed}, why=why, run_id=run_id))
        else:
            n_done = sum(t.state in (TS.COMPLETE, TS.PRUNED) for t in trials)
            plan.kept = [f"trial{t.number}" for t in trials if t.state in (TS.COMPLETE, TS.PRUNED)]
            for t in trials:
                if t.number in interrupted and len(plan.slots) < self.spec.n_trials - n_done:
                    plan.slots.append(Slot(f"trial{t.number}", dict(t.params), why="interrupted",
                                           run_dir=t.user_attrs.get("run_dir"),
                                           run_id=t.user_attrs.get("mlflow_run_id")))
            while len(plan.slots) < self.spec.n_trials - n_done:
                plan.slots.append(Slot(f"new{len(plan.slots)}", {}))
        return plan

    def _pending(self, study) -> list[dict]:
        """Trial parameter sets still to run (see :meth:`plan`)."""
        return [s.params for s in self.plan(study).slots]

    def _trial_config(self, trial, params: dict) -> tuple[RunConfig, str]:
        if self.spec.kind == "grid":
            # the arm and seed are the trial's user attributes, not Optuna parameters: an edited
            # spec changes the list of arms, and a parameter's choices may not change in a study
            arms = self.spec.arm_overrides()
            arm, seed = params["arm"], params["seed"]
            trial.set_user_attr("arm", arm)
            trial.set_user_attr("seed", seed)
            overrides = {**self.spec.overrides, **arms[arm], "train.seed": seed}
            name = f"{arm}/seed{seed}"
        else:
            overrides = dict(self.spec.overrides)
            for key, rng in self.spec.params.items():
                if rng.choices is not None:
                    overrides[key] = trial.suggest_categorical(key, rng.choices)
                elif rng.integer:
                    overrides[key] = trial.suggest_int(key, int(rng.low), int(rng.high), log=rng.log)
                else:
                    overrides[key] = trial.suggest_float(key, rng.low, rng.high, log=rng.log)
            name = f"trial{trial.number}"
        cfg = apply_overrides(self.base, overrides, source=f"sweep {self.spec.name}")
        return cfg, name

    def run(self) -> list[dict]:
        """Run every pending trial and return the result table rows.

        Raises:
            DamagedFileError: a damaged Optuna journal (:mod:`yamblab.sweeps.journal`), refused
                before anything is written to it.
            DiskFullError: the driver's write to the journal or to MLflow found no space left
                (a journal record is never left cut short).
        """
        import ray

        study = self._study()
        parent = self._parent_run(study)
        plan = self.plan(study)
        self.plan_text = plan.describe(self.spec.name)
        self._say(self.plan_text)
        self._end_finished_runs(study)
        if not plan.fresh_start:
            n = int(study.user_attrs.get("resumes", 0)) + 1
            study.set_user_attr("resumes", n)
            self.tracker.log_text(parent, self.plan_text, f"resumes/resume-{n}.txt")
            self.tracker.log_text(parent, self.spec.model_dump_json(indent=2), f"resumes/spec-{n}.json")
        started_ray = False
        if plan.slots:
            if not ray.is_initialized():
                from yamblab.actors.cluster import init_ray

                init_ray(self.ray_address)
                started_ray = True
        try:
            if plan.slots:
                self._check_gpus()
            if plan.slots and self.spec.branch_from is not None:
                self._ensure_base(parent)
            self._run_trials(study, parent, plan.slots)
        finally:
            if started_ray:
                ray.shutdown()
        rows = self._results(study, parent)
        #: the sweep's parent MLflow run: its table and plots are its artifacts
        self.parent_run_id = parent
        self.tracker.close()
        return rows

    def mark_stopped(self) -> None:
        """After Ctrl-C or SIGTERM: the sweep's parent run and its unfinished trials' runs are
        marked KILLED in MLflow (rerunning the sweep opens them again). Best effort: the store
        may be what stopped it."""
        try:
            for run_id, status in self.tracker.unfinished_runs({"yamblab.sweep": self.spec.name}):
                if status == "RUNNING":
                    self.tracker.end_run(run_id, "KILLED")
        except Exception:  # noqa: BLE001 - the stop is said whatever MLflow answers
            pass

    def _check_gpus(self) -> None:
        """Refuse, before any base or trial starts, an arm whose trials ask for more GPUs than the
        cluster has (a placement group that can never be placed would wait for ever).

        Raises:
            ConfigError: naming the arm, its GPUs and the cluster's.
        """
        import ray

        from yamblab.actors.cluster import cluster_has_gpu
        from yamblab.training.placement import trial_bundles

        have, gpu = ray.cluster_resources().get("GPU", 0.0), cluster_has_gpu()
        arms = self.spec.arm_overrides() if self.spec.kind == "grid" else {"(every trial)": {}}
        for arm, over in arms.items():
            cfg = apply_overrides(self.base, {**self.spec.overrides, **over})
            need = sum(b.get("GPU", 0.0) for b in trial_bundles(cfg.runtime, self.spec.trial_cpus, gpu)[0])
            if need > have + 1e-9:
                raise ConfigError(f"arm {arm}: a trial asks Ray for {need:g} GPU(s) (runtime.learner_gpus "
                                  f"{cfg.runtime.learner_gpus}) but the cluster has {have:g}; set runtime.learner_gpus: "
                                  "0 or 'auto'")

    def _end_finished_runs(self, study) -> None:
        """End the MLflow runs of finished trials that a driver killed between telling Optuna and
        ending the run left running (their records were all logged before)."""
        import optuna

        TS = optuna.trial.TrialState
        end = {t.user_attrs.get("mlflow_run_id"): "FINISHED" if t.state == TS.COMPLETE else "KILLED"
               for t in study.trials if t.state in (TS.COMPLETE, TS.PRUNED)}
        for run_id, status in self.tracker.unfinished_runs({"yamblab.sweep": self.spec.name, "yamblab.kind": "trial"}):
            if status == "RUNNING" and run_id in end:
                self.tracker.end_run(run_id, end[run_id])

    # -- a branched sweep's base
    def base_run_dir(self) -> Path | None:
        """The folder of the base this sweep trains (None for a checkpoint base, or no branch):
        ``RUN_DIR/bases/GAME-DIGEST``, shared by every sweep with the same base config."""
        if self.base_cfg is None:
            return None
        root = Path(self.base_cfg.runtime.run_dir).expanduser().absolute() / "bases"
        return root / f"{_safe(self.base_cfg.game)}-{self.branch_id}"

    def _ensure_base(self, parent: str) -> Path:
        """Train the base once (or carry on a base a killed driver left half trained), or reuse
        a finished one; sets :attr:`base_checkpoint` and :attr:`base_iteration`."""
        b = self.spec.branch_from
        if b.checkpoint is not None:
            self.base_checkpoint = Path(b.checkpoint).expanduser().absolute()
            self.base_iteration = int(self._base_state["iteration"])
            self._say(f"sweep {self.spec.name}: every trial branches from {self.base_checkpoint} "
                      f"(iteration {self.base_iteration})")
            return self.base_checkpoint
        from filelock import FileLock, Timeout

        run_dir = self.base_run_dir()
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{run_dir}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            self._say(f"sweep {self.spec.name}: another sweep is training the same base ({run_dir.name}); waiting for it")
            lock.acquire()
        try:
            return self._train_base(parent, run_dir)
        finally:
            lock.release()

    def _train_base(self, parent: str, run_dir: Path) -> Path:
        """:meth:`_ensure_base`'s work, under the base's lock."""
        from yamblab.training.resume import CHECKPOINT
        from yamblab.training.runtime import TrainingRun

        b = self.spec.branch_from
        ckpt, done = run_dir / CHECKPOINT, run_dir / "base-done.json"
        if done.exists() and ckpt.exists():
            self.base_checkpoint = ckpt
            self.base_iteration = int(json.loads(done.read_text())["iteration"])
            self._say(f"sweep {self.spec.name}: base {run_dir.name} already trained ({self.base_iteration} "
                      f"iterations): reused")
            return ckpt
        cpus = b.cpus or self.spec.parallel * self.spec.trial_cpus
        length = f"{b.iterations} iterations" if b.iterations else f"{b.minutes:g} minutes"
        self._say(f"sweep {self.spec.name}: training the base once ({length} of the {self.spec.baseline_arm or 'baseline'} "
                  f"arm's config, seed {b.seed}, {cpus:g} CPUs) in {run_dir}"
                  + (" (carrying on its checkpoint)" if ckpt.exists() else ""))
        run = TrainingRun(self.base_cfg, run_dir, resume=ckpt.exists(), tracker=self.tracker,
                          progress=self.progress, cpus=cpus, parent_run_id=parent,
                          tags={"yamblab.kind": "base", "yamblab.sweep": self.spec.name,
                                "yamblab.config_digest": self.branch_id})
        try:
            run.run()
            run.finish()
        finally:
            run.shutdown()
        from yamblab.atomic import atomic_write

        atomic_write(done, [json.dumps({"iteration": run.iteration, "mlflow_run_id": run.run_id}).encode()])
        self.tracker.set_tags(parent, {"yamblab.base_run_dir": str(run_dir), "yamblab.base_run_id": run.run_id or ""})
        self.base_checkpoint, self.base_iteration = ckpt, run.iteration
        return ckpt

    # -- running trials
    def _open_trial(self, study, parent: str, slot: Slot) -> None:
        """Ask Optuna for the slot's trial and give it its config, folder and MLflow run."""
        if slot.params and self.spec.kind != "grid":
            study.enqueue_trial(slot.params)
        trial = study.ask()
        cfg, name = self._trial_config(trial, slot.params)
        digest = self._digest(cfg)
        # relative to the driver's working directory (on a cluster: a shared mount, see infra/README.md)
        root = Path(cfg.runtime.run_dir).expanduser().absolute() / "sweeps" / _safe(self.spec.name)
        if self.spec.kind == "grid":
            run_dir = root / f"{_safe(slot.params['arm'])}-seed{slot.params['seed']}-{digest}"
        else:
            run_dir = Path(slot.run_dir) if slot.run_dir else root / f"trial{trial.number}"
        tags = {"yamblab.kind": "trial", "yamblab.code_version": code_version(),
                "yamblab.rules_hash": cfg.rules_obj.digest, "yamblab.preset": cfg.model_preset,
                "yamblab.sweep": self.spec.name, "optuna.trial": trial.number,
                "yamblab.config_digest": digest, "yamblab.run_dir": str(run_dir)}
        if self.spec.kind == "grid":
            tags["yamblab.arm"] = slot.params["arm"]
        run_id = None
        if not slot.run_id:    # a driver killed before it wrote the trial's run id left the run unfinished
            slot.run_id = self.tracker.find_run({"yamblab.kind": "trial", "yamblab.run_dir": str(run_dir)})
        if slot.run_id:   # an interrupted trial carries on in its own MLflow run
            try:
                self.tracker.client.get_run(slot.run_id)
                run_id = slot.run_id
                self.tracker.client.update_run(run_id, status="RUNNING")
                self.tracker.set_tags(run_id, {**tags, "yamblab.carried_on": "true"})
                hist = self.tracker.client.get_metric_history(run_id, "iteration")
                slot.logged = max((int(m.step) for m in hist), default=0)
            except Exception:  # noqa: BLE001 - a lost run: start a new one
                run_id = None
        if run_id is None:
            run_id = self.tracker.start_run(name, params=cfg.model_dump(mode="json"), parent_run_id=parent,
                                            tags=tags)
            self.tracker.log_text(run_id, cfg.to_yaml(), "config.yaml")
        trial.set_user_attr("mlflow_run_id", run_id)
        trial.set_user_attr("config_digest", digest)
        trial.set_user_attr("run_dir", str(run_dir))
        if self.base_checkpoint is not None:
            # a branched trial runs runtime.iterations more iterations after the base's, from a
            # first checkpoint written from the base's (once: a carried-on trial has its own)
            from yamblab.sweeps.branch import branch_checkpoint
            from yamblab.training.resume import CHECKPOINT

            cfg = cfg.model_copy(update={"runtime": cfg.runtime.model_copy(update={
                "iterations": self.base_iteration + cfg.runtime.iterations, "time_budget_minutes": None})})
            if not (run_dir / CHECKPOINT).exists():
                if self._base_state is None:
                    from yamblab.model.checkpoint import load_checkpoint

                    self._base_state = load_checkpoint(self.base_checkpoint)
                branch_checkpoint(self.base_checkpoint, cfg, run_dir, self.spec.branch_from.evaluate,
                                  state=self._base_state)
            slot.offset = self.base_iteration
            trial.set_user_attr("branch_iteration", self.base_iteration)
            self.tracker.set_tags(run_id, {"yamblab.branched_from": str(self.base_checkpoint),
                                           "yamblab.branch_iteration": self.base_iteration})
        slot.trial, slot.cfg, slot.name, slot.run_id, slot.run_dir = trial, cfg, name, run_id, str(run_dir)

    def _start_actor(self, slot: Slot):
        """Start the slot's trial actor in a fresh placement group; returns its ``info`` future."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from yamblab.actors.cluster import cluster_has_gpu
        from yamblab.training.placement import trial_bundles

        Actor = ray.remote(num_cpus=0, max_restarts=0)(TrialRunner)
        bundles, strategy = trial_bundles(slot.cfg.runtime, self.spec.trial_cpus, cluster_has_gpu())
        slot.pg = placement_group(bundles, strategy=strategy)
        slot.actor = Actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            slot.pg, placement_group_capture_child_tasks=True)).remote(
            slot.cfg, slot.run_dir, self.spec.trial_cpus, True)
        slot.attempts += 1
        return slot.actor.info.remote()

    def _run_trials(self, study, parent: str, slots: list[Slot]) -> None:
        import optuna
        import ray

        queue = list(slots)
        active: dict[Any, tuple[Slot, str]] = {}
        iters = self.base.runtime.iterations
        # Trials on a time budget show the budget (trial-minutes), not iterations they will
        # never reach; the others count iterations.
        # (an arm that sets another budget moves the bar by its own minutes)
        base_budget = self.base.runtime.time_budget_minutes
        timed = base_budget is not None
        bar = None
        if self.progress and queue:
            from tqdm.auto import tqdm

            if timed:
                bar = tqdm(total=len(queue) * base_budget, desc=f"sweep {self.spec.name}",
                           unit="trial-min", bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} trial-min of time budget "
                           "[{elapsed} elapsed]")
            else:
                bar = tqdm(total=len(queue) * iters, desc=f"sweep {self.spec.name}", unit="iterations")

        def advance(slot: Slot, metrics: dict | None = None, to_end: bool = False) -> None:
            """Move the bar: the trial's iterations (a branched trial's since its branch point),
            or its minutes since its last update."""
            if bar is None:
                return
            if not timed:
                now = iters if to_end else min(iters, max(0, slot.it - slot.offset))
                if now > slot.counted:
                    bar.update(now - slot.counted)
                    slot.counted = now
                return
            budget = slot.budget() or base_budget
            now = budget if to_end else min(budget, float((metrics or {}).get("minutes", slot.minutes)))
            if now > slot.minutes:
                bar.update(now - slot.minutes)
                slot.minutes = now

        def launch(slot: Slot) -> None:
            self._open_trial(study, parent, slot)
            active[self._start_actor(slot)] = (slot, "info")

        def next_step(slot: Slot) -> None:
            if slot.it < slot.cfg.runtime.iterations and not slot.done:
                active[slot.actor.iteration.remote()] = (slot, "iteration")
            else:
                active[slot.actor.finish.remote()] = (slot, "finish")

        def log_iteration(slot: Slot, metrics: dict) -> None:
            step = int(metrics.get("iteration", slot.it))
            if metrics.get("branch_point"):      # a branch point: its evaluation, not a training step
                metrics = {k: v for k, v in metrics.items() if k.startswith("eval.")}
            if step > slot.logged:     # an iteration is logged once, whatever the attempts
                self.tracker.log_metrics(slot.run_id, metrics, step=step)
                slot.logged = step
                slot.last = dict(metrics)
                slot.it = max(slot.it, step)
                advance(slot, metrics)

        def late(slot: Slot, out: dict) -> None:
            """Log evaluations that finished after their iteration, at their iteration."""
            for ev in out.pop("late_evals", None) or []:
                step = int(ev["eval.iteration"])
                self.tracker.log_metrics(slot.run_id, ev, step=step)
                v = ev.get("eval.regret_mean")
                if self.spec.kind == "tpe" and v is not None and math.isfinite(v):
                    slot.trial.report(float(v), step)

        def close(slot: Slot) -> None:
            self._release(slot)
            if queue:
                launch(queue.pop(0))

        while queue and len(active) < self.spec.parallel:
            launch(queue.pop(0))
        while active:
            ready = []
            while not ready:      # a second at a time: Ctrl-C and SIGTERM are handled between waits
                ready, _ = ray.wait(list(active), num_returns=1, timeout=1.0)
            fut = ready[0]
            slot, kind = active.pop(fut)
            trial, run_id = slot.trial, slot.run_id
            try:
                out = ray.get(fut)
            except Exception as exc:  # noqa: BLE001 - one failed trial must not stop the sweep
                if _lost(exc) and slot.attempts < MAX_ATTEMPTS:
                    self._say(f"trial {slot.name}: lost its node or an actor ({type(exc).__name__}) at "
                              f"iteration {slot.it}; starting it again from its last checkpoint "
                              f"(attempt {slot.attempts + 1} of {MAX_ATTEMPTS})")
                    self._release(slot)
                    active[self._start_actor(slot)] = (slot, "info")
                    continue
                log.error("trial %s failed: %s", slot.name, exc)
                self._say(f"trial {slot.name} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                self.tracker.end_run(run_id, "FAILED")
                close(slot)
                continue
            if kind == "info":
                slot.it = int(out["iteration"])
                slot.done = bool(out.get("done", False))
                slot.nodes.append(out["node_id"])
                tags = {"yamblab.node": out["node_id"], "yamblab.host": out["host"],
                        "yamblab.attempts": slot.attempts, "yamblab.nodes": ",".join(n[:12] for n in slot.nodes)}
                if out["resumed_from"] is not None:
                    tags["yamblab.resumed_from_iteration"] = out["resumed_from"]
                    if slot.attempts > 1 or slot.why != "new":
                        self._say(f"trial {slot.name}: resumed from its checkpoint at iteration {out['resumed_from']}")
                self.tracker.set_tags(run_id, tags)
                if slot.attempts == 1 and not timed:
                    advance(slot)
                if out["history"] and not slot.last:
                    slot.last = dict(out["history"][-1])      # logged by an earlier attempt or driver
                for m in out["history"]:      # iterations the checkpoint has and MLflow lacks
                    log_iteration(slot, m)
                    v = m.get("eval.regret_mean")
                    if (self.spec.kind == "tpe" and slot.attempts == 1 and v is not None and math.isfinite(v)):
                        trial.report(float(v), int(m["iteration"]))   # a carried-on trial's new Optuna trial
                next_step(slot)
                continue
            if kind == "finish":
                late(slot, out)
                regrets = np.asarray(out["per_game_regret"], dtype=np.float64)
                # only what the last iteration's record lacks (a final evaluation), never a value twice
                extra = {k: v for k, v in out.get("metrics", {}).items() if k not in slot.last}
                if extra:
                    self.tracker.log_metrics(run_id, extra, step=slot.it)
                import tempfile

                with tempfile.TemporaryDirectory(prefix="yamblab-trial-") as tmp:
                    for name, data in out.get("files", {}).items():
                        (Path(tmp) / name).write_bytes(data)
                        self.tracker.log_artifact(run_id, Path(tmp) / name)
                if out.get("network"):       # the resumable checkpoint stays in runs/
                    from yamblab.model.checkpoint import network_from_state

                    self.tracker.log_torch_model(run_id, network_from_state(out["network"]))
                trial.set_user_attr("per_game_regret", [round(float(x), 6) for x in regrets])
                main = slot.cfg.eval_depth
                by_mode = {main: [round(float(x), 6) for x in regrets]}
                for mode, ev in (out.get("modes") or {}).items():
                    got = [round(float(x), 6) for x in ev["per_game_regret"]]
                    if mode != main or len(got) > len(by_mode[main]):
                        by_mode[mode] = got
                trial.set_user_attr("eval_mode", main)
                trial.set_user_attr("per_game_regret_modes", by_mode)
                trial.set_user_attr("loss", out.get("loss", "regret"))
                trial.set_user_attr("attempts", slot.attempts)
                reached = {k: float(v) for k, v in out.get("metrics", {}).items()
                           if k.startswith(("summary.", "machine.")) and math.isfinite(float(v))}
                if reached:
                    trial.set_user_attr("summary", reached)
                study.tell(trial, float(regrets.mean()))
                self.tracker.end_run(run_id)
                if timed:
                    advance(slot, to_end=True)
                close(slot)
                continue
            slot.it = int(out.get("iteration", slot.it + 1))
            slot.done = bool(out.pop("done", False))
            late(slot, out)
            log_iteration(slot, out)
            value = out.get("eval.regret_mean")
            if value is not None and self.spec.kind == "tpe" and math.isfinite(value):
                trial.report(float(value), slot.it)
                if trial.should_prune():
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    self.tracker.set_tags(run_id, {"yamblab.pruned": "true"})
                    self.tracker.end_run(run_id, "KILLED")
                    advance(slot, to_end=True)
                    close(slot)
                    continue
            next_step(slot)
        if bar is not None:
            bar.close()

    @staticmethod
    def _release(slot: Slot) -> None:
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

    def _results(self, study, parent: str) -> list[dict]:
        import optuna

        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
                    and "per_game_regret" in t.user_attrs]
        want = self._want() if self.spec.kind == "grid" else {}
        if self.spec.kind == "grid":    # the latest finished trial of each (arm, seed) the spec has now
            latest: dict[tuple, Any] = {}
            for t in sorted(complete, key=lambda t: t.number):
                key = _grid_key(t)
                d = t.user_attrs.get("config_digest")
                if key in want and (d is None or d == want[key][1]):
                    latest[key] = t
            complete = list(latest.values())
        groups: dict[str, list] = {}
        for t in complete:
            key = _grid_key(t)[0] if self.spec.kind == "grid" else f"trial{t.number}"
            groups.setdefault(key, []).append(t)
        arms = {}
        for key, trials in groups.items():
            seed_of = (lambda t: _grid_key(t)[1]) if self.spec.kind == "grid" else (lambda t: t.number)
            trials = sorted(trials, key=lambda t: (seed_of(t), t.number))
            groups[key] = trials
            arms[key] = self._arm_result(key, trials, [seed_of(t) for t in trials], want)
        if self.spec.kind == "grid":
            order = [a for a in self.spec.arm_overrides() if a in arms]
            arms = {a: arms[a] for a in order}
            baseline = self.spec.baseline_arm or (order[0] if order else "")
        else:
            best = min(complete, key=lambda t: t.value).number if complete else None
            baseline = f"trial{best}" if best is not None else ""
        target = self.spec.target_half_width
        rows = summarise(arms, baseline, {a: m for a, m in self.judge.items() if a in arms}, target)
        for r in rows:
            r["training_seeds"] = [int(x) for x in arms[r["arm"]].seeds]
            r["evaluation_seed"] = int(self.base.runtime.eval_seed)
        loss = complete[0].user_attrs.get("loss", "regret") if complete else "regret"
        table = format_table(rows, baseline, loss, target)
        rt = self.base.runtime
        games = ", ".join(f"{m} {n}" for m, n in {self.base.eval_depth: rt.eval_games, **rt.eval_modes}.items())
        table += (f"\nTraining seeds (train.seed, one trial each): per arm above; evaluation: the same dice "
                  f"(seed {rt.eval_seed}, runtime.eval_seed) for every arm, the first games of them in each "
                  f"decision mode (games: {games}).")
        if rt.solver_eval:
            from yamblab.search.decision_set import DECISION_SEED

            table += (f"\nSolver-graded losses: the decision set of {rt.solver_games} games of the oracle's own play "
                      f"(dice seed {DECISION_SEED}), every arm graded on the same positions.")
        branched = self.base_checkpoint is not None or self.branch_id is not None
        if branched:
            where = self.base_checkpoint or self.base_run_dir()
            table += (f"\nBranched: every trial continued the base {where} from its iteration "
                      f"{self.base_iteration or '?'} for {rt.iterations} iterations.")
        elif self.spec.kind == "grid":     # runs from scratch: their own curves
            runs = format_run_summaries({a: [(_grid_key(t)[1], t.user_attrs.get("summary") or {})
                                             for t in groups[a]] for a in arms})
            if runs:
                table += "\n\n" + runs
        self.table_text = table
        self.baseline = baseline
        log_aggregates(self.tracker, parent, rows, baseline, table)
        if self.spec.kind == "grid":
            try:
                log_curves(self.tracker, parent, groups, baseline, self.judge, self.base.eval_depth, loss)
            except Exception as exc:  # noqa: BLE001 - the table is logged already; the figures are extra
                log.warning("could not draw the arms' learning curves: %s", exc)
        self.tracker.end_run(parent)
        return rows

    def _arm_result(self, arm: str, trials: list, seeds: list[int], want: dict) -> ArmResult:
        """One arm's results from its finished trials' user attributes: the main mode's
        per-game regrets and every other mode's (trials from before modes were stored have
        their main mode only, named by their config)."""
        per_trial = []
        for t in trials:
            ua = t.user_attrs
            main = ua.get("eval_mode")
            if main is None:
                cfg = want.get(_grid_key(t), (self.base,))[0] if want else self.base
                main = cfg.eval_depth
            by_mode = dict(ua.get("per_game_regret_modes") or {})
            by_mode.setdefault(main, ua["per_game_regret"])
            per_trial.append((main, by_mode))
        main = per_trial[0][0]
        common = [m for m in per_trial[0][1] if all(m in bm for _, bm in per_trial)]

        def stack(mode: str) -> np.ndarray:
            xs = [np.asarray(bm[mode], dtype=np.float64) for _, bm in per_trial]
            n = min(len(x) for x in xs)
            return np.stack([x[:n] for x in xs])

        return ArmResult(arm, stack(main), seeds, mode=main,
                         modes={m: stack(m) for m in common if m != main})
