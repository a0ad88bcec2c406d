"""Where a run's roles live: :class:`RayBackend` (actors on a Ray cluster) or
:class:`InProcessBackend` (plain objects in the driver's process), behind one small interface.

The roles are those of :mod:`yamblab.actors.actors`: self-play workers, the replay buffer, the
learner, the evaluator and, for a game with an oracle table, the oracle service. The training
loop (:class:`~yamblab.training.runtime.TrainingRun`) sees only :class:`Backend`'s methods:
calls that start work return a reference, :meth:`Backend.get` waits for its value and
:meth:`Backend.ready` asks without waiting.
"""

from __future__ import annotations

import logging

from yamblab.errors import ConfigError
from yamblab.oracle.registry import has_table, oracle_table, table_service_class
from yamblab.actors.devices import in_process_device
from yamblab.training.config import RunConfig
from yamblab.training.resources import Resources, resolve_resources
from yamblab.training.placement import bundle_options, cluster_resources, role_devices, with_resources

log = logging.getLogger(__name__)


class Backend:
    """What the training loop asks of a run's roles. A subclass builds the roles and sets
    :attr:`cfg` (resources resolved), :attr:`resources`, :attr:`devices` and the roles
    (``workers``, ``buffer``, ``learner``, ``evaluator``, ``oracle``)."""

    cfg: RunConfig
    resources: Resources
    #: the device of each role (``{"learner": "cuda", "self-play": "cpu", "evaluator": "cpu"}``)
    devices: dict[str, str]

    def __init__(self):
        self.restarts = 0               # self-play workers restarted after dying
        self._table = None
        self._next_worker = 0

    @property
    def n_workers(self) -> int:
        return len(self.workers)

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
        raise NotImplementedError

    def collect(self, batch: list[dict]) -> list[dict]:
        """Wait for an in-flight batch and add its positions to the replay buffer in job order;
        returns the jobs' stats dicts, in job order."""
        raise NotImplementedError

    # -- learning and evaluation
    def start_training(self, new_positions: int, lr: float | None = None, policy_share: float | None = None):
        """Start the learner on ``replay_ratio × new_positions`` samples drawn from the buffer
        (that share of them among the decisions, None: uniformly), at learning rate ``lr``
        (None: unchanged); returns the call's reference (None when there is nothing to train
        on)."""
        n = self.cfg.train.samples_for(new_positions)
        if n == 0:
            return None
        return self._train(n, policy_share, lr)

    def _train(self, n: int, policy_share, lr):
        raise NotImplementedError

    def start_evaluation(self, version, weights, whole=True):
        """Start the evaluator on ``weights`` (every mode, or without ``whole`` the main mode
        and the exact regret only); returns the call's reference."""
        return self._ref(self.evaluator, "evaluate", version, weights, whole)

    def weights(self):
        """``(version, weights)`` as the learner last published them."""
        return self.call(self.learner, "weights")

    def buffer_size(self) -> int:
        return self.call(self.buffer, "size")

    def weight_loads(self) -> list[int]:
        """How many times each worker loaded new weights."""
        return [self.call(w, "weight_loads") for w in self.workers]

    def ema_state(self) -> dict:
        """The EMA (playing) network's state_dict as last published by the learner (without
        fetching the replay buffer)."""
        from yamblab.actors.actors import weights_state

        return weights_state(self.weights()[1])

    def network(self):
        """The playing network, on the CPU, in eval mode."""
        from yamblab.model.network import YambNet

        net = YambNet(self.cfg.model)
        net.load_state_dict(self.ema_state(), strict=True)
        return net.eval()

    def oracle_table(self):
        """The game's oracle table (Yahtzee's; None for a game no table solves)."""
        if self._table is None:
            self._table = oracle_table(self.cfg.game_obj)
        return self._table

    def call(self, role, method: str, *args):
        """``role.method(*args)``'s value, waited for (``role``: one of the run's roles)."""
        return self.get(self._ref(role, method, *args))

    def _ref(self, role, method: str, *args):
        raise NotImplementedError

    def get(self, ref):
        """The value of a call's reference (waits for it)."""
        raise NotImplementedError

    def ready(self, ref) -> bool:
        """Whether a call's reference has its value (without waiting)."""
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError


