"""Starting or joining the Ray cluster.

By default a local cluster is started for the run, sized to the machine, without the
dashboard; ``address`` joins an existing cluster instead (``ray start --head`` on a machine,
the KubeRay RayJob in ``infra/``).
"""

from __future__ import annotations

import logging
import os


def init_ray(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Start a local Ray cluster, or connect to ``address`` (e.g. ``"auto"``, ``"ray://host:10001"``).

    Does nothing if Ray is already initialised in this process.
    """
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        return
    # A new local cluster takes Ray's default, token authentication; Ray says so in a warning at
    # every start (with RAY_AUTH_MODE unset) that asks nothing of the user: keep it quiet (the
    # warning that authentication is *disabled*, with RAY_AUTH_MODE=disabled, is kept)
    if os.environ.get("RAY_AUTH_MODE") is None:
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    if num_cpus is None:
        num_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False,
             logging_level=logging.WARNING, log_to_driver=False)


def cluster_has_gpu() -> bool:
    """Whether the connected Ray cluster offers at least one GPU."""
    import ray

    return ray.cluster_resources().get("GPU", 0) >= 1
