"""Each role's device comes from what Ray assigned it (or, in the driver's process, from
``runtime.learner_gpus``), never from torch's guess: tested on this CPU machine with Ray
clusters that declare fake GPUs and with CUDA's presence mocked."""

from __future__ import annotations

from pathlib import Path

import pytest

from yamblab.actors import devices
from yamblab.errors import ConfigError
from yamblab.training.config import RuntimeConfig
from yamblab.training.resources import resolve_resources

ROOT = Path(__file__).resolve().parents[1]


def test_a_role_takes_cuda_only_when_ray_assigned_it_a_gpu():
    assert devices.pick_device([], "learner", cuda=True) == "cpu"
    assert devices.pick_device(["0"], "learner", cuda=True) == "cuda"
    with pytest.raises(ConfigError, match=r"Ray gave the learner GPU 0 but torch .* sees no CUDA device"):
        devices.pick_device(["0"], "learner", cuda=False)


@pytest.mark.parametrize("setting,cuda,want", [
    ("auto", True, "cuda"), ("auto", False, "cpu"), (0, True, "cpu"), (0.0, False, "cpu"), (1, True, "cuda")])
def test_roles_in_the_driver_process_follow_learner_gpus(monkeypatch, setting, cuda, want):
    monkeypatch.setattr(devices, "cuda_available", lambda: cuda)
    assert devices.in_process_device(setting) == want


def test_a_gpu_asked_of_a_process_without_cuda_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    with pytest.raises(ConfigError, match="runtime.learner_gpus is 1 but torch sees no CUDA device"):
        devices.in_process_device(1)


def test_in_process_roles_stay_on_the_cpu_with_learner_gpus_0_even_where_cuda_is_seen(monkeypatch, tiny_config):
    """The roles that share the driver's process (learner, worker, evaluator) all take the
    learner's device; with ``learner_gpus: 0`` that is the CPU though torch reports a GPU."""
    from yamblab.training.backends import InProcessBackend

    monkeypatch.setattr(devices, "cuda_available", lambda: True)
    cfg = tiny_config.model_copy(update={"runtime": tiny_config.runtime.model_copy(update={
        "actors": "in_process", "max_policy_lag": 0, "learner_gpus": 0.0})})
    backend = InProcessBackend(cfg)
    assert backend.devices == {"learner": "cpu", "self-play": "cpu", "evaluator": "cpu"}
    assert backend.learner.device() == "cpu" and backend.resources.learner_gpus == 0


def test_gpu_settings_are_bounded_and_shares_split_one_gpu():
    for bad in ({"learner_gpus": -1}, {"learner_gpus": float("nan")}, {"learner_gpus": float("inf")},
                {"learner_gpus": 1.5}, {"worker_gpus": 1.5}, {"eval_gpus": -0.1}):
        with pytest.raises(ValueError):
            RuntimeConfig(**bad)
    rt = RuntimeConfig(learner_gpus=0.5, eval_gpus=0.1, worker_gpus="auto")
    r = resolve_resources(rt, 16, gpu=True)
    assert r.learner_gpus == 0.5 and r.eval_gpus == 0.1 and 0 < r.worker_gpus
    assert r.total_gpus <= 1.0 + 1e-9 and r.workers * r.worker_gpus == pytest.approx(0.4, abs=r.workers * 1e-4)
    # no GPU, or a sweep trial (self-play in a CPU-only bundle): auto gives the workers none
    assert resolve_resources(rt, 16, gpu=False).worker_gpus == 0
    assert resolve_resources(rt.model_copy(update={"eval_gpus": 0.0}), 16, gpu=True, trial=True).worker_gpus == 0
    with pytest.raises(ConfigError, match="sweep trial"):
        resolve_resources(RuntimeConfig(worker_gpus=0.2), 4, gpu=True, trial=True)


@pytest.mark.ray
def test_the_shared_test_cluster_claims_no_gpu(ray_cluster):
    """The suite's cluster declares no GPU even on a GPU machine, so no test's actor takes one
    it was not asked for (the tests that place a GPU start a cluster of their own)."""
    assert ray_cluster.cluster_resources().get("GPU", 0) == 0