class RayBackend(Backend):
    """The roles of a run as actors on the Ray cluster (started by the caller).

    Args:
        cfg: the run config (it travels to the actors whole, with its ``"auto"`` resources
            resolved: :attr:`resources`).
        learner_state, buffer_state: state to resume from.
        cpus: the CPUs this run may use (a sweep trial's ``trial_cpus``); default: the
            cluster's.

    Raises:
        ConfigError: the actors declare more CPUs than ``cpus`` (or the cluster) has, or a role
            may not run on the device it was given (named before any training).
    """

    def __init__(self, cfg: RunConfig, learner_state: dict | None = None, buffer_state: dict | None = None,
                 cpus: float | None = None):
        import ray

        from yamblab.actors.actors import remote_classes

        super().__init__()
        self.resources = res = cluster_resources(cfg, cpus)
        self.cfg = cfg = with_resources(cfg, res)
        rt = cfg.runtime
        cls = remote_classes(cfg, res)
        cpu_at, gpu_at = bundle_options(res.learner_gpus)
        self.oracle = cls["oracle"].options(**cpu_at).remote(cfg.game_obj) if "oracle" in cls else None
        self.workers = [cls["worker"].options(**cpu_at).remote(cfg, i) for i in range(rt.workers)]
        self.buffer = cls["buffer"].options(**cpu_at).remote(rt.replay_positions, cfg.train.seed, buffer_state)
        self.learner = cls["learner"].options(**gpu_at).remote(cfg, learner_state)
        self.evaluator = cls["evaluator"].options(**cpu_at).remote(cfg, self.oracle)
        reports = ray.get([a.device_report.remote() for a in [self.learner, *self.workers, self.evaluator]])
        bad = next((r for r in reports if r["error"]), None)
        if bad is not None:             # a GPU its torch cannot use: stop before any training
            self.shutdown()
            raise ConfigError(bad["error"])
        self.devices = role_devices(reports)

    def _start(self, i: int, job: dict, version, weights) -> dict:
        s_ref, st_ref = self.workers[i].play.options(num_returns=2).remote(
            version, weights, job["n"], job["seed"], job["first_game"], job["n_bot"], job.get("value_target_mix"))
        return {"worker": i, "job": job, "samples": s_ref, "stats": st_ref, "version": version, "weights": weights}

    def collect(self, batch: list[dict]) -> list[dict]:
        """As :meth:`Backend.collect`, the buffer's content not depending on which worker
        finished first; a job whose worker died is played again by the restarted worker (same
        seed and game numbers)."""
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

    def _train(self, n: int, policy_share, lr):
        return self.learner.train.remote(self.buffer.sample.remote(n, policy_share), lr)

    def _ref(self, role, method: str, *args):
        return getattr(role, method).remote(*args)

    def get(self, ref):
        import ray

        return ray.get(ref)

    def ready(self, ref) -> bool:
        import ray

        ready, _ = ray.wait([ref], timeout=0)
        return bool(ready)

    def shutdown(self) -> None:
        import ray

        for a in [*self.workers, self.buffer, self.learner, self.evaluator, self.oracle]:
            if a is not None:
                ray.kill(a)


class _Done:
    """A finished call's value, where :class:`RayBackend` would return an ObjectRef."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class InProcessBackend(Backend):
    """The roles of a run as plain objects in the driver's process (``runtime.actors:
    in_process``): one self-play worker, the replay buffer, the learner, the evaluator and the
    oracle service, called one after another, so the serial loop (``max_policy_lag: 0``) gives
    the numbers :class:`RayBackend` gives, without starting a process per role. Every call has
    finished when it returns.

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

        from yamblab.actors.actors import Evaluator, LearnerActor, ReplayBufferActor, SelfPlayWorker

        super().__init__()
        have = float(cpus) if cpus is not None else float(os.cpu_count() or 1)
        device = in_process_device(cfg.runtime.learner_gpus)     # every role: the learner's device
        try:
            res = resolve_resources(cfg.runtime.model_copy(update={"workers": 1}), have, gpu=device == "cuda")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (the run offers {have:g} CPUs)") from None
        self.resources = res
        self.cfg = cfg = with_resources(cfg, res)     # one worker: resolved with workers 1
        self.oracle = table_service_class(cfg.game_obj)(cfg.game_obj) if has_table(cfg.game_obj) else None
        self.workers = [SelfPlayWorker(cfg, 0, device=device)]
        self.buffer = ReplayBufferActor(cfg.runtime.replay_positions, cfg.train.seed, buffer_state)
        self.learner = LearnerActor(cfg, learner_state, device=device)
        self.evaluator = Evaluator(cfg, self.oracle, device=device)
        self.devices = role_devices([a.device_report() for a in [self.learner, *self.workers, self.evaluator]])
        torch.set_num_threads(Resources.threads(have))   # the roles take turns on the run's CPUs

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

    def _train(self, n: int, policy_share, lr):
        return _Done(self.learner.train(self.buffer.sample(n, policy_share), lr))

    def oracle_table(self):
        return None if self.oracle is None else self.oracle.table

    def _ref(self, role, method: str, *args):
        return _Done(getattr(role, method)(*args))

    def get(self, ref):
        return ref.value

    def ready(self, ref) -> bool:
        return True

    def shutdown(self) -> None:
        self.workers, self.buffer, self.learner, self.evaluator, self.oracle = [], None, None, None, None
