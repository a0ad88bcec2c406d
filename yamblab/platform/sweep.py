"""Ablation sweeps and tuning studies: Optuna decides, Ray runs, MLflow records.

A sweep is an Optuna study whose trials are training runs:

* an **ablation grid**: named arms (or a product of factors) × seeds, every arm evaluated on the
  same evaluation dice, so arms compare on equal luck;
* a **tuning study**: TPE over ranges (learning rate, temperature, noise fraction …) with median
  pruning on the evaluator's regret.

Trials run in parallel as Ray actors, each within its declared CPUs. The driver is the only
writer: it reports to Optuna (a journal file locally, PostgreSQL on a cluster) and to MLflow (a
parent run per sweep, a child run per trial). An interrupted sweep resumes without rerunning
finished trials. The result is a table of each arm's mean regret per game with a 95% CI and its
paired difference from the baseline arm on the same evaluation games.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from yamblab.platform.config import RunConfig, SweepConfig, apply_overrides
from yamblab.platform.tracking import Tracker, code_version

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- trial actor
class TrialRunner:
    """Drives one trial's training run, an iteration at a time (the body of a Ray trial actor).

    The run is the same :class:`~yamblab.platform.runtime.TrainingRun` that ``yamblab train``
    drives, with the same actors (self-play workers, replay buffer, learner, evaluator, oracle
    service); the sweep starts this actor in the trial's placement group (one bundle of
    ``trial_cpus``) and the actors it creates are placed there too, so the trial stays within
    its declared CPUs.

    Args:
        config: the trial's run config (a validated ``RunConfig``, passed whole).
        run_dir: the trial's folder for its checkpoint.
        cpus: the trial's CPUs (its actors' declarations must fit).
    """

    def __init__(self, config: RunConfig, run_dir: str, cpus: float):
        from yamblab.platform.runtime import TrainingRun

        self.run = TrainingRun(config, run_dir, progress=False, cpus=cpus)

    def actors(self) -> dict:
        """The Ray actor ids of the trial's actors, by role (tests check they exist)."""
        b = self.run.backend
        ids = {"workers": [w._actor_id.hex() for w in b.workers], "learner": b.learner._actor_id.hex(),
               "evaluator": b.evaluator._actor_id.hex(), "buffer": b.buffer._actor_id.hex()}
        if b.oracle is not None:
            ids["oracle"] = b.oracle._actor_id.hex()
        return ids

    def iteration(self) -> dict:
        """One self-play + learning iteration (evaluating when the config says so).

        Returns:
            metrics (floats), with ``eval.regret_mean`` on evaluation iterations.
        """
        return self.run.step()

    def finish(self) -> dict:
        """Final evaluation if needed, plots and checkpoint.

        Returns:
            ``{"per_game_regret": list, "scores": list, "metrics": dict,
            "files": {name: bytes}}`` (file contents travel to the driver, which logs them).
        """
        self.run.run()   # evaluates the last iteration if it was not an evaluation iteration
        out = self.run.finish()
        files = {}
        for f in out["files"]:
            p = Path(f)
            files[p.name] = p.read_bytes()
        out["files"] = files
        return out


@dataclass
class ArmResult:
    """Evaluation regrets of one arm: float64 (seeds, games) points per game, one row per
    training seed (in seed order), one column per evaluation game (the same dice for every arm)."""

    arm: str
    per_seed_game: np.ndarray
    seeds: list[int] = field(default_factory=list)

    def table(self) -> np.ndarray:
        return np.atleast_2d(np.asarray(self.per_seed_game, dtype=np.float64))


