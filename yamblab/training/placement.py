"""Where a run's roles go and on what: the CPUs and GPUs each role declares on a Ray cluster
(a sweep trial's placement group included), the device each role reports, and the machine a run
is timed on.
"""

from __future__ import annotations

from yamblab.errors import ConfigError
from yamblab.training.config import RunConfig, RuntimeConfig
from yamblab.training.resources import Resources, learner_gpus, resolve_resources


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
    3 s in all). A shared VM's speed drifts (docs/training.md says by how much), so minutes of
    two runs compare only beside it."""
    from yamblab.oracle.registry import yardstick_seconds

    return yardstick_seconds()


def trial_bundles(rt: RuntimeConfig, cpus: float, gpu: bool) -> tuple[list[dict], str]:
    """The placement group of a sweep trial that may use ``cpus`` CPUs on a cluster with a GPU
    or without (``gpu``): its bundles and strategy.

    Without a GPU for the learner, one bundle of ``cpus`` on one node (``STRICT_PACK``). With
    one, the learner's bundle holds its GPU and CPUs and a second bundle the rest (``PACK``:
    together where a node has room for both, else the learner on a GPU node and the rest
    elsewhere); :func:`bundle_options` pins each actor to its bundle. Resources the trial cannot
    resolve give the CPU bundle: the trial's actor then fails with the reason, as before. A
    trial whose roles run in its own process (``runtime.actors: in_process``) asks Ray for no
    GPU (:func:`~yamblab.training.resources.learner_gpus`): one CPU bundle.
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


def with_resources(cfg: RunConfig, res: Resources) -> RunConfig:
    """``cfg`` with its roles' resources resolved to ``res`` (no ``"auto"`` left): what the
    roles are built with."""
    return cfg.model_copy(update={"runtime": cfg.runtime.model_copy(update={
        "workers": res.workers, "worker_cpus": res.worker_cpus, "learner_cpus": res.learner_cpus,
        "eval_cpus": res.eval_cpus, "learner_threads": res.learner_threads})})
