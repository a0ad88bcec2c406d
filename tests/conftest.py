"""Shared fixtures: one oracle table per variant per test session, cached in a temp folder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("yamblab-cache")
    old = os.environ.get("YAMBLAB_CACHE_DIR")
    os.environ["YAMBLAB_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("YAMBLAB_CACHE_DIR", None)
    else:
        os.environ["YAMBLAB_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def official_table(_cache_dir):
    from yamblab.games.yahtzee.rules import OFFICIAL
    from yamblab.oracle.yahtzee.table import OracleTable

    return OracleTable.get(OFFICIAL)


@pytest.fixture(scope="session")
def ray_cluster():
    """One small local Ray cluster shared by every Ray test (2 CPUs, no GPU even on a GPU
    machine: the tests that place a GPU make a cluster of their own, no dashboard)."""
    ray = pytest.importorskip("ray")
    from yamblab.actors.cluster import init_ray

    init_ray(num_cpus=2, num_gpus=0)
    yield ray
    ray.shutdown()


@pytest.fixture()
def tiny_config(tmp_path):
    """The tiny run config with its run folder and MLflow store in a temp folder."""
    from pathlib import Path

    from yamblab.training.config import load_run_config

    root = Path(__file__).resolve().parents[1]
    return load_run_config(root / "configs" / "yahtzee-tiny.yaml",
                           {"runtime.run_dir": str(tmp_path / "runs")})


@pytest.fixture()
def one_torch_thread():
    """Torch on one thread for the test (restored after it)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def benchmark_module():
    """``benchmark_module("value_drift")``: a script of benchmarks/ loaded as a module (they are
    scripts, not a package), once per name per session."""
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    loaded = {}

    def load(name: str):
        if name not in loaded:
            spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            loaded[name] = mod
        return loaded[name]

    return load


@pytest.fixture(scope="session")
def script_result():
    """``script_result(code, *args)``: run Python ``code`` in a process of its own (a Ray cluster
    of its own, say) with the project on its path, and return the JSON it printed on a line
    ``RESULT {...}`` (the test fails with the process's output when there is none)."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]

    def run(code: str, *args, timeout: float = 900) -> dict:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=timeout)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        assert line, done.stdout[-2000:] + done.stderr[-4000:]
        return json.loads(line[len("RESULT "):])

    return run
