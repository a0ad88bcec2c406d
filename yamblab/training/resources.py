"""A run's roles' resources resolved: the CPUs, GPUs and threads of the self-play workers, the
learner and the evaluator, from :class:`~yamblab.training.config.RuntimeConfig`'s settings (where
``"auto"`` splits what the run may use) and whether the cluster has a GPU."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from yamblab.errors import ConfigError
from yamblab.training.config import RuntimeConfig


class Resources(BaseModel):
    """The actors' resources of a run, resolved from :class:`RuntimeConfig` (no ``"auto"`` left).

    Attributes:
        workers, worker_cpus, learner_cpus, eval_cpus: as in :class:`RuntimeConfig`.
        learner_gpu: whether the learner takes a GPU.
        learner_gpus, worker_gpus, eval_gpus: the GPUs (or shares of one) each role asks Ray
            for: the learner, each self-play worker, the evaluator.
        learner_threads: the learner's torch threads.
        cpus: the CPUs the run may use (the cluster's, or a sweep trial's).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int
    worker_cpus: float
    learner_cpus: float
    eval_cpus: float
    learner_gpu: bool
    learner_gpus: float = 0.0
    worker_gpus: float = 0.0
    eval_gpus: float = 0.0
    learner_threads: int = 1
    cpus: float

    @property
    def total(self) -> float:
        """CPUs the actors declare in all."""
        return self.workers * self.worker_cpus + self.learner_cpus + self.eval_cpus

    @property
    def total_gpus(self) -> float:
        """GPUs the actors ask for in all."""
        return self.learner_gpus + self.workers * self.worker_gpus + self.eval_gpus

    @staticmethod
    def threads(cpus: float) -> int:
        """Torch threads of an actor that declares ``cpus``: rounded, at least one."""
        return max(1, int(round(cpus)))

    def describe(self) -> str:
        """One line for the start of a run."""
        return (f"{self.workers} self-play worker{'s' if self.workers != 1 else ''} x {self.worker_cpus:g} CPU "
                f"({self.threads(self.worker_cpus)} torch thread{'s' if self.threads(self.worker_cpus) != 1 else ''} each), "
                f"learner {self.learner_cpus:g} CPU ({self.learner_threads} thread"
                f"{'s' if self.learner_threads != 1 else ''}{', GPU' if self.learner_gpu else ''}), "
                f"evaluator {self.eval_cpus:g} CPU; {self.total:g} of {self.cpus:g} CPUs declared"
                + (f"; GPU shares: learner {self.learner_gpus:g}, each worker {self.worker_gpus:g}, "
                   f"evaluator {self.eval_gpus:g}" if self.worker_gpus or self.eval_gpus else ""))


def learner_gpus(rt: RuntimeConfig, gpu: bool) -> float:
    """The GPUs the learner actor asks Ray for: ``runtime.learner_gpus``, ``"auto"`` being one
    when the cluster has a GPU (``gpu``); none when the roles run in the driver's process
    (``runtime.actors: in_process``: there is no learner actor)."""
    if rt.actors == "in_process":
        return 0.0
    if rt.learner_gpus == "auto":
        return 1.0 if gpu else 0.0
    return float(rt.learner_gpus)


def resolve_resources(rt: RuntimeConfig, cpus: float, gpu: bool, trial: bool = False) -> Resources:
    """Fill in the ``"auto"`` resources of ``rt`` for a run that may use ``cpus`` CPUs.

    The rule (explicit values are kept; ``"auto"`` ones share what is left):

    * evaluator: a quarter CPU on up to 4 CPUs (it runs now and then), else 1;
    * learner: with a GPU, 1 CPU to feed it; without, half the CPUs up to 4, less the
      evaluator's share (2 CPUs: 0.75, one torch thread; 8 CPUs: 3);
    * self-play workers: the rest, one worker per whole CPU (a single worker when less than
      two are left: 2 CPUs give one worker of 1 CPU);
    * GPUs: the learner's by :func:`learner_gpus`; ``worker_gpus: auto`` splits what the
      learner's share and the evaluator's leave of one GPU among the workers (none without a
      GPU or in a sweep trial, ``trial``, whose self-play runs in a CPU-only bundle).

    Raises:
        ConfigError: the explicit values leave no CPU for the workers, or declare more than
            ``cpus``; GPU shares for self-play or the evaluator in a sweep trial, or where
            the roles share the driver's process.
    """
    if trial and (rt.worker_gpus not in ("auto", 0) or rt.eval_gpus):
        raise ConfigError("runtime.worker_gpus / eval_gpus: a sweep trial plays and evaluates in its CPU-only bundle "
                          "(only its learner may take a GPU); set them to 0")
    if rt.actors == "in_process" and (rt.worker_gpus not in ("auto", 0) or rt.eval_gpus):
        raise ConfigError("runtime.worker_gpus / eval_gpus: with runtime.actors: in_process every role shares the "
                          "driver's process and follows runtime.learner_gpus; set them to 0")
    cpus = float(cpus)
    small = cpus <= 4
    ev = float(rt.eval_cpus) if rt.eval_cpus != "auto" else (0.25 if small else 1.0)
    if rt.learner_cpus != "auto":
        lr = float(rt.learner_cpus)
    elif gpu:
        lr = 1.0 if cpus >= 3 else max(0.25, (cpus - ev) / 2)
    else:
        lr = max(0.25, min(4.0, cpus / 2) - ev)
    rest = cpus - ev - lr
    if rt.workers != "auto" and rt.worker_cpus != "auto":
        workers, wc = int(rt.workers), float(rt.worker_cpus)
    elif rest <= 1e-9:
        raise ConfigError(
            f"runtime: the learner ({lr:g} CPU) and evaluator ({ev:g} CPU) leave no CPU for self-play "
            f"workers out of {cpus:g}; set runtime.workers and runtime.worker_cpus, or lower learner_cpus / eval_cpus")
    elif rt.workers != "auto":
        workers = int(rt.workers)
        wc = rest / workers
    elif rt.worker_cpus != "auto":
        wc = float(rt.worker_cpus)
        workers = max(1, int((rest + 1e-9) // wc))
    else:
        workers = max(1, int((rest + 1e-9) // 1)) if rest >= 2 else 1
        wc = rest / workers
    threads = Resources.threads(lr) if rt.learner_threads == "auto" else int(rt.learner_threads)
    lg = learner_gpus(rt, gpu)
    eg = float(rt.eval_gpus)
    if rt.worker_gpus == "auto":
        left = 1.0 - (lg % 1.0 if lg % 1.0 else (1.0 if lg else 0.0)) - eg
        wg = math.floor(left / workers * 1e4) / 1e4 if gpu and not trial and rt.actors == "ray" and left > 1e-9 else 0.0
    else:
        wg = float(rt.worker_gpus)
    res = Resources(workers=workers, worker_cpus=round(wc, 4), learner_cpus=lr, eval_cpus=ev, learner_threads=threads,
                    learner_gpu=gpu if rt.learner_gpus == "auto" else float(rt.learner_gpus) > 0, cpus=cpus,
                    learner_gpus=lg, worker_gpus=wg, eval_gpus=eg)
    if res.total > cpus + 1e-6:
        raise ConfigError(
            f"runtime declares {res.total:g} CPUs ({res.workers} workers x {res.worker_cpus:g} + learner "
            f"{res.learner_cpus:g} + evaluator {res.eval_cpus:g}) but the run may use {cpus:g}")
    return res
