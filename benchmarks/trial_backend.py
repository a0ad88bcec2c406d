"""Benchmark: a one-CPU run's roles as Ray actors versus in the driver's process (prints figures;
not a test).

A sweep trial on one CPU runs the serial loop (``max_policy_lag: 0``): self-play, learning and
evaluation take turns, so its five roles (self-play worker, replay buffer, learner, evaluator,
oracle service) gain nothing from running as five Ray actors, and each actor is a Python process
to start. This times, pair by pair on the same machine, ``--repeats`` short runs of the tiny
Yahtzee config with ``runtime.actors: ray`` (the baseline) and ``in_process``: the seconds from
creating the run to its first iteration's start (the roles up), and the whole run
(``--iterations`` iterations and one evaluation); it prints medians and their ratio, and checks
that both give the same losses.

    python benchmarks/trial_backend.py [--config configs/yahtzee-tiny.yaml] [--iterations 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import ray
import torch

from yamblab.training.config import load_run_config
from yamblab.training.runtime import TrainingRun

ROOT = Path(__file__).resolve().parents[1]


def one_run(config: str, actors: str, iterations: int, folder: Path) -> tuple[float, float, list[float]]:
    """(seconds to the roles up, seconds for the whole run, the iterations' train.total)."""
    cfg = load_run_config(config, {"runtime.run_dir": str(folder), "runtime.iterations": iterations,
                                   "runtime.max_policy_lag": 0, "runtime.eval_every": iterations,
                                   "runtime.actors": actors, "runtime.workers": 1})
    t0 = time.perf_counter()
    run = TrainingRun(cfg, folder / actors, progress=False, cpus=1)
    try:
        run.backend.weights()   # every role constructed; for actors, the learner answers
        if actors == "ray":
            ray.get([w.weight_loads.remote() for w in run.backend.workers] + [run.backend.buffer.size.remote(),
                    run.backend.evaluator.solver_applies.remote()])
        up = time.perf_counter() - t0
        hist = run.run()
        total = time.perf_counter() - t0
    finally:
        run.shutdown()
    return up, total, [h["train.total"] for h in hist]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(ROOT / "configs" / "yahtzee-tiny.yaml"), help="run config")
    p.add_argument("--iterations", type=int, default=3, help="iterations per run (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="pairs of runs (default 3)")
    a = p.parse_args()
    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"trial backend benchmark: {Path(a.config).name}, {a.iterations} iterations, one CPU per run; "
          f"{len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.1f}")
    rows: dict[str, list[tuple[float, float]]] = {"ray": [], "in_process": []}
    losses = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for actors in ("ray", "in_process"):
                up, total, loss = one_run(a.config, actors, a.iterations, Path(tmp) / f"{r}")
                rows[actors].append((up, total))
                losses[actors] = loss
                print(f"  pair {r + 1}: {actors:<10}  roles up {up:6.2f} s   run {total:6.2f} s")
    med = {k: (statistics.median(u for u, _ in v), statistics.median(t for _, t in v)) for k, v in rows.items()}
    print(f"median roles up: ray {med['ray'][0]:.2f} s, in process {med['in_process'][0]:.2f} s "
          f"(ratio {med['in_process'][0] / med['ray'][0]:.2f})")
    print(f"median whole run: ray {med['ray'][1]:.2f} s, in process {med['in_process'][1]:.2f} s "
          f"(ratio {med['in_process'][1] / med['ray'][1]:.2f}; saved {med['ray'][1] - med['in_process'][1]:.1f} s a run)")
    print(f"same losses: {losses['ray'] == losses['in_process']}")
    ray.shutdown()


if __name__ == "__main__":
    main()