def _interval(samples: np.ndarray, n_boot: int = 4000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the mean of a (seeds, games) array.

    One seed: Student t over the games. Several seeds: a two-level bootstrap that resamples
    training seeds and evaluation games (the same games in every resample of every arm), so
    the spread between seeds counts as well as the dice.
    """
    x = np.atleast_2d(np.asarray(samples, dtype=np.float64))
    n_s, n_g = x.shape
    m = float(x.mean())
    if n_s == 1:
        v = x[0]
        if n_g < 2 or v.std() == 0:
            return m, m
        half = float(stats.t.ppf(0.975, n_g - 1) * stats.sem(v))
        return m - half, m + half
    rng = np.random.default_rng(seed)
    si = rng.integers(0, n_s, size=(n_boot, n_s))
    gi = rng.integers(0, n_g, size=(n_boot, n_g))
    per_seed = np.stack([x[:, g].mean(axis=1) for g in gi])            # (n_boot, n_s)
    means = np.take_along_axis(per_seed, si, axis=1).mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def summarise(arms: dict[str, ArmResult], baseline: str) -> list[dict]:
    """Per arm: mean regret per game with 95% CI, and the paired difference from the baseline.

    The difference of arm A from baseline B is paired by evaluation game (same dice) and by
    training seed: ``regret_A(s, g) - regret_B(s, g)``. Its 95% interval is a Student t over the
    games with one seed, and a two-level bootstrap over seeds and games with several
    (:func:`_interval`); the arm "matters" when the interval excludes 0.
    """
    rows = []
    base = arms.get(baseline)
    for name, res in arms.items():
        x = res.table()
        m = float(x.mean())
        lo, hi = _interval(x)
        row = {"arm": name, "seeds": len(res.seeds), "games": int(x.shape[1]), "regret": m,
               "ci_low": lo, "ci_high": hi, "seed_means": [float(v) for v in x.mean(axis=1)]}
        if base is not None and name != baseline and base.table().shape == x.shape:
            d = x - base.table()
            dm = float(d.mean())
            dlo, dhi = _interval(d)
            row.update(diff=dm, diff_low=dlo, diff_high=dhi, matters=bool(dlo > 0 or dhi < 0))
        rows.append(row)
    return rows


def format_table(rows: list[dict], baseline: str, loss: str = "regret") -> str:
    """The result table as text.

    ``loss`` names what each game's number is: ``"regret"`` (exact, against the oracle) or, for
    a Yamb card with no oracle, ``"points below heuristic"`` (paired on the same dice).
    """
    label = "regret/game" if loss == "regret" else "behind bot/game"
    head = (f"{'arm':28s} {'seeds':>5s} {label:>15s} {'95% CI':>18s} {'vs ' + baseline:>14s} "
            f"{'95% CI':>18s}  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        if "diff" in r:
            dci = f"[{r['diff_low']:+.2f}, {r['diff_high']:+.2f}]"
            verdict = ("worse" if r["diff_low"] > 0 else "better") if r["matters"] else "no clear difference"
            lines.append(f"{r['arm']:28s} {r['seeds']:5d} {r['regret']:15.2f} {ci:>18s} {r['diff']:+14.2f} {dci:>18s}  {verdict}")
        else:
            lines.append(f"{r['arm']:28s} {r['seeds']:5d} {r['regret']:15.2f} {ci:>18s} {'(baseline)' if r['arm'] == baseline else '':>14s}")
    spread = [f"{r['arm']}: " + ", ".join(f"{v:.1f}" for v in r["seed_means"]) for r in rows
              if len(r.get("seed_means", [])) > 1]
    lines.append("")
    if loss != "regret":
        lines.append(f"Each game's number: {loss} on the same dice (this card has no exact oracle).")
    if spread:
        lines.append("95% intervals: bootstrap over training seeds and evaluation games (paired by seed and game).")
        lines += [f"  per-seed regret  {t}" for t in spread]
    else:
        lines.append("95% intervals over the evaluation games (one training seed per arm: seed-to-seed "
                     "spread is not included).")
    return "\n".join(lines)


def plot_table(rows: list[dict], baseline: str):
    """Bar chart of each arm's regret per game with 95% CIs (a matplotlib figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(rows) + 2), 4))
    names = [r["arm"] for r in rows]
    means = np.array([r["regret"] for r in rows])
    err = np.array([[r["regret"] - r["ci_low"] for r in rows], [r["ci_high"] - r["regret"] for r in rows]])
    colors = ["tab:gray" if r["arm"] == baseline else ("tab:red" if r.get("matters") and r["diff"] > 0
              else "tab:green" if r.get("matters") else "tab:blue") for r in rows]
    ax.bar(names, means, yerr=err, capsize=4, color=colors)
    ax.set_ylabel("oracle regret per game (points, 95% CI)")
    ax.set_title("Ablation arms (grey: baseline; green/red: clearly better/worse)")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- the sweep
class Sweep:
    """Run (or resume) the sweep described by a validated :class:`SweepConfig`.

    Args:
        spec: the sweep.
        base: the run config every trial starts from.
        tracking_uri: MLflow store (default: the spec's, else SQLite in the working directory).
        ray_address: an existing Ray cluster, else a local one is started.
    """

    def __init__(self, spec: SweepConfig, base: RunConfig, tracking_uri: str | None = None,
                 ray_address: str | None = None, progress: bool = True):
        self.spec = spec
        self.base = base
        self.tracker = Tracker(tracking_uri or spec.tracking_uri, spec.experiment)
        self.ray_address = ray_address
        self.progress = progress

    # -- optuna
    def _study(self):
        import optuna

        storage = self.spec.storage_url()
        if isinstance(storage, str) and storage.startswith("journal:"):
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            path = Path(storage[len("journal:"):])
            path.parent.mkdir(parents=True, exist_ok=True)
            storage = JournalStorage(JournalFileBackend(str(path)))
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
        rid = study.user_attrs.get("mlflow_parent_run_id")
        if rid:
            try:
                self.tracker.client.get_run(rid)
                return rid
            except Exception:  # noqa: BLE001 - a store that lost the run gets a new parent
                pass
        rid = self.tracker.start_run(
            f"sweep:{self.spec.name}", params={"sweep": self.spec.model_dump(mode="json")},
            tags={"yamblab.kind": "sweep", "yamblab.code_version": code_version(),
                  "yamblab.sweep": self.spec.name, "yamblab.rules_hash": self.base.rules_obj.digest})
        study.set_user_attr("mlflow_parent_run_id", rid)
        return rid

    def _pending(self, study) -> list[dict]:
        """Trial parameter sets still to run."""
        import optuna

        done = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                          optuna.trial.TrialState.PRUNED)]
        for t in study.trials:  # trials left running by an interrupted driver are failed, then redone
            if t.state == optuna.trial.TrialState.RUNNING:
                study.tell(t.number, state=optuna.trial.TrialState.FAIL)
        if self.spec.kind == "grid":
            have = {(t.params.get("arm"), t.params.get("seed")) for t in done
                    if t.state == optuna.trial.TrialState.COMPLETE}
            return [{"arm": a, "seed": s} for a in self.spec.arm_overrides() for s in self.spec.seeds
                    if (a, s) not in have]
        return [{} for _ in range(max(0, self.spec.n_trials - len(done)))]

    def _trial_config(self, trial, params: dict) -> tuple[RunConfig, str]:
        if self.spec.kind == "grid":
            arms = self.spec.arm_overrides()
            arm = trial.suggest_categorical("arm", list(arms))
            seed = trial.suggest_categorical("seed", list(self.spec.seeds))
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
        """Run every pending trial and return the result table rows."""
        import ray

        study = self._study()
        parent = self._parent_run(study)
        pending = self._pending(study)
        started_ray = False
        if pending:
            if not ray.is_initialized():
                from yamblab.actors.cluster import init_ray

                init_ray(self.ray_address)
                started_ray = True
        try:
            self._run_trials(study, parent, pending)
        finally:
            if started_ray:
                ray.shutdown()
        rows = self._results(study, parent)
        return rows

    def _run_trials(self, study, parent: str, pending: list[dict]) -> None:
        import optuna
        import ray

        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        Actor = ray.remote(num_cpus=0)(TrialRunner)
        queue = list(pending)
        groups: dict[Any, Any] = {}
        active: dict[Any, dict] = {}
        bar = None
        if self.progress and queue:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(queue) * self.base.runtime.iterations, desc=f"sweep {self.spec.name}",
                       unit="iterations")

        def launch(params):
            if params:
                study.enqueue_trial(params)
            trial = study.ask()
            cfg, name = self._trial_config(trial, params)
            run_id = self.tracker.start_run(
                name, params=cfg.model_dump(mode="json"), parent_run_id=parent,
                tags={"yamblab.kind": "trial", "yamblab.code_version": code_version(),
                      "yamblab.rules_hash": cfg.rules_obj.digest, "yamblab.preset": cfg.model_preset,
                      "yamblab.sweep": self.spec.name, "optuna.trial": trial.number})
            trial.set_user_attr("mlflow_run_id", run_id)
            self.tracker.log_text(run_id, cfg.to_yaml(), "config.yaml")
            run_dir = Path(cfg.runtime.run_dir) / "sweeps" / self.spec.name / f"trial{trial.number}"
            pg = placement_group([{"CPU": float(self.spec.trial_cpus)}], strategy="STRICT_PACK")
            actor = Actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_capture_child_tasks=True)).remote(cfg, str(run_dir), self.spec.trial_cpus)
            groups[actor] = pg
            fut = actor.iteration.remote()
            active[fut] = {"trial": trial, "actor": actor, "it": 1, "run_id": run_id, "cfg": cfg,
                           "t0": time.perf_counter()}

        while queue and len(active) < self.spec.parallel:
            launch(queue.pop(0))
        while active:
            ready, _ = ray.wait(list(active), num_returns=1)
            fut = ready[0]
            st = active.pop(fut)
            trial, actor, run_id = st["trial"], st["actor"], st["run_id"]
            try:
                out = ray.get(fut)
            except Exception as exc:  # noqa: BLE001 - one failed trial must not stop the sweep
                log.error("trial %s failed: %s", trial.number, exc)
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                self.tracker.end_run(run_id, "FAILED")
                self._release(groups, actor)
                if queue:
                    launch(queue.pop(0))
                continue
            if isinstance(out, dict) and "per_game_regret" in out:       # finish() returned
                regrets = np.asarray(out["per_game_regret"], dtype=np.float64)
                self.tracker.log_metrics(run_id, out.get("metrics", {}), step=st["it"])
                import tempfile

                with tempfile.TemporaryDirectory(prefix="yamblab-trial-") as tmp:
                    for name, data in out.get("files", {}).items():
                        (Path(tmp) / name).write_bytes(data)
                        self.tracker.log_artifact(run_id, Path(tmp) / name)
                    ckpt = Path(tmp) / "checkpoint.pt"
                    if ckpt.exists():
                        from yamblab.model.checkpoint import load_network

                        self.tracker.log_torch_model(run_id, load_network(ckpt))
                trial.set_user_attr("per_game_regret", [round(float(x), 6) for x in regrets])
                trial.set_user_attr("loss", out.get("loss", "regret"))
                study.tell(trial, float(regrets.mean()))
                self.tracker.end_run(run_id)
                self._release(groups, actor)
                if queue:
                    launch(queue.pop(0))
                continue
            self.tracker.log_metrics(run_id, out, step=st["it"])
            if bar is not None:
                bar.update(1)
            value = out.get("eval.regret_mean")
            if value is not None and self.spec.kind == "tpe" and math.isfinite(value):
                trial.report(float(value), st["it"])
                if trial.should_prune():
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    self.tracker.set_tags(run_id, {"yamblab.pruned": "true"})
                    self.tracker.end_run(run_id, "KILLED")
                    self._release(groups, actor)
                    if bar is not None:
                        bar.update(self.base.runtime.iterations - st["it"])
                    if queue:
                        launch(queue.pop(0))
                    continue
            if st["it"] < st["cfg"].runtime.iterations:
                st["it"] += 1
                active[actor.iteration.remote()] = st
            else:
                active[actor.finish.remote()] = st
        if bar is not None:
            bar.close()

    @staticmethod
    def _release(groups: dict, actor) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        ray.kill(actor)
        pg = groups.pop(actor, None)
        if pg is not None:
            remove_placement_group(pg)

    def _results(self, study, parent: str) -> list[dict]:
        import optuna

        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
                    and "per_game_regret" in t.user_attrs]
        groups: dict[str, list] = {}
        for t in complete:
            key = t.params.get("arm") if self.spec.kind == "grid" else f"trial{t.number}"
            groups.setdefault(key, []).append(t)
        arms = {}
        for key, trials in groups.items():
            trials = sorted(trials, key=lambda t: (t.params.get("seed", 0), t.number))
            per_seed = np.stack([np.asarray(t.user_attrs["per_game_regret"]) for t in trials])
            arms[key] = ArmResult(key, per_seed, [t.params.get("seed", t.number) for t in trials])
        if self.spec.kind == "grid":
            order = [a for a in self.spec.arm_overrides() if a in arms]
            arms = {a: arms[a] for a in order}
            baseline = self.spec.baseline_arm or (order[0] if order else "")
        else:
            best = min(complete, key=lambda t: t.value).number if complete else None
            baseline = f"trial{best}" if best is not None else ""
        rows = summarise(arms, baseline)
        loss = complete[0].user_attrs.get("loss", "regret") if complete else "regret"
        table = format_table(rows, baseline, loss)
        self.table_text = table
        self.baseline = baseline
        self.tracker.log_text(parent, table, "results.txt")
        self.tracker.log_text(parent, json.dumps(rows, indent=2), "results.json")
        if rows:
            self.tracker.log_figure(parent, plot_table(rows, baseline), "regret_by_arm.png")
            for i, r in enumerate(rows):
                self.tracker.log_metrics(parent, {f"regret.{r['arm']}": r["regret"],
                                                  **({f"diff.{r['arm']}": r["diff"]} if "diff" in r else {})}, step=0)
        self.tracker.end_run(parent)
        return rows
