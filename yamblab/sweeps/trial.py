"""The trial actor: :class:`TrialRunner` drives one trial's training run, an iteration at a time,
in a Ray actor that the sweep driver (:mod:`yamblab.sweeps.driver`) starts in the trial's
placement group.
"""

from __future__ import annotations

from pathlib import Path

from yamblab.sweeps.trials import TrialResult
from yamblab.training.config import RunConfig

#: a trial whose time budget is at least this many minutes times the machine's speed before and
#: after it (:func:`~yamblab.training.placement.oracle_build_seconds`, about 3 s each): its
#: minutes are among its figures, and a shared VM's speed moves within a sweep
MACHINE_SPEED_MIN_BUDGET = 5.0


def times_machine(config: RunConfig) -> bool:
    """Whether a trial of ``config`` measures the machine's speed before and after it (a time
    budget of at least :data:`MACHINE_SPEED_MIN_BUDGET` minutes)."""
    budget = config.runtime.time_budget_minutes
    return budget is not None and budget >= MACHINE_SPEED_MIN_BUDGET


class TrialRunner:
    """Drives one trial's training run, an iteration at a time (the body of a Ray trial actor).

    The run is the same :class:`~yamblab.training.runtime.TrainingRun` that ``yamblab train``
    drives, with the same actors (self-play workers, replay buffer, learner, evaluator, oracle
    service); the sweep starts this actor in the trial's placement group (one bundle of
    ``trial_cpus``, or, when the learner takes a GPU, a bundle for the learner with its GPU and
    one for the rest: :func:`~yamblab.training.placement.trial_bundles`) and the actors it creates
    are placed there too, so the trial stays within its declared CPUs.

    Args:
        config: the trial's run config (a validated ``RunConfig``, passed whole).
        run_dir: the trial's folder for its checkpoint.
        cpus: the trial's CPUs (its actors' declarations must fit).
        resume: continue from the checkpoint in ``run_dir`` if there is one (a trial whose node
            died, or whose driver was killed, carries on from its last finished iteration).
    """

    def __init__(self, config: RunConfig, run_dir: str, cpus: float, resume: bool = False):
        from yamblab.training.resume import CHECKPOINT
        from yamblab.training.runtime import TrainingRun

        resume = bool(resume) and (Path(run_dir) / CHECKPOINT).exists()
        self.run = TrainingRun(config, run_dir, resume=resume, progress=False, cpus=cpus,
                               time_machine=times_machine(config))
        self.resumed_from = self.run.iteration if resume else None
        self._weights_bytes: int | None = None
        self._store = None
        self._seen_evals = len(getattr(self.run, "evals", []))   # those of the checkpoint are logged

    def info(self) -> dict:
        """Where the trial runs and how far it is: ``node_id``, ``host``, ``pid``, ``iteration``
        (0 for a fresh run), ``resumed_from`` (the checkpoint's iteration, or None) and the
        ``history`` of per-iteration metrics the checkpoint holds."""
        import os
        import socket

        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid(), "iteration": self.run.iteration, "resumed_from": self.resumed_from,
                "history": list(self.run.history), "done": self.run.done()}

    def actors(self) -> dict:
        """The Ray actor ids of the trial's actors, by role (tests check they exist)."""
        b = self.run.backend
        ids = {"workers": [w._actor_id.hex() for w in b.workers], "learner": b.learner._actor_id.hex(),
               "evaluator": b.evaluator._actor_id.hex(), "buffer": b.buffer._actor_id.hex()}
        if b.oracle is not None:
            ids["oracle"] = b.oracle._actor_id.hex()
        return ids

    def _store_created_bytes(self) -> float | None:
        """Bytes created so far in this node's object store (None where Ray does not say)."""
        try:
            import ray
            from ray._private.internal_api import node_stats

            if self._store is None:
                me = ray.get_runtime_context().get_node_id()
                node = next(n for n in ray.nodes() if n["NodeID"] == me)
                self._store = (node["NodeManagerAddress"], node["NodeManagerPort"])
            reply = node_stats(*self._store, include_memory_info=False)
            return float(reply.store_stats.cumulative_created_bytes)
        except Exception:  # noqa: BLE001 - a private Ray API: the figure is optional
            return None

    def _weights_size(self) -> int:
        if self._weights_bytes is None:
            from yamblab.actors.actors import weights_state

            w = weights_state(self.run.backend.weights()[1])
            self._weights_bytes = int(sum(t.numel() * t.element_size() for t in w.values()))
        return self._weights_bytes

    def iteration(self) -> dict:
        """One self-play + learning iteration (evaluating when the config says so).

        Returns:
            metrics (floats), with ``eval.regret_mean`` on evaluation iterations, and the
            iteration's object-store traffic: ``traffic.weights_mb`` (one published version of
            the weights), ``traffic.weight_loads`` (how many times the self-play workers loaded
            weights in this iteration: once each per new version) and
            ``traffic.store_created_mb`` (everything created in this node's object store during
            the iteration: weights, self-play samples, the learner's batch, checkpoint state),
            with ``traffic.workers``.
        """
        loads0 = sum(self.run.backend.weight_loads())
        created0 = self._store_created_bytes()
        out = dict(self.run.step())
        out["done"] = self.run.done()        # iterations done, or the time budget spent
        out["late_evals"] = self._late_evals(int(out.get("iteration", self.run.iteration)))
        out["traffic.weight_loads"] = float(sum(self.run.backend.weight_loads()) - loads0)
        out["traffic.workers"] = float(len(self.run.backend.workers))
        out["traffic.weights_mb"] = self._weights_size() / 2**20
        created1 = self._store_created_bytes()
        if created0 is not None and created1 is not None:
            out["traffic.store_created_mb"] = (created1 - created0) / 2**20
        return out

    def _late_evals(self, current: int | None = None) -> list[dict]:
        """Evaluations that finished since the last call for earlier iterations (evaluations run
        beside the loop): their ``eval.*`` metrics with ``eval.iteration``, the step they
        belong to."""
        evals = getattr(self.run, "evals", [])
        seen = self._seen_evals
        self._seen_evals = len(evals)
        out = []
        for e in evals[seen:]:
            it = int(e["iteration"])
            if it == current:
                continue                      # already in this iteration's metrics
            h = next((h for h in self.run.history if h.get("iteration") == it), {})
            m = {k: v for k, v in h.items() if k.startswith("eval.") and isinstance(v, (int, float))}
            if m:
                out.append({**m, "eval.iteration": it})
        return out

    def finish(self) -> TrialResult:
        """Final evaluation if needed, plots and checkpoint; the trial's
        :class:`~yamblab.sweeps.trials.TrialResult` (a time-budgeted trial,
        :func:`times_machine`, has the machine's speed before and after it in its metrics).

        The resumable checkpoint stays in the trial's folder, without its replay buffer once
        the trial has finished (a finished trial is never carried on; the buffer is most of
        the file's size).
        """
        from yamblab.training.resume import CHECKPOINT

        self.run.keep_buffer_at_end = False
        self.run.run()   # evaluates the last iteration if it was not an evaluation iteration
        out = self.run.finish()
        return TrialResult(
            per_game_regret=list(map(float, out["per_game_regret"])), loss=out["loss"],
            modes={m: list(map(float, ev["per_game_regret"])) for m, ev in out["modes"].items()},
            scores=list(map(float, out["scores"])), metrics=out["metrics"],
            files={Path(f).name: Path(f).read_bytes() for f in out["files"] if Path(f).name != CHECKPOINT},
            network={"model_config": self.run.cfg.model.model_dump(), "ema": self.run.backend.ema_state()},
            late_evals=self._late_evals())
