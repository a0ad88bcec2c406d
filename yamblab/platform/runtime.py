"""The training driver: iterations of self-play, learning and evaluation, with checkpoints.

:class:`TrainingRun` is the one training loop of yamblab: ``yamblab train`` and every trial of
a sweep run it. It drives :class:`RayBackend`, the actors of :mod:`yamblab.actors.actors` on a
Ray cluster: self-play workers with bounded in-flight work, the replay buffer, the learner (GPU
when the cluster has one), the evaluator and (Yahtzee) the oracle service. A sweep trial runs
the same actors inside the trial's placement group, so they stay within its declared CPUs.

Every iteration ends with an atomic checkpoint (learner, EMA, optimiser, replay buffer,
iteration and game counters, metrics history), so a killed driver resumes exactly where it
stopped: same iteration count, buffer restored, no game played or counted twice.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import numpy as np

from yamblab.errors import ConfigError, YamblabError
from yamblab.platform.config import RunConfig

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"


def _chunks(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts) if base + (1 if i < extra else 0) > 0]


def _np_to_torch(obj):
    import torch

    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.array(obj, copy=True))
    if isinstance(obj, dict):
        return {k: _np_to_torch(v) for k, v in obj.items()}
    return obj


def _torch_to_np(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, dict):
        return {k: _torch_to_np(v) for k, v in obj.items()}
    return obj


# --------------------------------------------------------------------------- backend
class RayBackend:
    """The actors of a run on the Ray cluster (started by the caller).

    Args:
        cfg: the run config (it travels to the actors whole).
        learner_state, buffer_state: state to resume from.
        cpus: the CPUs this run may use (a sweep trial's ``trial_cpus``); default: the
            cluster's.

    Raises:
        ConfigError: the actors declare more CPUs than ``cpus`` (or the cluster) has.
    """

    def __init__(self, cfg: RunConfig, learner_state: dict | None = None, buffer_state: dict | None = None,
                 cpus: float | None = None):
        import ray

        from yamblab.actors.actors import remote_classes

        self.cfg = cfg
        rt = cfg.runtime
        need = rt.workers * rt.worker_cpus + rt.learner_cpus + rt.eval_cpus
        have = ray.cluster_resources().get("CPU", 0) if cpus is None else float(cpus)
        where = "the Ray cluster has" if cpus is None else "the trial declares"
        if need > have + 1e-9:
            raise ConfigError(
                f"runtime declares {need:g} CPUs ({rt.workers} workers x {rt.worker_cpus:g} + learner "
                f"{rt.learner_cpus:g} + evaluator {rt.eval_cpus:g}) but {where} {have:g}")
        cls = remote_classes(cfg)
        game = cfg.game_obj
        self.oracle = cls["oracle"].remote(cfg.rules) if game.name == "yahtzee" else None
        self.workers = [cls["worker"].remote(cfg, i) for i in range(rt.workers)]
        self.buffer = cls["buffer"].remote(rt.replay_positions, cfg.train.seed, buffer_state)
        self.learner = cls["learner"].remote(cfg, learner_state)
        self.evaluator = cls["evaluator"].remote(cfg, self.oracle)
        self.restarts = 0
        self.n_workers = rt.workers
        self._table = None

    def weights(self):
        import ray

        return ray.get(self.learner.weights.remote())

    def play(self, version, weights, jobs: list[dict]) -> list[dict]:
        """Run the jobs over the workers, at most ``max_in_flight`` per worker; a job whose
        worker died is played again by the restarted worker (same seed and game numbers)."""
        import ray
        from ray.exceptions import RayActorError

        queue = list(jobs)
        inflight: dict = {}
        per_worker = {i: 0 for i in range(len(self.workers))}
        stats = []

        def submit(i, job):
            s_ref, st_ref = self.workers[i].play.options(num_returns=2).remote(
                version, weights, job["n"], job["seed"], job["first_game"], job["n_bot"])
            inflight[st_ref] = (i, job, s_ref)
            per_worker[i] += 1

        def fill():
            for i in range(len(self.workers)):
                while queue and per_worker[i] < self.cfg.runtime.max_in_flight:
                    submit(i, queue.pop(0))

        fill()
        adds = []
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1)
            st_ref = ready[0]
            i, job, s_ref = inflight.pop(st_ref)
            per_worker[i] -= 1
            try:
                stats.append(ray.get(st_ref))
                adds.append(self.buffer.add.remote(s_ref))
            except RayActorError as exc:
                self.restarts += 1
                log.warning("self-play worker %d died (%s); replaying its %d games", i, exc.__class__.__name__, job["n"])
                queue.insert(0, job)
            fill()
        ray.get(adds)
        return stats

    def train(self) -> dict:
        import ray

        return ray.get(self.learner.train.remote(self.buffer.all.remote()))

    def buffer_size(self) -> int:
        import ray

        return ray.get(self.buffer.size.remote())

    def evaluate(self, version, weights) -> dict:
        import ray

        return ray.get(self.evaluator.evaluate.remote(version, weights))

    def state(self) -> tuple[dict, dict]:
        import ray

        return ray.get([self.learner.state_dict.remote(), self.buffer.state_dict.remote()])

    def network(self):
        from yamblab.model.network import YambNet

        learner_state, _ = self.state()
        net = YambNet(self.cfg.model)
        net.load_state_dict(learner_state["ema"], strict=True)
        return net.eval()

    def oracle_table(self):
        """Yahtzee's oracle table (None for Yamb)."""
        if self._table is None and self.cfg.game == "yahtzee":
            from yamblab.oracle.table import OracleTable

            self._table = OracleTable.get(self.cfg.rules_obj)
        return self._table

    def weight_loads(self) -> list[int]:
        import ray

        return ray.get([w.weight_loads.remote() for w in self.workers])

    def shutdown(self) -> None:
        import ray

        for a in [*self.workers, self.buffer, self.learner, self.evaluator, self.oracle]:
            if a is not None:
                ray.kill(a)


# --------------------------------------------------------------------------- the run
class TrainingRun:
    """Iterations of self-play, learning and evaluation with a checkpoint after each.

    Args:
        cfg: the run config.
        run_dir: the run's folder (checkpoint, config, plots).
        resume: continue from the checkpoint in ``run_dir``.
        tracker: a :class:`~yamblab.platform.tracking.Tracker` (the driver is the only writer), or None.
        progress: show a progress bar (a time-budgeted run shows its budget in minutes).
        cpus: the CPUs the run's actors may declare in all (a sweep trial's); default: the
            cluster's.
    """

    def __init__(self, cfg: RunConfig, run_dir: str | Path, resume: bool = False,
                 tracker=None, progress: bool = True, cpus: float | None = None):
        from yamblab.model.checkpoint import load_checkpoint

        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.tracker = tracker
        self.progress = progress
        self.iteration = 0
        self.games_played = 0
        self.history: list[dict] = []
        self.evals: list[dict] = []
        self.run_id: str | None = None
        self.started = time.time()
        self.elapsed_before = 0.0
        learner_state = buffer_state = None
        if resume:
            path = self.run_dir / CHECKPOINT
            if not path.exists():
                raise YamblabError(f"no checkpoint to resume from in {self.run_dir}")
            state = load_checkpoint(path)
            self.iteration = int(state["iteration"])
            self.games_played = int(state["games_played"])
            self.history = json.loads(state["history"])
            self.evals = json.loads(state["evals"])
            self.run_id = state.get("mlflow_run_id") or None
            self.elapsed_before = float(state.get("elapsed", 0.0))
            learner_state = state["learner"]
            buffer_state = _torch_to_np(state["buffer"])
            if buffer_state.get("data") == {}:
                buffer_state = None
        (self.run_dir / "config.yaml").write_text(cfg.to_yaml())
        self.backend = RayBackend(cfg, learner_state, buffer_state, cpus=cpus)
        if tracker is not None:
            self._start_tracking()

    # -- tracking
    def _start_tracking(self) -> None:
        from yamblab.platform.tracking import code_version

        if self.run_id:
            try:
                self.tracker.client.get_run(self.run_id)
                return
            except Exception:  # noqa: BLE001 - a lost run gets a new one
                self.run_id = None
        self.run_id = self.tracker.start_run(
            self.cfg.name, params=self.cfg.model_dump(mode="json"),
            tags={"yamblab.kind": "train", "yamblab.code_version": code_version(),
                  "yamblab.rules_hash": self.cfg.rules_obj.digest, "yamblab.preset": self.cfg.preset,
                  "yamblab.run_dir": str(self.run_dir)})
        self.tracker.log_text(self.run_id, self.cfg.to_yaml(), "config.yaml")

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + (time.time() - self.started)

    # -- one iteration
    def step(self) -> dict:
        """Run one iteration; returns its metrics (with ``eval.*`` on evaluation iterations)."""
        cfg, rt = self.cfg, self.cfg.runtime
        t0 = time.perf_counter()
        version, weights = self.backend.weights()
        n = cfg.train.games_per_iteration
        n_bot = int(round(cfg.train.bot_share_at(self.iteration) * n))
        jobs, first = [], self.games_played
        parts = max(1, self.backend.n_workers * rt.max_in_flight)
        for size in _chunks(n, parts):
            jobs.append({"n": size, "seed": cfg.train.seed, "first_game": first,
                         "n_bot": max(0, min(size, n_bot - (first - self.games_played)))})
            first += size
        t_play = time.perf_counter()
        stats = self.backend.play(version, weights, jobs)
        t_play = time.perf_counter() - t_play
        positions = sum(s["positions"] for s in stats)
        scores = [s["score_mean"] for s in stats if math.isfinite(s.get("score_mean", float("nan")))]
        t_train = time.perf_counter()
        metrics = {f"train.{k}": v for k, v in self.backend.train().items()}
        t_train = time.perf_counter() - t_train
        self.iteration += 1
        self.games_played += n
        metrics.update({
            "iteration": self.iteration, "games_played": self.games_played,
            "selfplay.score_mean": float(np.mean(scores)) if scores else float("nan"),
            "selfplay.positions": positions, "selfplay.positions_per_s": positions / max(t_play, 1e-9),
            "selfplay.games_per_s": n / max(t_play, 1e-9), "selfplay.seconds": t_play,
            "selfplay.bot_games": n_bot, "train.seconds": t_train,
            "buffer.positions": self.backend.buffer_size(), "workers.restarts": self.backend.restarts,
        })
        if self.iteration % rt.eval_every == 0 or self.iteration >= rt.iterations:
            v2, w2 = self.backend.weights()
            ev = self.backend.evaluate(v2, w2)
            metrics.update(ev["metrics"])
            self.evals.append({"iteration": self.iteration, "minutes": (self.elapsed) / 60.0,
                               "per_game_regret": np.round(ev["per_game_regret"], 6).tolist(),
                               "scores": ev["scores"].tolist(), "by_box": ev["by_box"],
                               "by_decision": ev["by_decision"], "loss": ev["loss"]})
        metrics["seconds"] = time.perf_counter() - t0
        metrics["minutes"] = self.elapsed / 60.0
        self.history.append(metrics)
        self.checkpoint()
        if self.tracker is not None:
            self.tracker.log_metrics(self.run_id, metrics, step=self.iteration)
        return metrics

    def checkpoint(self) -> Path:
        """Write the run's state atomically (see :func:`yamblab.model.checkpoint.save_checkpoint`)."""
        from yamblab.model.checkpoint import save_checkpoint

        learner_state, buffer_state = self.backend.state()
        payload = {
            "learner": learner_state, "buffer": _np_to_torch(buffer_state),
            "iteration": self.iteration, "games_played": self.games_played,
            "history": json.dumps(self.history), "evals": json.dumps(self.evals),
            "config": self.cfg.to_yaml(), "mlflow_run_id": self.run_id or "",
            "elapsed": self.elapsed,
            "model_config": learner_state["model_config"], "ema": learner_state["ema"],
            "model": learner_state["model"],
        }
        return save_checkpoint(self.run_dir / CHECKPOINT, payload)

    def done(self) -> bool:
        rt = self.cfg.runtime
        if self.iteration >= rt.iterations:
            return True
        return rt.time_budget_minutes is not None and self.elapsed / 60.0 >= rt.time_budget_minutes

    def run(self) -> list[dict]:
        """Iterate until done (iterations or time budget); returns the metrics history."""
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            budget = self.cfg.runtime.time_budget_minutes
            if budget is not None:     # a time-budgeted run shows its budget, not an ETA
                bar = tqdm(total=float(budget), initial=min(self.elapsed / 60.0, budget),
                           desc=f"{self.cfg.name} (budget {budget:g} min)",
                           bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:g} min {postfix}")
            else:
                bar = tqdm(total=self.cfg.runtime.iterations, initial=self.iteration, desc=self.cfg.name,
                           unit="it")
        try:
            while not self.done():
                m = self.step()
                if bar is not None:
                    post = {"pos/s": f"{m['selfplay.positions_per_s']:.0f}",
                            "loss": f"{m.get('train.total', float('nan')):.3f}"}
                    if "eval.regret_mean" in m:
                        post["regret"] = f"{m['eval.regret_mean']:.1f}"
                    elif "eval.vs_baseline_mean" in m:
                        post["vs bot"] = f"{m['eval.vs_baseline_mean']:+.0f}"
                    bar.set_postfix(post)
                    if self.cfg.runtime.time_budget_minutes is not None:
                        bar.n = min(self.elapsed / 60.0, float(self.cfg.runtime.time_budget_minutes))
                        bar.refresh()
                    else:
                        bar.update(1)
            if not self.evals or self.evals[-1]["iteration"] != self.iteration:
                v, w = self.backend.weights()
                ev = self.backend.evaluate(v, w)
                self.history[-1].update(ev["metrics"])
                self.evals.append({"iteration": self.iteration, "minutes": self.elapsed / 60.0,
                                   "per_game_regret": np.round(ev["per_game_regret"], 6).tolist(),
                                   "scores": ev["scores"].tolist(), "by_box": ev["by_box"],
                                   "by_decision": ev["by_decision"], "loss": ev["loss"]})
                self.checkpoint()
                if self.tracker is not None:
                    self.tracker.log_metrics(self.run_id, ev["metrics"], step=self.iteration)
        finally:
            if bar is not None:
                bar.close()
        return self.history

    def finish(self, artifact_dir: Path | None = None) -> dict:
        """Plots and artifacts of the finished run (logged to MLflow when tracking).

        Returns:
            ``{"per_game_regret", "scores", "metrics", "files"}`` of the last evaluation.
        """
        from yamblab.platform import plots

        out_dir = Path(artifact_dir or self.run_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        last = self.evals[-1]
        files = [str(self.run_dir / CHECKPOINT), str(self.run_dir / "config.yaml")]
        table = self.backend.oracle_table()
        figs = {
            "learning_curve.png": plots.learning_curve(self.evals, self.history, last.get("loss", "regret")),
            "score_histogram.png": plots.score_histogram(np.array(last["scores"]), self.cfg, table),
        }
        if last["by_box"]:
            figs["regret_breakdown.png"] = plots.regret_breakdown(last["by_decision"], last["by_box"])
        for name, fig in figs.items():
            path = out_dir / name
            fig.savefig(path, dpi=110)
            plots.close(fig)
            files.append(str(path))
        summary = {k: v for k, v in self.history[-1].items() if isinstance(v, (int, float))}
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        files.append(str(out_dir / "summary.json"))
        if self.tracker is not None:
            for f in files:
                self.tracker.log_artifact(self.run_id, f)
            self.tracker.log_torch_model(self.run_id, self.backend.network())
            self.tracker.end_run(self.run_id)
        return {"per_game_regret": last["per_game_regret"], "loss": last.get("loss", "regret"),
                "scores": last["scores"],
                "metrics": summary, "files": files}

    def shutdown(self) -> None:
        self.backend.shutdown()
