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
from pathlib import Path

from yamblab.errors import ConfigError
from yamblab.sweeps.branch import config_digest
from yamblab.sweeps.report import _grid_key
from yamblab.sweeps.results import sweep_results
from yamblab.sweeps.running import Plan, Slot, TrialLoop
from yamblab.sweeps.spec import SweepConfig
from yamblab.sweeps.stats import _safe
from yamblab.sweeps.trials import GridTrial, arm_config, grid_trials
from yamblab.training.config import RunConfig
from yamblab.training.run_tracking import RunTracking
from yamblab.training.tracking import Tracker, code_version

log = logging.getLogger(__name__)


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
        self._grid: dict | None = None

    def say(self, msg: str) -> None:
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

    def grid(self) -> dict[tuple[str, int], GridTrial]:
        """Every trial of a grid spec, ``(arm, seed) -> GridTrial`` (expanded once)."""
        if self._grid is None:
            self._grid = grid_trials(self.spec, self.base, self._digest)
        return self._grid

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
            want = self.grid()
            done, stale, carry = {}, set(), {}
            for t in sorted(trials, key=lambda t: t.number):
                key = _grid_key(t)
                d = t.user_attrs.get("config_digest")
                ok = key in want and (d is None or d == want[key].digest)
                if t.state == TS.COMPLETE:
                    if ok:
                        done[key] = t
                    elif key in want:
                        stale.add(key)
                    elif key[0] not in self.spec.arm_overrides() and key[0] not in plan.dropped:
                        plan.dropped.append(str(key[0]))
                elif ok:   # failed or interrupted with this very config: carry on its run
                    carry[key] = (t, t.number in interrupted)
            for (arm, seed), planned in want.items():
                key = planned.key
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
        """The config and name of the Optuna ``trial`` a slot asked for: a grid trial's from
        :meth:`grid` (its arm and seed are user attributes, not Optuna parameters: an edited spec
        changes the list of arms, and a parameter's choices may not change in a study); a tuning
        trial's sampled from the spec's ranges."""
        if self.spec.kind == "grid":
            planned = self.grid()[(params["arm"], params["seed"])]
            trial.set_user_attr("arm", planned.arm)
            trial.set_user_attr("seed", planned.seed)
            return planned.cfg, planned.key
        overrides = {}
        for key, rng in self.spec.params.items():
            if rng.choices is not None:
                overrides[key] = trial.suggest_categorical(key, rng.choices)
            elif rng.integer:
                overrides[key] = trial.suggest_int(key, int(rng.low), int(rng.high), log=rng.log)
            else:
                overrides[key] = trial.suggest_float(key, rng.low, rng.high, log=rng.log)
        return arm_config(self.spec, self.base, overrides), f"trial{trial.number}"

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
        self.say(self.plan_text)
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
            cfg = arm_config(self.spec, self.base, over)
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
            self.say(f"sweep {self.spec.name}: every trial branches from {self.base_checkpoint} "
                      f"(iteration {self.base_iteration})")
            return self.base_checkpoint
        from filelock import FileLock, Timeout

        run_dir = self.base_run_dir()
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{run_dir}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            self.say(f"sweep {self.spec.name}: another sweep is training the same base ({run_dir.name}); waiting for it")
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
            self.say(f"sweep {self.spec.name}: base {run_dir.name} already trained ({self.base_iteration} "
                      f"iterations): reused")
            return ckpt
        cpus = b.cpus or self.spec.parallel * self.spec.trial_cpus
        length = f"{b.iterations} iterations" if b.iterations else f"{b.minutes:g} minutes"
        self.say(f"sweep {self.spec.name}: training the base once ({length} of the {self.spec.baseline_arm or 'baseline'} "
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
    def open_trial(self, study, parent: str, slot: Slot) -> None:
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
        slot.tracking = RunTracking(self.tracker, cfg, run_dir, run_id)

    def _run_trials(self, study, parent: str, slots: list[Slot]) -> None:
        """Run ``slots`` on Ray, ``parallel`` at a time (:class:`~yamblab.sweeps.running.TrialLoop`)."""
        TrialLoop(self, study, parent, slots).run()

    def _results(self, study, parent: str) -> list[dict]:
        """The result table from the study (:func:`~yamblab.sweeps.results.sweep_results`)."""
        return sweep_results(self, study, parent)
