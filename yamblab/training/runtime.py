"""The training driver: iterations of self-play, learning and evaluation, with checkpoints.

:class:`TrainingRun` is the one training loop of yamblab: ``yamblab train`` and every trial of
a sweep run it. It drives :class:`RayBackend`, the actors of :mod:`yamblab.actors.actors` on a
Ray cluster: self-play workers, the replay buffer, the learner (GPU when the cluster has one),
the evaluator and (Yahtzee) the oracle service. A sweep trial runs the same actors inside the
trial's placement group, so they stay within its declared CPUs.

Self-play and learning overlap: while the learner trains on samples drawn from the replay
buffer (``train.replay_ratio`` optimiser samples per new position), the workers already play
the next iterations' games with the newest weights they were given, at most
``runtime.max_policy_lag`` weight versions behind (0: the serial loop). Evaluations run on the
evaluator actor beside the loop. The actors' CPUs default to a split of what the run may use
(:func:`~yamblab.training.config.resolve_resources`), printed when a run starts.

A checkpoint (learner, EMA, optimiser, replay buffer, iteration and game counters, metrics
history) is written atomically between iterations, every ``runtime.checkpoint_minutes`` (0:
after every iteration) and after the last one, so a killed driver resumes where the checkpoint
stopped: same iteration count, buffer restored, no game counted twice (the games of the
batches that were playing ahead are played again, with the same dice). The replay buffer's
positions sit beside ``checkpoint.pt`` in segment files of ``RUN/replay/``, each checkpoint
appending the positions added since the one before (:meth:`TrainingRun.checkpoint`). Every file of the run
folder is written atomically: a write that meets a full disk raises
:class:`~yamblab.errors.DiskFullError` naming the file, and the last checkpoint written whole
stays as it was (:attr:`TrainingRun.checkpointed` says its iteration).
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import numpy as np

from yamblab.atomic import atomic_write
from yamblab.errors import ConfigError, YamblabError
from yamblab.oracle.registry import has_table
from yamblab.actors.devices import in_process_device
from yamblab.training.config import Resources, RunConfig, RuntimeConfig, learner_gpus, resolve_resources
from yamblab.vocabulary import current_metrics

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


def _buffer_to_resume(state: dict, run_dir: Path) -> tuple[dict | None, tuple | None, list]:
    """How a run resumed from the checkpoint ``state`` gets its replay buffer:
    ``(buffer_state, replay, segments)``: the state the backend starts its buffer from (None: an
    empty buffer), ``(folder, buffer)`` whose segments are then streamed into it (None: none),
    and the run's own segments, which its next checkpoint appends to.

    A checkpoint names segments of ``RUN/replay/``; an older one holds the positions inside
    (``data``); one without positions (``keep_buffer=False``) gives an empty buffer. A branch's
    first checkpoint (``buffer_from``) takes its base's positions, read where the base keeps
    them (never written there), sampled with the branch's own generator.
    """
    from yamblab.actors.replay import REPLAY_DIR
    from yamblab.model.checkpoint import load_checkpoint

    buf, folder, own = _torch_to_np(state["buffer"]), run_dir / REPLAY_DIR, True
    if state.get("buffer_from") and not buf.get("data"):
        base = _torch_to_np(load_checkpoint(state["buffer_from"])["buffer"])
        buf = {**base, "rng": buf.get("rng", base["rng"])}
        folder, own = Path(state["buffer_from"]).parent / REPLAY_DIR, False
    if buf.get("segments"):
        start = {"capacity": buf["capacity"], "data": {}, "added": int(buf["added"]) - int(buf["size"]),
                 "rng": buf["rng"]}
        return start, (folder, buf), list(buf["segments"]) if own else []
    return (buf if buf.get("data") else None), None, []


def branch_record(iteration: int, games_played: int, positions_total: int) -> dict:
    """The history entry of a branch point (its evaluation's ``eval.*`` metrics join it):
    ``branch_point`` 1 marks it, so that only its evaluation is logged, not a training step."""
    return {"iteration": iteration, "games_played": games_played, "selfplay.positions_total": positions_total,
            "branch_point": 1.0, "seconds": 0.0, "minutes": 0.0}


def machine_description() -> str:
    """The machine in a few words (CPUs, their model, a GPU), for plots and run tags."""
    import os
    import platform

    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    gpu = ""
    try:
        import torch

        if torch.cuda.is_available():
            gpu = f", GPU {torch.cuda.get_device_name(0)}"
    except Exception:  # noqa: BLE001 - a description, never an error
        pass
    return f"{os.cpu_count()} CPUs{f' ({model})' if model else ''}{gpu}"


def oracle_build_seconds() -> float:
    """The machine's speed as a yardstick for wall times: seconds (float) that the exact Yahtzee
    oracle's table for the official rules takes to build on one thread (what
    ``benchmarks/oracle_build.py`` times), the faster of two builds after an untimed one (about
    3 s in all). One 2-core Intel Xeon VM took 0.78-1.00 s one morning and 0.64 s two hours
    later, so minutes from two runs compare only beside it."""
    from yamblab.oracle.yahtzee.table import timed_build

    timed_build(1)                          # untimed: the first pass warms caches and pages
    return min(timed_build(1) for _ in range(2))


# --------------------------------------------------------------------------- backend
def trial_bundles(rt: RuntimeConfig, cpus: float, gpu: bool) -> tuple[list[dict], str]:
    """The placement group of a sweep trial that may use ``cpus`` CPUs on a cluster with a GPU
    or without (``gpu``): its bundles and strategy.

    Without a GPU for the learner, one bundle of ``cpus`` on one node (``STRICT_PACK``). With
    one, the learner's bundle holds its GPU and CPUs and a second bundle the rest (``PACK``:
    together where a node has room for both, else the learner on a GPU node and the rest
    elsewhere); :func:`bundle_options` pins each actor to its bundle. Resources the trial cannot
    resolve give the CPU bundle: the trial's actor then fails with the reason, as before. A
    trial whose roles run in its own process (``runtime.actors: in_process``) asks Ray for no
    GPU (:func:`~yamblab.training.config.learner_gpus`): one CPU bundle.
    """
    cpu_only = ([{"CPU": float(cpus)}], "STRICT_PACK")
    gpus = learner_gpus(rt, gpu)
    if gpus <= 0:
        return cpu_only
    try:
        lr = resolve_resources(rt, cpus, gpu=gpu, trial=True).learner_cpus
    except ConfigError:
        return cpu_only
    rest = float(cpus) - lr
    bundles = [{"CPU": rest}] if rest > 1e-9 else []
    return bundles + [{"CPU": lr, "GPU": gpus}], "PACK"


def bundle_options(gpus: float) -> tuple[dict, dict]:
    """Ray options that place a run's actors in the bundles of the placement group it runs in
    (a sweep trial's, :func:`trial_bundles`): ``(cpu_actors, learner)``.

    When the group has a GPU bundle and the learner asks for a GPU, the learner goes to that
    bundle and the other actors to the CPU bundle, each pinned: left to any bundle, Ray may put
    a self-play worker in the GPU bundle, on the CPUs it holds for the learner, which would then
    wait for ever. Otherwise (a run of its own, a CPU-only trial) no options: the actors go
    where Ray puts them, inside the caller's placement group if there is one.
    """
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = ray.util.get_current_placement_group()
    if pg is None or gpus <= 0:
        return {}, {}
    specs = pg.bundle_specs
    gpu_at = next((i for i, b in enumerate(specs) if b.get("GPU", 0) > 0), None)
    cpu_at = next((i for i, b in enumerate(specs) if not b.get("GPU", 0)), None)
    if gpu_at is None:
        return {}, {}

    def at(i):
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)}

    return ({} if cpu_at is None else at(cpu_at)), at(gpu_at)


def check_cluster_gpus(res: Resources, have: float) -> None:
    """Refuse GPUs the cluster cannot give (a learner that would wait for ever).

    Raises:
        ConfigError: the roles ask for more GPUs than the cluster has, naming the settings.
    """
    if res.total_gpus > have + 1e-9:
        asked = {k: v for k, v in (("learner_gpus", res.learner_gpus), ("worker_gpus", res.worker_gpus),
                                   ("eval_gpus", res.eval_gpus)) if v}
        said = ", ".join(f"{k} {v:g}" + (f" x {res.workers} workers" if k == "worker_gpus" else "")
                         for k, v in asked.items())
        raise ConfigError(
            f"runtime asks Ray for {res.total_gpus:g} GPU(s) ({said}) but the Ray cluster has {have:g}: lower "
            f"runtime.{' / '.join(asked)}, or join a cluster with more GPUs")


def cluster_resources(cfg: RunConfig, cpus: float | None = None) -> Resources:
    """The resources of ``cfg``'s roles on the connected Ray cluster (``cpus``: a sweep trial's
    share; default the cluster's CPUs), or one line naming the settings the cluster cannot place
    (a role that would wait for ever).

    Raises:
        ConfigError: more CPUs or GPUs than the cluster (or the trial) has.
    """
    import ray

    from yamblab.actors.cluster import cluster_has_gpu

    have = ray.cluster_resources().get("CPU", 0) if cpus is None else float(cpus)
    try:
        res = resolve_resources(cfg.runtime, have, gpu=cluster_has_gpu(), trial=cpus is not None)
    except ConfigError as exc:
        where = "the Ray cluster" if cpus is None else "the trial"
        raise ConfigError(f"{exc} ({where} offers {have:g} CPUs)") from None
    check_cluster_gpus(res, ray.cluster_resources().get("GPU", 0.0))
    return res


def role_devices(reports: list[dict]) -> dict[str, str]:
    """``{"learner": ..., "self-play": ..., "evaluator": ...}`` from the roles' device reports
    (the workers' devices joined, e.g. ``"cuda"`` or ``"cpu"``)."""
    out: dict[str, list[str]] = {}
    for r in reports:
        role = "self-play" if r["role"].startswith("self-play") else r["role"]
        out.setdefault(role, [])
        if r["device"] not in out[role]:
            out[role].append(r["device"])
    return {k: "/".join(v) for k, v in out.items()}


def describe_devices(devices: dict[str, str]) -> str:
    """One line: each role's device."""
    return ", ".join(f"{role} on {dev}" for role, dev in devices.items())


def _with_resources(cfg: RunConfig, res: Resources) -> RunConfig:
    """``cfg`` with its roles' resources resolved to ``res`` (no ``"auto"`` left): what the
    roles are built with."""
    return cfg.model_copy(update={"runtime": cfg.runtime.model_copy(update={
        "workers": res.workers, "worker_cpus": res.worker_cpus, "learner_cpus": res.learner_cpus,
        "eval_cpus": res.eval_cpus, "learner_threads": res.learner_threads})})


class RayBackend:
    """The actors of a run on the Ray cluster (started by the caller).

    Args:
        cfg: the run config (it travels to the actors whole, with its ``"auto"`` resources
            resolved: :attr:`resources`).
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

        self.resources = res = cluster_resources(cfg, cpus)
        self.cfg = cfg = _with_resources(cfg, res)
        rt = cfg.runtime
        cls = remote_classes(cfg, res)
        cpu_at, gpu_at = bundle_options(res.learner_gpus)
        game = cfg.game_obj
        self.oracle = cls["oracle"].options(**cpu_at).remote(cfg.rules) if has_table(game) else None
        self.workers = [cls["worker"].options(**cpu_at).remote(cfg, i) for i in range(rt.workers)]
        self.buffer = cls["buffer"].options(**cpu_at).remote(rt.replay_positions, cfg.train.seed, buffer_state)
        self.learner = cls["learner"].options(**gpu_at).remote(cfg, learner_state)
        self.evaluator = cls["evaluator"].options(**cpu_at).remote(cfg, self.oracle)
        self.restarts = 0
        self.n_workers = rt.workers
        self._table = None
        self._next_worker = 0
        #: the device of each role (``{"learner": "cuda", "self-play": "cpu", "evaluator": "cpu"}``)
        self.devices = self._check_devices(ray.get([a.device_report.remote() for a in
                                                    [self.learner, *self.workers, self.evaluator]]))

    def _check_devices(self, reports: list[dict]) -> dict[str, str]:
        """The roles' devices from their reports; a role that may not run (a GPU its torch
        cannot use) stops the run here, before any training, with the reason.

        Raises:
            ConfigError: a role's device error.
        """
        bad = next((r for r in reports if r["error"]), None)
        if bad is not None:
            self.shutdown()
            raise ConfigError(bad["error"])
        return role_devices(reports)

    def weights(self):
        import ray

        return ray.get(self.learner.weights.remote())

    # -- self-play: a batch of jobs is submitted at once and collected later
    def submit(self, version, weights, jobs: list[dict]) -> list[dict]:
        """Start ``jobs`` on the workers (round robin); returns the in-flight batch."""
        batch = []
        for job in jobs:
            i = self._next_worker % len(self.workers)
            self._next_worker += 1
            batch.append(self._start(i, job, version, weights))
        return batch

    def _start(self, i: int, job: dict, version, weights) -> dict:
        s_ref, st_ref = self.workers[i].play.options(num_returns=2).remote(
            version, weights, job["n"], job["seed"], job["first_game"], job["n_bot"], job.get("value_target_mix"))
        return {"worker": i, "job": job, "samples": s_ref, "stats": st_ref, "version": version, "weights": weights}

    def collect(self, batch: list[dict]) -> list[dict]:
        """Wait for an in-flight batch and add its positions to the replay buffer in job order
        (so the buffer's content does not depend on which worker finished first); a job whose
        worker died is played again by the restarted worker (same seed and game numbers).

        Returns:
            the jobs' stats dicts, in job order.
        """
        import ray
        from ray.exceptions import RayActorError

        stats: list[dict | None] = [None] * len(batch)
        entries = list(batch)
        while True:
            ray.wait([e["stats"] for e in entries], num_returns=len(entries))
            retry = []
            for k, e in enumerate(entries):
                if stats[k] is not None:
                    continue
                try:
                    stats[k] = ray.get(e["stats"])
                except RayActorError as exc:
                    self.restarts += 1
                    log.warning("self-play worker %d died (%s); replaying its %d games", e["worker"],
                                exc.__class__.__name__, e["job"]["n"])
                    entries[k] = self._start(e["worker"], e["job"], e["version"], e["weights"])
                    retry.append(k)
            if not retry:
                break
        ray.get([self.buffer.add.remote(e["samples"]) for e in entries])   # actor calls run in order
        return stats

    # -- learning
    def start_training(self, new_positions: int, lr: float | None = None, policy_share: float | None = None):
        """Start the learner on ``replay_ratio × new_positions`` samples drawn from the buffer
        (that share of them among the decisions, None: uniformly), at learning rate ``lr``
        (None: unchanged); returns the call's reference (None when there is nothing to train
        on)."""
        n = self.cfg.train.samples_for(new_positions)
        if n == 0:
            return None
        draw = self.buffer.sample.remote(n, policy_share)
        return self.learner.train.remote(draw, lr)

    def buffer_size(self) -> int:
        import ray

        return ray.get(self.buffer.size.remote())

    def start_evaluation(self, version, weights, whole=True):
        """Start the evaluator on ``weights`` (every mode, or without ``whole`` the main mode
        and the exact regret only); returns the call's reference."""
        return self.evaluator.evaluate.remote(version, weights, whole)

    def ema_state(self) -> dict:
        """The EMA (playing) network's state_dict as last published by the learner (without
        fetching the replay buffer)."""
        from yamblab.actors.actors import weights_state

        return weights_state(self.weights()[1])

    def network(self):
        from yamblab.model.network import YambNet

        net = YambNet(self.cfg.model)
        net.load_state_dict(self.ema_state(), strict=True)
        return net.eval()

    def oracle_table(self):
        """The game's oracle table (Yahtzee's; None for a game no table solves)."""
        if self._table is None and has_table(self.cfg.game_obj):
            from yamblab.oracle.yahtzee.table import OracleTable

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

    def call(self, role, method: str, *args):
        """``role.method(*args)``'s value, waited for (``role``: one of the run's actors)."""
        return self.get(getattr(role, method).remote(*args))

    # -- the references the calls above return
    @staticmethod
    def get(ref):
        """The value of a call's reference (waits for it)."""
        import ray

        return ray.get(ref)

    @staticmethod
    def ready(ref) -> bool:
        """Whether a call's reference has its value (without waiting)."""
        import ray

        ready, _ = ray.wait([ref], timeout=0)
        return bool(ready)


class _Done:
    """A finished call's value, where :class:`RayBackend` would return an ObjectRef."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class InProcessBackend(RayBackend):
    """The roles of a run as plain objects in the driver's process (``runtime.actors:
    in_process``): one self-play worker, the replay buffer, the learner, the evaluator and
    (Yahtzee) the oracle service, called one after another, so the serial loop
    (``max_policy_lag: 0``) gives the numbers :class:`RayBackend` gives, without starting a
    process per role. Same interface; every call has finished when it returns.

    Args:
        cfg, learner_state, buffer_state: as for :class:`RayBackend`.
        cpus: the CPUs the run may use (torch's threads in this process); default: the
            machine's.

    Raises:
        ConfigError: the roles declare more CPUs than ``cpus``.
    """

    def __init__(self, cfg: RunConfig, learner_state: dict | None = None, buffer_state: dict | None = None,
                 cpus: float | None = None):
        import os

        import torch

        from yamblab.actors.actors import Evaluator, LearnerActor, OracleService, ReplayBufferActor, SelfPlayWorker

        have = float(cpus) if cpus is not None else float(os.cpu_count() or 1)
        device = in_process_device(cfg.runtime.learner_gpus)     # every role: the learner's device
        try:
            res = resolve_resources(cfg.runtime.model_copy(update={"workers": 1}), have, gpu=device == "cuda")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (the run offers {have:g} CPUs)") from None
        self.resources = res
        self.cfg = cfg = _with_resources(cfg, res)     # one worker: resolved with workers 1
        game = cfg.game_obj
        self.oracle = OracleService(cfg.rules) if has_table(game) else None
        self.workers = [SelfPlayWorker(cfg, 0, device=device)]
        self.buffer = ReplayBufferActor(cfg.runtime.replay_positions, cfg.train.seed, buffer_state)
        self.learner = LearnerActor(cfg, learner_state, device=device)
        self.evaluator = Evaluator(cfg, self.oracle, device=device)
        self.devices = role_devices([a.device_report() for a in [self.learner, *self.workers, self.evaluator]])
        torch.set_num_threads(Resources.threads(have))   # the roles take turns on the run's CPUs
        self.restarts = 0
        self.n_workers = 1
        self._table = None
        self._next_worker = 0

    def weights(self):
        return self.learner.weights(store=False)

    def _start(self, i: int, job: dict, version, weights) -> dict:
        samples, stats = self.workers[i].play(version, weights, job["n"], job["seed"], job["first_game"],
                                              job["n_bot"], job.get("value_target_mix"))
        return {"worker": i, "job": job, "samples": _Done(samples), "stats": _Done(stats), "version": version,
                "weights": weights}

    def collect(self, batch: list[dict]) -> list[dict]:
        for e in batch:
            self.buffer.add(e["samples"].value)
        return [e["stats"].value for e in batch]

    def start_training(self, new_positions: int, lr: float | None = None, policy_share: float | None = None):
        n = self.cfg.train.samples_for(new_positions)
        if n == 0:
            return None
        draw = self.buffer.sample(n, policy_share)
        return _Done(self.learner.train(draw, lr))

    def buffer_size(self) -> int:
        return self.buffer.size()

    def start_evaluation(self, version, weights, whole=True):
        return _Done(self.evaluator.evaluate(version, weights, whole))

    def oracle_table(self):
        return None if self.oracle is None else self.oracle.table

    def weight_loads(self) -> list[int]:
        return [w.weight_loads() for w in self.workers]

    def shutdown(self) -> None:
        self.workers, self.buffer, self.learner, self.evaluator, self.oracle = [], None, None, None, None

    def call(self, role, method: str, *args):
        return getattr(role, method)(*args)

    @staticmethod
    def get(ref):
        return ref.value

    @staticmethod
    def ready(ref) -> bool:
        return True


# --------------------------------------------------------------------------- the run
def warm_start_state(cfg: RunConfig) -> dict:
    """The learner state a new run starts from under ``train.init_from``: a new learner of
    ``cfg`` whose network and EMA hold the playing network of that checkpoint
    (:meth:`~yamblab.learners.learner.Learner.start_from`; a wider boundary head is widened
    without changing its values).

    Raises:
        YamblabError: no file there, a damaged checkpoint, one without a run config, one of
            another game or rules, or another network: any ``model`` setting but
            ``boundary_hidden`` different (``value_max`` too, which is in no weight but scales the
            value head), or a narrower boundary head.
    """
    import yaml

    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import load_checkpoint
    from yamblab.training.configio import validate

    path = Path(cfg.train.init_from)
    if not path.is_file():
        raise YamblabError(f"train.init_from: no checkpoint file at {path}")
    state = load_checkpoint(path)
    if "config" not in state or "ema" not in state:
        raise YamblabError(f"train.init_from: {path} holds no run config and network (is it a training checkpoint?)")
    theirs = validate(RunConfig, yaml.safe_load(state["config"]), str(path))
    mine, them = cfg.game_obj, theirs.game_obj
    if (cfg.game, mine.digest) != (theirs.game, them.digest):
        raise YamblabError(f"train.init_from: {path} learned {theirs.game} {them.label}; this run plays "
                           f"{cfg.game} {mine.label} (a network's values are worth nothing under other rules)")
    theirs_m, mine_m = theirs.model.model_dump(), cfg.model.model_dump()
    differ = [k for k in mine_m if k != "boundary_hidden" and theirs_m.get(k) != mine_m[k]]
    if differ:
        raise YamblabError(f"train.init_from: {path} is another network: " + ", ".join(
            f"model.{k} {theirs_m.get(k)!r} there, {mine_m[k]!r} here" for k in differ)
            + " (only model.boundary_hidden may differ, and only grow)")
    if mine_m["boundary_hidden"] < theirs_m["boundary_hidden"]:
        raise YamblabError(f"train.init_from: {path} has a boundary head of {theirs_m['boundary_hidden']} units; "
                           f"model.boundary_hidden {mine_m['boundary_hidden']} would drop some (it may only grow)")
    learner = Learner(cfg.model, cfg.train)
    learner.start_from(state["ema"], f"train.init_from {path}")
    return learner.state_dict()


class TrainingRun:
    """Iterations of self-play, learning and evaluation with a checkpoint after each.

    Args:
        cfg: the run config.
        run_dir: the run's folder (checkpoint, config, plots).
        resume: continue from the checkpoint in ``run_dir``.
        tracker: a :class:`~yamblab.training.tracking.Tracker` (the driver is the only writer), or None.
        progress: show a progress bar (a time-budgeted run shows its budget in minutes).
        cpus: the CPUs the run's actors may declare in all (a sweep trial's); default: the
            cluster's.
        parent_run_id, tags: the MLflow run this run's own is a child of (a branched sweep's
            base), and further tags of its run.
        time_machine: time the machine (:func:`oracle_build_seconds`, about 3 s) before any
            actor starts and again in :meth:`finish`, into :attr:`machine`
            (``machine.oracle_seconds_start`` and ``_end``), which the summary and MLflow
            carry beside the run's minutes: a shared VM's speed moves between runs.
        warm_state: a new run under ``train.init_from``: the learner state
            :func:`warm_start_state` already made of it (the CLI makes it before the run
            folder); None makes it here. Ignored on resume.

    A checkpoint written by :func:`~yamblab.sweeps.branch.branch_checkpoint` (a branched
    sweep's trial) carries on from its base's state; the run first evaluates its network at
    the branch point, so its curve starts where the base ended.
    """

    def __init__(self, cfg: RunConfig, run_dir: str | Path, resume: bool = False,
                 tracker=None, progress: bool = True, cpus: float | None = None,
                 parent_run_id: str | None = None, tags: dict | None = None, time_machine: bool = False,
                 warm_state: dict | None = None):
        from yamblab.model.checkpoint import load_checkpoint

        if not resume and cfg.train.init_from is not None and warm_state is None:
            warm_state = warm_start_state(cfg)       # before the run folder: a bad checkpoint is one line

        #: the machine's speed before the run (and after it, once :meth:`finish` ran), seconds
        self.machine: dict[str, float] = {"machine.oracle_seconds_start": oracle_build_seconds()} if time_machine else {}

        if cfg.runtime.learner_compile:
            import torch

            from yamblab.learners.learner import check_compile_toolchain

            # before the run folder or any actor: a missing compiler is one clear line
            check_compile_toolchain("cuda" if torch.cuda.is_available() else "cpu")
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
        self.last_eval: dict | None = None
        self._inflight: dict[int, tuple[int, list]] = {}    # batch -> (weights' iteration, jobs)
        self._pending_eval: list[dict] = []
        self._eval_owed: str | None = None   # an evaluation due while the evaluator was busy: its kind
        self._positions_total = 0
        self._steps_total = 0
        self._samples_total = 0
        self._last_checkpoint = time.time()
        self._parent_run_id, self._tags = parent_run_id, dict(tags or {})
        #: whether the last checkpoint (:meth:`run`'s) keeps the replay buffer (a sweep trial's
        #: need not: a finished trial is never carried on)
        self.keep_buffer_at_end = True
        self.branch_iteration: int | None = None
        self._branch_eval_due = False
        learner_state = buffer_state = replay = None
        #: the segments of RUN/replay/ that the last checkpoint names (its next one appends to them)
        self._segments: list[dict] = []
        if resume:
            path = self.run_dir / CHECKPOINT
            if not path.exists():
                raise YamblabError(f"no checkpoint to resume from in {self.run_dir}")
            state = load_checkpoint(path)
            self.iteration = int(state["iteration"])
            self.games_played = int(state["games_played"])
            # metric names of earlier versions renamed: the curve goes on under today's name
            self.history = [current_metrics(h) for h in json.loads(state["history"])]
            self.evals = json.loads(state["evals"])
            self.run_id = state.get("mlflow_run_id") or None
            self.elapsed_before = float(state.get("elapsed", 0.0))
            learner_state = state["learner"]
            self._positions_total = int(state.get("positions_total", 0))
            self._steps_total = int(learner_state.get("steps", 0))
            self._samples_total = int(learner_state.get("samples_trained", 0))
            if self.evals:
                self.last_eval = next((h for h in reversed(self.history) if "eval.score_mean" in h), None)
            buffer_state, replay, self._segments = _buffer_to_resume(state, self.run_dir)
            if "branch_iteration" in state:
                self.branch_iteration = int(state["branch_iteration"])
                self._branch_eval_due = bool(state.get("branch_eval_due")) and not self.evals
        elif cfg.train.init_from is not None:
            learner_state = warm_state
        #: the iteration of the last checkpoint written whole (None: none yet)
        self.checkpointed: int | None = self.iteration if resume else None
        atomic_write(self.run_dir / "config.yaml", cfg.to_yaml().encode())
        backend = InProcessBackend if cfg.runtime.actors == "in_process" else RayBackend
        self.backend = backend(cfg, learner_state, buffer_state, cpus=cpus)
        if replay is not None:
            self._load_replay(*replay)
        self.started = time.time()      # the run's clock starts once its roles are up and its buffer loaded
        if tracker is not None:
            try:
                self._start_tracking()
            except KeyboardInterrupt:
                # Ctrl-C (or SIGTERM through `yamblab train`) while the run is being created or its
                # history sent: the caller never gets this object, so the MLflow run is ended here
                if self.run_id:
                    self.tracker.end_run(self.run_id, "KILLED")
                raise

    # -- tracking
    def _start_tracking(self) -> None:
        """The run's MLflow run: the one its checkpoint names, else the unfinished one tagged with
        its folder (a driver killed before its first checkpoint made it), else a new one. Either
        gets what it lacks of the checkpoint's history (the tracker sends only the steps the
        store does not have; a new run for a resumed checkpoint, whose own run the store lost,
        gets all of it)."""
        from yamblab.training.tracking import code_version

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
                self._log_history()
                return
        self.run_id = self.tracker.start_run(
            self.cfg.name, params=self.cfg.model_dump(mode="json"),
            tags={"yamblab.kind": "train", "yamblab.code_version": code_version(),
                  "yamblab.resources": self.backend.resources.describe(), "yamblab.machine": machine_description(),
                  "yamblab.devices": describe_devices(self.backend.devices),
                  "yamblab.rules_hash": self.cfg.rules_obj.digest, "yamblab.preset": self.cfg.preset,
                  "yamblab.run_dir": where, **self._tags},
            parent_run_id=self._parent_run_id)
        self.tracker.log_text(self.run_id, self.cfg.to_yaml(), "config.yaml")
        self._log_history()

    def _log_history(self) -> None:
        """Log the history's metrics as :meth:`step` and the evaluations do (what the store has
        already is not sent again)."""
        for h in self.history:
            nums = {k: v for k, v in h.items() if isinstance(v, (int, float))}
            self._log(nums, int(h["iteration"]))

    def _log(self, metrics: dict, step: int) -> None:
        """Log an iteration's metrics at ``step``: its training figures, then its evaluation's
        (``eval.*``) if it has one."""
        if self.tracker is None:
            return
        train = {k: v for k, v in metrics.items() if not k.startswith("eval.")}
        evals = {k: v for k, v in metrics.items() if k.startswith("eval.")}
        for part in (train, evals):
            if part:
                self.tracker.log_metrics(self.run_id, part, step=step)

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + (time.time() - self.started)

    # -- one iteration
    def _jobs(self, j: int) -> list[dict]:
        """The self-play jobs of batch ``j`` (0-based: the games of iteration ``j + 1``):
        game numbers ``j × games_per_iteration`` onwards, so a batch replayed after a crash or
        a resume plays the same games and none is counted twice. Their value targets take λ
        (``train.value_target_mix``) where the run's clock stands when they start."""
        cfg, rt = self.cfg, self.backend.cfg.runtime
        n = cfg.train.games_per_iteration
        n_bot = int(round(cfg.train.bot_share_at(j) * n))
        mix = cfg.train.value_target_mix_at(self.progress_fraction())
        jobs, first = [], j * n
        for size in _chunks(n, max(1, self.backend.n_workers * rt.max_in_flight)):
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

    def step(self) -> dict:
        """Run one iteration; returns its metrics.

        An iteration collects its batch of self-play games (played ahead of the learner by at
        most ``runtime.max_policy_lag`` weight versions, while the learner trained), trains on
        ``replay_ratio`` samples per new position drawn from the replay buffer while the next
        batches play, and publishes the new weights. Evaluations run on the evaluator while the
        loop goes on and are recorded when they finish (``eval.*`` metrics at the iteration
        whose weights they graded).
        """
        if self._branch_eval_due:
            self.evaluate_branch_point()
        cfg, rt = self.cfg, self.cfg.runtime
        t0 = time.perf_counter()
        k = self.iteration
        # this iteration's batch (the first iteration's, or the serial loop's) and the batches that
        # play ahead of the learner: all with the weights of k trainings, the same ones they would
        # get once this batch is in (nothing trains in between), so the first iteration's games
        # are not played one batch after another
        self._submit(range(k, k + 1 + rt.max_policy_lag), trainings=k)
        weights_trainings, batch = self._inflight.pop(k)
        t_wait = time.perf_counter()
        stats = self.backend.collect(batch)
        t_wait = time.perf_counter() - t_wait
        n = cfg.train.games_per_iteration
        positions = sum(s["positions"] for s in stats)
        play_busy = sum(s.get("busy_seconds", 0.0) for s in stats)
        scores = [s["score_mean"] for s in stats if math.isfinite(s.get("score_mean", float("nan")))]
        self._positions_total += positions
        # the batches submitted above play while the learner trains: batch j is trained on at
        # iteration j, max_policy_lag trainings after the weights it played with
        self.iteration += 1
        t_train = time.perf_counter()
        progress = self.progress_fraction()
        share = cfg.train.policy_share_at(progress)
        ref = self.backend.start_training(positions, cfg.train.lr_at(progress), share)
        train = {} if ref is None else self.backend.get(ref)
        t_train = time.perf_counter() - t_train
        self.games_played += n
        metrics = {f"train.{k}": v for k, v in train.items()}
        self._steps_total = int(train.get("steps", self._steps_total))
        self._samples_total = int(train.get("samples_total", self._samples_total))
        wall = time.perf_counter() - t0
        metrics.update({
            "iteration": self.iteration, "games_played": self.games_played,
            "selfplay.score_mean": float(np.mean(scores)) if scores else float("nan"),
            "selfplay.positions": positions, "selfplay.positions_total": self._positions_total,
            "selfplay.positions_per_s": positions / max(play_busy, 1e-9),
            "selfplay.games_per_s": n / max(play_busy, 1e-9), "selfplay.busy_seconds": play_busy,
            "selfplay.bot_games": int(round(cfg.train.bot_share_at(self.iteration - 1) * n)),
            "selfplay.policy_lag": k - weights_trainings,
            **({"selfplay.value_target_mix": float(batch[0]["job"]["value_target_mix"])}
               if cfg.train.value_target_mix_final is not None and batch else {}),
            **({"train.policy_share": float(share)} if cfg.train.policy_share_final is not None else {}),
            "train.samples_per_s": train.get("samples", 0.0) / max(train.get("seconds", 0.0), 1e-9),
            "time.wait_selfplay": t_wait, "time.wait_learner": t_train,
            "utilisation.selfplay": play_busy / max(wall * self.backend.n_workers, 1e-9),
            "utilisation.learner": train.get("seconds", 0.0) / max(wall, 1e-9),
            "buffer.positions": self.backend.buffer_size(), "workers.restarts": self.backend.restarts,
        })
        metrics["seconds"] = time.perf_counter() - t0
        metrics["minutes"] = self.elapsed / 60.0
        self.history.append(metrics)
        # a branched run counts its evaluations from the branch point
        due = rt.evaluation_due(self.iteration, since=self.branch_iteration or 0)
        if due is not None and self._eval_owed != "full":
            self._eval_owed = due
        if self._eval_owed:
            # one evaluation at a time: while the evaluator is still busy with an earlier one,
            # a due evaluation waits for the first iteration after it finishes (evaluations
            # never queue up behind a slow evaluator, nor steal more of the machine)
            self._poll_evaluations(block=False)
            if not self._pending_eval or self.iteration >= rt.iterations:
                self._start_evaluation(whole=self._eval_owed == "full")
                self._eval_owed = None
        # the serial loop (lag 0) waits for its evaluation, so the iteration's metrics carry it
        self._poll_evaluations(block=rt.max_policy_lag == 0)
        if self._checkpoint_due():
            self.checkpoint()
        # after the checkpoint: a driver killed in between logs it on resume, from the history
        # (the evaluations were logged as they finished)
        self._log({k: v for k, v in metrics.items() if not k.startswith("eval.")}, self.iteration)
        return metrics

    def evaluate_branch_point(self) -> dict:
        """Evaluate the network a branched run starts from, at the branch's iteration (before
        any training of its own), and record it as the first entry of its history.

        Returns:
            the evaluation's metrics.
        """
        self._branch_eval_due = False
        record = branch_record(self.iteration, self.games_played, self._positions_total)
        self.history.append(record)
        self._start_evaluation()
        self._poll_evaluations(block=True)
        self._log({k: v for k, v in record.items() if isinstance(v, (int, float)) and not k.startswith("eval.")},
                  self.iteration)
        return record

    # -- evaluations run beside the loop
    def _start_evaluation(self, whole: bool = True) -> None:
        """Start an evaluation of the current weights: ``whole`` grades every mode, else the
        main mode and the exact regret only (``runtime.eval_early``'s evaluations)."""
        if self._pending_eval and self._pending_eval[-1]["iteration"] == self.iteration \
                and (self._pending_eval[-1]["whole"] or not whole):
            return
        version, weights = self.backend.weights()
        if self.cfg.runtime.snapshots:
            self._snapshot(weights)
        self._pending_eval.append({
            "ref": self.backend.start_evaluation(version, weights, whole), "iteration": self.iteration, "whole": whole,
            "minutes": self.elapsed / 60.0, "positions": self._positions_total, "steps": self._steps_total,
            "samples": self._samples_total, "games_played": self.games_played})

    def _snapshot(self, weights) -> Path:
        """Keep the weights an evaluation grades as ``RUN/snapshots/iteration-NNNNNN.pt``
        (``runtime.snapshots``): the network (as ``ema`` and ``model``, for
        :func:`~yamblab.model.checkpoint.load_network`), its config and where the run stood."""
        from yamblab.actors.actors import weights_state
        from yamblab.model.checkpoint import save_checkpoint

        state = weights_state(weights)
        payload = {"model_config": self.cfg.model.model_dump(), "ema": state, "model": state,
                   "iteration": self.iteration, "minutes": self.elapsed / 60.0,
                   "positions_total": self._positions_total, "config": self.cfg.to_yaml()}
        return save_checkpoint(self.run_dir / "snapshots" / f"iteration-{self.iteration:06d}.pt", payload)

    def _poll_evaluations(self, block: bool) -> list[dict]:
        """Record the evaluations that finished (all of them with ``block``); returns them."""
        done = []
        while self._pending_eval:
            head = self._pending_eval[0]
            if not block and not self.backend.ready(head["ref"]):
                break
            ev = self.backend.get(head["ref"])
            self._pending_eval.pop(0)
            behind = {"eval.iteration": head["iteration"], "eval.minutes": head["minutes"],
                      "eval.selfplay_positions": head["positions"], "eval.optimiser_steps": head["steps"],
                      "eval.samples_trained": head["samples"], "eval.games_played": head["games_played"]}
            ev["metrics"].update(behind)
            for h in self.history:
                if h["iteration"] == head["iteration"]:
                    h.update(ev["metrics"])
            self.evals.append({"iteration": head["iteration"], "whole": head["whole"], "minutes": head["minutes"],
                               "positions": head["positions"], "steps": head["steps"], "samples": head["samples"],
                               "per_game_regret": np.round(ev["per_game_regret"], 6).tolist(),
                               "scores": ev["scores"].tolist(), "by_box": ev["by_box"],
                               "by_decision": ev["by_decision"], "loss": ev["loss"], "mode": ev.get("mode"),
                               "modes": {k: {"per_game_regret": np.round(v["per_game_regret"], 6).tolist(),
                                             "loss": v["loss"]} for k, v in ev.get("modes", {}).items()}})
            self._log({k: v for k, v in ev["metrics"].items() if isinstance(v, (int, float))}, head["iteration"])
            self.last_eval = ev["metrics"]
            done.append(ev["metrics"])
        return done

    def _checkpoint_due(self) -> bool:
        every = self.cfg.runtime.checkpoint_minutes
        return every <= 0 or time.time() - self._last_checkpoint >= every * 60.0

    def checkpoint(self, keep_buffer: bool = True) -> Path:
        """Write the run's state atomically (see :func:`yamblab.model.checkpoint.save_checkpoint`).

        Written between iterations: the learner's state after the last iteration's training,
        the buffer, the counters and every evaluation recorded so far (an evaluation still
        running is not in it; the batches of games playing ahead are played again on resume).

        The buffer's positions go to segment files in ``RUN/replay/`` first: the positions
        added since the last checkpoint, fetched a chunk at a time
        (:func:`~yamblab.actors.replay.save_replay`); then ``checkpoint.pt`` names the segments
        that hold the ring's positions; then the segments it no longer names are deleted. A kill
        between any two of these writes leaves the last checkpoint and its segments whole.

        Args:
            keep_buffer: False leaves the replay buffer's positions out (a finished sweep
                trial's checkpoint; its segments are deleted; a run resumed from it starts with
                an empty buffer).

        Raises:
            DiskFullError: no space left to write it; the checkpoint before stays whole.
        """
        from yamblab.actors.replay import REPLAY_DIR, clean_replay, save_replay
        from yamblab.model.checkpoint import save_checkpoint

        backend, folder = self.backend, self.run_dir / REPLAY_DIR
        learner_state = backend.call(backend.learner, "state_dict")
        buffer_state = backend.call(backend.buffer, "state_dict", False)
        segments = save_replay(folder, buffer_state, self._segments,
                               lambda first, n: backend.call(backend.buffer, "positions", first, n)
                               ) if keep_buffer else []
        payload = {
            "learner": learner_state, "buffer": {**buffer_state, "segments": segments},
            "iteration": self.iteration, "games_played": self.games_played,
            "positions_total": self._positions_total,
            "history": json.dumps(self.history), "evals": json.dumps(self.evals),
            "config": self.cfg.to_yaml(), "mlflow_run_id": self.run_id or "",
            "elapsed": self.elapsed,
            "model_config": learner_state["model_config"], "ema": learner_state["ema"],
            "model": learner_state["model"],
        }
        if self.branch_iteration is not None:
            payload["branch_iteration"] = self.branch_iteration
        self._last_checkpoint = time.time()
        path = save_checkpoint(self.run_dir / CHECKPOINT, payload)
        self._segments = segments
        clean_replay(folder, segments)
        self.checkpointed = self.iteration
        return path

    def _load_replay(self, folder: Path, buffer: dict) -> None:
        """Stream the segments a checkpoint's ``buffer`` names, in ``folder``, into the buffer
        the backend started from its small state. The driver reads them and sends them a chunk
        at a time (so a buffer actor on another node of a cluster gets them too).

        Raises:
            DamagedFileError: a segment missing or damaged (named); the backend is shut down.
        """
        from yamblab.actors.replay import load_replay

        backend = self.backend
        try:
            load_replay(folder, buffer, lambda part: backend.call(backend.buffer, "add", part))
        except BaseException:
            backend.shutdown()
            raise

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
            # the run ends on a whole evaluation of its last weights (an early one of the same
            # iteration, runtime.eval_early, lacks the other modes the summary reports; one
            # still running is not whole either, and _start_evaluation adds the whole one)
            if self.iteration > 0 and not any(e["iteration"] == self.iteration and e.get("whole", True) for e in self.evals):
                self._start_evaluation()
            self._poll_evaluations(block=True)
            self.checkpoint(keep_buffer=self.keep_buffer_at_end)
        finally:
            if bar is not None:
                bar.close()
        return self.history

    def finish(self, artifact_dir: Path | None = None) -> dict:
        """Plots and artifacts of the finished run (logged to MLflow when tracking); a run made
        with ``time_machine`` first times the machine again (:attr:`machine`) and writes both
        figures into the summary, logged beside it.

        Args:
            artifact_dir: where the plots and ``summary.json`` go (default: the run folder).

        Returns:
            ``{"per_game_regret", "scores", "metrics", "files"}`` of the last evaluation.
        """
        from yamblab.training import plots

        if self.machine:
            self.machine["machine.oracle_seconds_end"] = oracle_build_seconds()
        out_dir = Path(artifact_dir or self.run_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        last = self.evals[-1]
        files = [str(self.run_dir / CHECKPOINT), str(self.run_dir / "config.yaml")]
        table = self.backend.oracle_table()
        figs = {
            "learning_curve.png": plots.learning_curve(self.evals, self.history, last.get("loss", "regret"),
                                                       machine=machine_description()),
            "score_histogram.png": plots.score_histogram(np.array(last["scores"]), self.cfg, table),
        }
        if last["by_box"]:
            figs["regret_breakdown.png"] = plots.regret_breakdown(last["by_decision"], last["by_box"])
        for name, fig in figs.items():
            files.append(str(plots.save_png(fig, out_dir / name)))
        from yamblab.training.summary import run_summary

        # what the run reached, and the machine's speed beside it: summary.json and MLflow both
        end_figures = {**run_summary(self.evals), **self.machine}
        summary = {**{k: v for k, v in self.history[-1].items() if isinstance(v, (int, float))}, **end_figures}
        atomic_write(out_dir / "summary.json", json.dumps(summary, indent=2).encode())
        files.append(str(out_dir / "summary.json"))
        if self.tracker is not None:
            for f in files:
                if Path(f).name != CHECKPOINT:     # the resumable checkpoint stays in the run folder
                    self.tracker.log_artifact(self.run_id, f)
            if end_figures:
                self.tracker.log_metrics(self.run_id, end_figures, step=self.iteration)
            self.tracker.log_torch_model(self.run_id, self.backend.network())
            self.tracker.end_run(self.run_id)
        return {"per_game_regret": last["per_game_regret"], "loss": last.get("loss", "regret"),
                "modes": last.get("modes", {}),
                "scores": last["scores"],
                "metrics": summary, "files": files}

    def shutdown(self) -> None:
        self.backend.shutdown()
