"""Which torch device each role of a run uses: the GPUs Ray assigned it, never torch's guess.

Ray (2.60 and later) no longer hides the GPUs from an actor given none, so
``torch.cuda.is_available()`` is true in every process of a GPU node. A role therefore takes
``cuda`` only when Ray assigned it a GPU (``ray.get_gpu_ids()``, with ``CUDA_VISIBLE_DEVICES``
set by Ray to those GPUs); roles that share the driver's process (``runtime.actors:
in_process``) follow ``runtime.learner_gpus``. A GPU assigned to a process whose torch cannot
use it (a CPU build of torch on a GPU node) is refused by name, before any training.
"""

from __future__ import annotations

from yamblab.errors import ConfigError


def cuda_available() -> bool:
    """Whether this process's torch can use a CUDA device."""
    import torch

    return bool(torch.cuda.is_available())


def pick_device(gpu_ids: list, role: str, cuda: bool | None = None) -> str:
    """``"cuda"`` for a role Ray assigned GPUs (``gpu_ids``), else ``"cpu"``.

    Args:
        gpu_ids: the GPUs assigned to this process (``ray.get_gpu_ids()``); empty for none.
        role: the role's name, for the error (``"learner"``, ``"self-play worker 3"``).
        cuda: whether torch here can use CUDA (default: asks torch).

    Raises:
        ConfigError: GPUs assigned but torch here sees no CUDA device.
    """
    if not gpu_ids:
        return "cpu"
    if cuda is None:
        cuda = cuda_available()
    if not cuda:
        import torch

        raise ConfigError(
            f"Ray gave the {role} GPU {', '.join(str(g) for g in gpu_ids)} but torch {torch.__version__} in its "
            "process sees no CUDA device (a CPU build of torch on a GPU node, or no driver): install a CUDA "
            "build of torch on that node, or run on the CPU with runtime.learner_gpus: 0 "
            "(and runtime.worker_gpus / eval_gpus: 0)")
    return "cuda"


def ray_device(role: str) -> str:
    """The device of the calling Ray actor: ``cuda`` where Ray assigned it a GPU (see
    :func:`pick_device`); ``cpu`` outside Ray."""
    import ray

    ids = ray.get_gpu_ids() if ray.is_initialized() else []
    return pick_device(ids, role)


def _in_ray_worker() -> bool:
    """Whether this process is a Ray worker (an actor's or a task's), not a driver."""
    import sys

    if "ray" not in sys.modules:
        return False
    import ray

    return ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE


def in_process_device(learner_gpus) -> str:
    """The device of roles that share one process: inside a Ray worker (a sweep trial's actor),
    the GPU Ray assigned it or the CPU; elsewhere ``runtime.learner_gpus``: 0 is the CPU,
    ``"auto"`` a GPU when torch sees one, more than 0 a GPU (refused without one).

    Raises:
        ConfigError: a GPU asked for, or assigned, that torch here cannot use.
    """
    if _in_ray_worker():
        import ray

        return pick_device(ray.get_gpu_ids(), "run's roles (in one process)")
    if learner_gpus == "auto":
        return "cuda" if cuda_available() else "cpu"
    if float(learner_gpus) <= 0:
        return "cpu"
    if not cuda_available():
        raise ConfigError(f"runtime.learner_gpus is {learner_gpus:g} but torch sees no CUDA device in this process "
                          "(a CPU build of torch, or no GPU): set runtime.learner_gpus: 0 or 'auto'")
    return "cuda"


class DeviceProbe:
    """What a role's constructor found: its device (``device`` when given, a role in the
    driver's process; else :func:`ray_device`), or why it may not run (reported by the backend
    before any training, since an actor's constructor error would surface only at its first
    call)."""

    def __init__(self, role: str, device: str | None = None):
        self.role = role
        try:
            self.device, self.error = device or ray_device(role), None
        except ConfigError as exc:
            self.device, self.error = "cpu", str(exc)

    def report(self) -> dict:
        return {"role": self.role, "device": self.device, "error": self.error}


__all__ = ["DeviceProbe", "cuda_available", "in_process_device", "pick_device", "ray_device"]