# One Ray cluster of 2 CPUs and a fake GPU, in a process of its own. Every worker process
# records what each role would pick with CUDA present (pick_device with cuda=True) and what it
# picks on this machine (torch's CPU build), then plays on the CPU, so the runs still work.
_FAKE_GPU = r"""
import json, sys
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

root, run_dir = sys.argv[1], sys.argv[2]


def spy():
    import yamblab.actors.devices as d
    real = d.pick_device

    def pick(ids, role, cuda=None):
        d.SEEN = {"ids": [str(i) for i in ids], "with_cuda": real(ids, role, cuda=True)}
        try:
            d.SEEN["here"] = real(ids, role)
        except d.ConfigError as exc:
            d.SEEN["here"] = "refused: " + str(exc)
        return "cpu"

    d.pick_device = pick


ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, runtime_env={"worker_process_setup_hook": spy})
from yamblab.errors import ConfigError
from yamblab.training.config import apply_overrides, load_run_config
from yamblab.training.backends import RayBackend
from yamblab.training.placement import trial_bundles

seen = lambda a: ray.get(a.__ray_call__.remote(lambda _: __import__("yamblab.actors.devices").actors.devices.SEEN))
out = {}


def roles(name, sets, cpus=None, pg=None):
    cfg = apply_overrides(load_run_config(f"{root}/configs/yahtzee-tiny.yaml", {"runtime.run_dir": run_dir}), sets)
    try:
        if pg is None:
            b = RayBackend(cfg, cpus=cpus)
        else:
            b = ray.get(ray.remote(num_cpus=0)(_in_trial).options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_capture_child_tasks=True)).remote(cfg, cpus))
            out[name] = b
            return
    except ConfigError as exc:
        out[name] = {"refused": str(exc)}
        return
    out[name] = {"learner": seen(b.learner), "worker": seen(b.workers[0]), "evaluator": seen(b.evaluator),
                 "devices": b.devices, "worker_gpus": b.resources.worker_gpus}
    b.shutdown()


def _in_trial(cfg, cpus):
    b = RayBackend(cfg, cpus=cpus)
    got = {"learner": seen(b.learner), "worker": seen(b.workers[0]), "evaluator": seen(b.evaluator)}
    b.shutdown()
    return got


roles("auto", {})
roles("zero", {"runtime.learner_gpus": 0})
roles("shared", {"runtime.learner_gpus": 0.5, "runtime.eval_gpus": 0.1, "runtime.worker_gpus": "auto"})
roles("too_many", {"runtime.learner_gpus": 2})
for name, sets in (("trial_cpu", {"runtime.learner_gpus": 0}), ("trial_gpu", {})):
    cfg = apply_overrides(load_run_config(f"{root}/configs/yahtzee-tiny.yaml", {"runtime.run_dir": run_dir}), sets)
    bundles, strategy = trial_bundles(cfg.runtime, 2.0, True)
    pg = placement_group(bundles, strategy=strategy)
    assert pg.wait(120)
    roles(name, sets, cpus=2.0, pg=pg)
    out[name]["bundles"] = bundles
    ray.util.remove_placement_group(pg)
# roles that share one process inside a Ray worker (a sweep trial's) follow Ray, not torch
def in_worker():
    import yamblab.actors.devices as d
    return d.in_process_device("auto"), d.SEEN


out["in_worker"] = [ray.get(ray.remote(in_worker).options(num_cpus=0, num_gpus=g).remote()) for g in (0, 1)]
print("RESULT " + json.dumps(out))
ray.shutdown()
"""


@pytest.mark.ray
@pytest.mark.slow
def test_on_a_fake_gpu_cluster_only_roles_given_a_gpu_would_use_it(tmp_path, script_result):
    """On a cluster that declares a GPU: the learner would take CUDA with ``learner_gpus``
    "auto" or above 0 and not with 0; self-play and the evaluator only with GPU shares of their
    own; a sweep trial's CPU-only bundle keeps every role on the CPU; on this machine (a CPU
    build of torch) a role given a GPU is refused by name; more GPUs than the cluster has is
    one line naming the settings, before anything waits."""
    out = script_result(_FAKE_GPU, ROOT, tmp_path / "runs", timeout=600)
    auto = out["auto"]
    assert auto["learner"]["ids"] and auto["learner"]["with_cuda"] == "cuda"
    import torch

    if not torch.cuda.is_available():      # the mismatch a CPU build of torch on a GPU node makes
        assert auto["learner"]["here"].startswith("refused: Ray gave the learner GPU")
    for role in ("worker", "evaluator"):
        assert auto[role] == {"ids": [], "with_cuda": "cpu", "here": "cpu"}
    for role in ("learner", "worker", "evaluator"):
        assert out["zero"][role]["with_cuda"] == "cpu" and not out["zero"][role]["ids"]
        assert out["shared"][role]["ids"] and out["shared"][role]["with_cuda"] == "cuda"
        assert out["trial_cpu"][role]["with_cuda"] == "cpu"
    assert out["shared"]["worker_gpus"] == pytest.approx(0.4)
    assert "GPU" not in out["trial_cpu"]["bundles"][0]
    assert out["trial_gpu"]["learner"]["with_cuda"] == "cuda" and out["trial_gpu"]["worker"]["with_cuda"] == "cpu"
    assert "asks Ray for 2 GPU(s)" in out["too_many"]["refused"] and "has 1" in out["too_many"]["refused"]
    (_, no_gpu), (_, one_gpu) = out["in_worker"]
    assert no_gpu["ids"] == [] and no_gpu["with_cuda"] == "cpu"
    assert one_gpu["ids"] and one_gpu["with_cuda"] == "cuda"
