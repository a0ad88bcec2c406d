"""The training loop: iterations of self-play, learning and evaluation, with checkpoints.

:class:`TrainingRun` is the one training loop of yamblab: ``yamblab train`` and every trial of
a sweep run it. Its roles (self-play workers, replay buffer, learner, evaluator, oracle service)
live in a backend (:mod:`yamblab.training.backends`): Ray actors, or plain objects in this
process. The pieces around the loop each have their module: where the roles go
(:mod:`~yamblab.training.placement`), the checkpoint and resume
(:mod:`~yamblab.training.resume`), evaluations beside the loop
(:mod:`~yamblab.training.evaluations`) and the MLflow run
(:mod:`~yamblab.training.run_tracking`).

Self-play and learning overlap: while the learner trains on samples drawn from the replay
buffer (``train.replay_ratio`` optimiser samples per new position), the workers already play
the next iterations' games with the newest weights they were given, at most
``runtime.max_policy_lag`` weight versions behind (0: the serial loop). A checkpoint is written
between iterations every ``runtime.checkpoint_minutes`` (0: after each) and after the last, so
a killed driver resumes where it stopped: no game counted twice (the batches that were playing
ahead are played again, with the same dice).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from yamblab.atomic import atomic_write
from yamblab.training.backends import InProcessBackend, RayBackend
from yamblab.training.config import RunConfig
from yamblab.training.evaluations import Evaluations
from yamblab.training.placement import describe_devices, machine_description, oracle_build_seconds
from yamblab.training.resume import (CHECKPOINT, RunState, branch_record, load_replay, read_checkpoint,
                                     warm_start_state, write_checkpoint)
from yamblab.training.run_tracking import RunTracking, numbers


#: self-play jobs each worker gets of an iteration's games (so a worker that finishes early
#: takes the next job rather than idling behind a slow one)
TASKS_PER_WORKER = 2


def _chunks(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts) if base + (1 if i < extra else 0) > 0]


class TrainingRun:
    """Iterations of self-play, learning and evaluation with a checkpoint after each.

    Args:
        cfg: the run config.
        run_dir: the run's folder (checkpoint, config, plots).
        resume: continue from the checkpoint in ``run_dir``.
        tracker: a :class:`~yamblab.training.tracking.Tracker` (the driver is the only writer), or None.
        progress: show a progress bar (a time-budgeted run shows its budget in minutes).
        cpus: the CPUs the run's roles may declare in all (a sweep trial's); default: the
            cluster's.
        parent_run_id, tags: the MLflow run this run's own is a child of (a branched sweep's
            base), and further tags of its run.
        time_machine: time the machine (:func:`~yamblab.training.placement.oracle_build_seconds`,
            about 3 s) before any role starts and again in :meth:`finish`, into :attr:`machine`:
            a shared VM's speed moves between runs.
        warm_state: a new run under ``train.init_from``: the learner state
            :func:`~yamblab.training.resume.warm_start_state` already made of it (the CLI makes
            it before the run folder); None makes it here. Ignored on resume.

    A checkpoint written by :func:`~yamblab.sweeps.branch.branch_checkpoint` (a branched
    sweep's trial) carries on from its base's state; the run first evaluates its network at
    the branch point, so its curve starts where the base ended.
    """

    def __init__(self, cfg: RunConfig, run_dir: str | Path, resume: bool = False,
                 tracker=None, progress: bool = True, cpus: float | None = None,
                 parent_run_id: str | None = None, tags: dict | None = None, time_machine: bool = False,
                 warm_state: dict | None = None):
        if not resume and cfg.train.init_from is not None and warm_state is None:
            warm_state = warm_start_state(cfg)       # before the run folder: a bad checkpoint is one line
        #: the machine's speed before the run (and after it, once :meth:`finish` ran), seconds
        self.machine: dict[str, float] = {"machine.oracle_seconds_start": oracle_build_seconds()} if time_machine else {}
        if cfg.runtime.learner_compile:
            import torch

            from yamblab.learners.learner import check_compile_toolchain

            # before the run folder or any role: a missing compiler is one clear line
            check_compile_toolchain("cuda" if torch.cuda.is_available() else "cpu")
        self.cfg, self.run_dir, self.progress = cfg, Path(run_dir), progress
        self.run_dir.mkdir(parents=True, exist_ok=True)
        resumed = read_checkpoint(self.run_dir) if resume else None
        #: counters, history, evaluations: what the checkpoint keeps
        self.state = resumed.state if resumed else RunState()
        #: the iteration of the last checkpoint written whole (None: none yet)
        self.checkpointed: int | None = self.state.iteration if resume else None
        #: whether the last checkpoint (:meth:`run`'s) keeps the replay buffer (a sweep trial's
        #: need not: a finished trial is never carried on)
        self.keep_buffer_at_end = True
        self._inflight: dict[int, tuple[int, list]] = {}    # batch -> (weights' iteration, jobs)
        self._last_checkpoint = time.time()
        atomic_write(self.run_dir / "config.yaml", cfg.to_yaml().encode())
        learner_state = resumed.learner_state if resumed else warm_state if cfg.train.init_from is not None else None
        backend = InProcessBackend if cfg.runtime.actors == "in_process" else RayBackend
        self.backend = backend(cfg, learner_state, resumed and resumed.buffer_state, cpus=cpus)
        if resumed and resumed.replay is not None:
            load_replay(self.backend, *resumed.replay)
        self.evaluations = Evaluations(cfg, self.backend, self.run_dir, self.state.evals, self._record_evaluation)
        self.last_eval: dict | None = next((h for h in reversed(self.history) if "eval.score_mean" in h),
                                           None) if self.evals else None
        self.started = time.time()      # the run's clock starts once its roles are up and its buffer loaded
        self.tracking = RunTracking(tracker, cfg, self.run_dir, self.state.run_id, parent_run_id, tags)
        try:
            self.tracking.open(self.history, {
                "yamblab.resources": self.backend.resources.describe(), "yamblab.machine": machine_description(),
                "yamblab.devices": describe_devices(self.backend.devices)})
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM through `yamblab train`) while the MLflow run is made or its
            # history sent: the caller never gets this object, so the run is ended here
            self.tracking.kill()
            raise
        self.state.run_id = self.tracking.run_id

    # -- where the run stands (kept in its checkpoint)
    @property
    def iteration(self) -> int:
        return self.state.iteration

    @property
    def games_played(self) -> int:
        return self.state.games_played

    @property
    def history(self) -> list[dict]:
        return self.state.history

    @property
    def evals(self) -> list[dict]:
        return self.state.evals

    @property
    def run_id(self) -> str | None:
        return self.state.run_id

    @property
    def tracker(self):
        return self.tracking.tracker

    @property
    def elapsed(self) -> float:
        return self.state.elapsed_before + (time.time() - self.started)

    def _where(self) -> dict:
        """Where the run stands, for an evaluation started now."""
        s = self.state
        return {"iteration": s.iteration, "minutes": self.elapsed / 60.0, "positions": s.positions_total,
                "steps": s.steps_total, "samples": s.samples_total, "games_played": s.games_played}

    # -- one iteration
    def step(self) -> dict:
        """Run one iteration; returns its metrics.

        An iteration collects its batch of self-play games (played ahead of the learner by at
        most ``runtime.max_policy_lag`` weight versions, while the learner trained), trains on
        ``replay_ratio`` samples per new position drawn from the replay buffer while the next
        batches play, and publishes the new weights. Evaluations run on the evaluator while the
        loop goes on and are recorded when they finish (``eval.*`` metrics at the iteration
        whose weights they graded).
        """
        if self.state.branch_eval_due:
            self.evaluate_branch_point()
        s, rt, train_cfg = self.state, self.cfg.runtime, self.cfg.train
        t0 = time.perf_counter()
        k = s.iteration
        # play: this iteration's batch and those that play ahead of the learner, all with the
        # weights of k trainings (nothing trains before this batch is in)
        self._submit(range(k, k + 1 + rt.max_policy_lag), trainings=k)
        weights_trainings, batch = self._inflight.pop(k)
        # collect
        t_wait = time.perf_counter()
        stats = self.backend.collect(batch)
        t_wait = time.perf_counter() - t_wait
        positions = sum(st["positions"] for st in stats)
        s.positions_total += positions
        s.iteration += 1
        # train, while the batches submitted above play; publish the new weights
        t_train = time.perf_counter()
        progress = self.progress_fraction()
        share = train_cfg.policy_share_at(progress)
        ref = self.backend.start_training(positions, train_cfg.lr_at(progress), share)
        train = {} if ref is None else self.backend.get(ref)
        t_train = time.perf_counter() - t_train
        s.games_played += train_cfg.games_per_iteration
        s.steps_total = int(train.get("steps", s.steps_total))
        s.samples_total = int(train.get("samples_total", s.samples_total))
        metrics = self._metrics(stats, positions, batch, train, share, k - weights_trainings,
                                {"wait_selfplay": t_wait, "wait_learner": t_train, "start": t0})
        s.history.append(metrics)
        # evaluate (a branched run counts its evaluations from the branch point)
        self.evaluations.after_iteration(s.iteration, s.branch_iteration or 0, self._where())
        # checkpoint, then log: a driver killed in between logs it on resume, from the history
        if self._checkpoint_due():
            self.checkpoint()
        self.tracking.log({k: v for k, v in metrics.items() if not k.startswith("eval.")}, s.iteration)
        return metrics

    def _metrics(self, stats: list[dict], positions: int, batch: list[dict], train: dict, share: float, lag: int,
                 times: dict) -> dict:
        """The metrics of the iteration just done (``positions``: its batch's): its self-play,
        training and timing figures."""
        s, cfg = self.state, self.cfg
        n = cfg.train.games_per_iteration
        play_busy = sum(st.get("busy_seconds", 0.0) for st in stats)
        scores = [st["score_mean"] for st in stats if math.isfinite(st.get("score_mean", float("nan")))]
        wall = time.perf_counter() - times["start"]
        metrics = {f"train.{k}": v for k, v in train.items()}
        metrics.update({
            "iteration": s.iteration, "games_played": s.games_played,
            "selfplay.score_mean": float(np.mean(scores)) if scores else float("nan"),
            "selfplay.positions": positions, "selfplay.positions_total": s.positions_total,
            "selfplay.positions_per_s": positions / max(play_busy, 1e-9),
            "selfplay.games_per_s": n / max(play_busy, 1e-9), "selfplay.busy_seconds": play_busy,
            "selfplay.bot_games": int(round(cfg.train.bot_share_at(s.iteration - 1) * n)),
            "selfplay.policy_lag": lag,
            **({"selfplay.value_target_mix": float(batch[0]["job"]["value_target_mix"])}
               if cfg.train.value_target_mix_final is not None and batch else {}),
            **({"train.policy_share": float(share)} if cfg.train.policy_share_final is not None else {}),
            "train.samples_per_s": train.get("samples", 0.0) / max(train.get("seconds", 0.0), 1e-9),
            "time.wait_selfplay": times["wait_selfplay"], "time.wait_learner": times["wait_learner"],
            "utilisation.selfplay": play_busy / max(wall * self.backend.n_workers, 1e-9),
            "utilisation.learner": train.get("seconds", 0.0) / max(wall, 1e-9),
            "buffer.positions": self.backend.buffer_size(), "workers.restarts": self.backend.restarts,
        })
        metrics["seconds"] = time.perf_counter() - times["start"]
        metrics["minutes"] = self.elapsed / 60.0
        return metrics

    def _jobs(self, j: int) -> list[dict]:
        """The self-play jobs of batch ``j`` (0-based: the games of iteration ``j + 1``):
        game numbers ``j × games_per_iteration`` onwards, so a batch replayed after a crash or
        a resume plays the same games and none is counted twice. Their value targets take λ
        (``train.value_target_mix``) where the run's clock stands when they start."""
        cfg = self.cfg
        n = cfg.train.games_per_iteration
        n_bot = int(round(cfg.train.bot_share_at(j) * n))
        mix = cfg.train.value_target_mix_at(self.progress_fraction())
        jobs, first = [], j * n
        for size in _chunks(n, max(1, self.backend.n_workers * TASKS_PER_WORKER)):
            jobs.append({"n": size, "seed": cfg.train.seed, "first_game": first,
                         "n_bot": max(0, min(size, n_bot - (first - j * n))), "value_target_mix": mix})
            first += size
        return jobs

    def _submit(self, batches, trainings: int) -> None:
        """Start the batches in ``batches`` that are not in flight yet, with the newest published
        weights (which carry ``trainings`` iterations of training)."""
        missing = [j for j in batches if j not in self._inflight and j < self.cfg.runtime.iterations]
        if not missing:
            return
        version, weights = self.backend.weights()
        for j in missing:
            self._inflight[j] = (trainings, self.backend.submit(version, weights, self._jobs(j)))

    # -- evaluations
    def _record_evaluation(self, iteration: int, metrics: dict) -> None:
        """A finished evaluation joins its iteration's history entry and is logged there."""
        for h in self.history:
            if h["iteration"] == iteration:
                h.update(metrics)
        self.tracking.log(numbers(metrics), iteration)
        self.last_eval = metrics

    def evaluate_branch_point(self) -> dict:
        """Evaluate the network a branched run starts from, at the branch's iteration (before
        any training of its own), and record it as the first entry of its history.

        Returns:
            the evaluation's metrics.
        """
        self.state.branch_eval_due = False
        record = branch_record(self.iteration, self.games_played, self.state.positions_total)
        self.history.append(record)
        self.evaluations.start(self._where())
        self.evaluations.poll(block=True)
        self.tracking.log({k: v for k, v in numbers(record).items() if not k.startswith("eval.")}, self.iteration)
        return record

    # -- checkpoints
    def _checkpoint_due(self) -> bool:
        every = self.cfg.runtime.checkpoint_minutes
        return every <= 0 or time.time() - self._last_checkpoint >= every * 60.0

    def checkpoint(self, keep_buffer: bool = True) -> Path:
        """Write the run's state atomically (:func:`~yamblab.training.resume.write_checkpoint`):
        an evaluation still running is not in it, and the batches of games playing ahead are
        played again on resume.

        Raises:
            DiskFullError: no space left to write it; the checkpoint before stays whole.
        """
        self._last_checkpoint = time.time()
        path, self.state.segments = write_checkpoint(self.run_dir, self.backend, self.state, self.cfg,
                                                     self.elapsed, keep_buffer)
        self.checkpointed = self.iteration
        return path

    # -- the whole run
    def progress_fraction(self) -> float:
        """How far the run is, 0 to 1: the larger of the share of ``runtime.iterations`` done
        and the share of ``runtime.time_budget_minutes`` spent (the learning-rate schedule's
        clock, :meth:`~yamblab.learners.config.TrainConfig.lr_at`)."""
        rt = self.cfg.runtime
        p = self.iteration / max(1, rt.iterations)
        if rt.time_budget_minutes is not None:
            p = max(p, self.elapsed / 60.0 / rt.time_budget_minutes)
        return min(1.0, p)

    def done(self) -> bool:
        rt = self.cfg.runtime
        if self.iteration >= rt.iterations:
            return True
        # a time budget stops a run after the iteration that crosses it: never before its first
        return (rt.time_budget_minutes is not None and self.iteration > 0
                and self.elapsed / 60.0 >= rt.time_budget_minutes)

    def run(self) -> list[dict]:
        """Iterate until done (iterations or time budget); returns the metrics history.

        The last iteration is always evaluated, and every evaluation is waited for before
        this returns.
        """
        bar = self._progress_bar() if self.progress else None
        try:
            while not self.done():
                m = self.step()
                if bar is not None:
                    self._show(bar, m)
            self.evaluations.finish_on(self.iteration, self._where())
            self.checkpoint(keep_buffer=self.keep_buffer_at_end)
        finally:
            if bar is not None:
                bar.close()
        return self.history

    def _progress_bar(self):
        from tqdm.auto import tqdm

        budget = self.cfg.runtime.time_budget_minutes
        if budget is not None:     # a time-budgeted run shows its budget, not an ETA
            return tqdm(total=float(budget), initial=min(self.elapsed / 60.0, budget),
                        desc=f"{self.cfg.name} (budget {budget:g} min)",
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:g} min {postfix}")
        return tqdm(total=self.cfg.runtime.iterations, initial=self.iteration, desc=self.cfg.name, unit="it")

    def _show(self, bar, m: dict) -> None:
        post = {"pos/s": f"{m['selfplay.positions_per_s']:.0f}", "loss": f"{m.get('train.total', float('nan')):.3f}"}
        ev = self.last_eval or {}
        if "eval.regret_mean" in ev:
            post["regret"] = f"{ev['eval.regret_mean']:.1f}"
        elif "eval.vs_baseline_mean" in ev:
            post["vs bot"] = f"{ev['eval.vs_baseline_mean']:+.0f}"
        bar.set_postfix(post)
        if self.cfg.runtime.time_budget_minutes is not None:
            bar.n = min(self.elapsed / 60.0, float(self.cfg.runtime.time_budget_minutes))
            bar.refresh()
        else:
            bar.update(1)

    def finish(self, artifact_dir: Path | None = None) -> dict:
        """Plots and artifacts of the finished run (logged to MLflow when tracking); a run made
        with ``time_machine`` first times the machine again (:attr:`machine`) and writes both
        figures into the summary, logged beside it.

        Args:
            artifact_dir: where the plots and ``summary.json`` go (default: the run folder).

        Returns:
            ``{"per_game_regret", "scores", "metrics", "files"}`` of the last evaluation.
        """
        import json

        from yamblab.training import plots
        from yamblab.training.summary import run_summary

        if self.machine:
            self.machine["machine.oracle_seconds_end"] = oracle_build_seconds()
        out_dir = Path(artifact_dir or self.run_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        last = self.evals[-1]
        files = [str(self.run_dir / CHECKPOINT), str(self.run_dir / "config.yaml")]
        figs = {
            "learning_curve.png": plots.learning_curve(self.evals, self.history, last.get("loss", "regret"),
                                                       machine=machine_description()),
            "score_histogram.png": plots.score_histogram(np.array(last["scores"]), self.cfg,
                                                         self.backend.oracle_table()),
        }
        if last["by_box"]:
            figs["regret_breakdown.png"] = plots.regret_breakdown(last["by_decision"], last["by_box"])
        for name, fig in figs.items():
            files.append(str(plots.save_png(fig, out_dir / name)))
        # what the run reached, and the machine's speed beside it: summary.json and MLflow both
        end_figures = {**run_summary(self.evals), **self.machine}
        summary = {**numbers(self.history[-1]), **end_figures}
        atomic_write(out_dir / "summary.json", json.dumps(summary, indent=2).encode())
        files.append(str(out_dir / "summary.json"))
        self.tracking.close(files, end_figures, self.iteration, self.backend.network, keep=CHECKPOINT)
        return {"per_game_regret": last["per_game_regret"], "loss": last.get("loss", "regret"),
                "modes": last.get("modes", {}), "scores": last["scores"], "metrics": summary, "files": files}

    def shutdown(self) -> None:
        self.backend.shutdown()
