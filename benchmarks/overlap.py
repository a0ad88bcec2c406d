"""Benchmark: the training loop serial against overlapped, in the same run, on a local Ray cluster.

Runs the same config twice (or more, alternating) for a few iterations each: with
``runtime.max_policy_lag = 0`` (play, then train: the serial loop) and with the config's lag
(self-play plays ahead while the learner trains). Prints, for each: iterations per minute,
self-play positions/s and learner samples/s (each per second of its own busy time: alone in the
serial loop, side by side in the overlapped one), the machine's busy cores over the timed
iterations (from ``/proc/stat``; other work on the machine counts too), and the ratio of the
overlapped loop's iteration rate to the serial one's. ``--learner-threads auto 2`` also times the
overlapped loop with the learner's torch threads set to 2 (it may then use the core self-play
leaves idle while it waits for weights).

    python benchmarks/overlap.py [--config configs/yahtzee-cpu.yaml] [--iterations 8] [--warmup 2]
                                 [--learner-threads auto 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat (zeros where absent)."""
    try:
        with open("/proc/stat") as f:
            v = [float(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = v[3] + (v[4] if len(v) > 4 else 0.0)
    return sum(v) - idle, sum(v)


def measure(cfg, lag: int, iterations: int, warmup: int, threads="auto") -> dict:
    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun

    cfg = apply_overrides(cfg, {"runtime.max_policy_lag": lag, "runtime.iterations": 10**6,
                                "runtime.eval_every": 10**6, "runtime.checkpoint_minutes": 10**4,
                                "runtime.time_budget_minutes": None, "runtime.learner_threads": threads},
                          "benchmark")
    with tempfile.TemporaryDirectory() as d:
        run = TrainingRun(cfg, d, tracker=None, progress=False)
        try:
            for _ in range(warmup):
                run.step()
            b0, t0 = cpu_times()
            w0 = time.perf_counter()
            ms = [run.step() for _ in range(iterations)]
            wall = time.perf_counter() - w0
            b1, t1 = cpu_times()
            res = run.backend.resources
        finally:
            run.shutdown()
    ncpu = os.cpu_count() or 1
    play = sum(m["selfplay.busy_seconds"] for m in ms)
    learn = sum(m.get("train.seconds", 0.0) for m in ms)
    return {
        "lag": lag, "threads": res.learner_threads, "it_per_min": 60.0 * iterations / wall, "wall": wall,
        "positions_per_s": sum(m["selfplay.positions"] for m in ms) / max(play, 1e-9),
        "samples_per_s": sum(m.get("train.samples", 0.0) for m in ms) / max(learn, 1e-9),
        "play_busy": play / wall / res.workers, "learn_busy": learn / wall,
        "cores_busy": (b1 - b0) / max(t1 - t0, 1e-9) * ncpu, "ncpu": ncpu,
        "positions_per_min": 60.0 * sum(m["selfplay.positions"] for m in ms) / wall,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/yahtzee-cpu.yaml")
    p.add_argument("--iterations", type=int, default=8, help="timed iterations per measurement")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations first (the buffer fills)")
    p.add_argument("--repeats", type=int, default=1, help="measurements of each loop, alternating")
    p.add_argument("--learner-threads", nargs="+", default=["auto"],
                   help="learner torch threads of the overlapped loop: each value is timed (auto: its rounded CPUs)")
    args = p.parse_args()
    from yamblab.actors.cluster import init_ray
    from yamblab.training.config import load_run_config

    cfg = load_run_config(args.config)
    init_ray()
    lag = max(1, cfg.runtime.max_policy_lag)
    print(f"config {args.config}: {cfg.train.games_per_iteration} games per iteration, replay ratio "
          f"{cfg.train.replay_ratio:g}; {args.iterations} timed iterations after {args.warmup}")
    rows = []
    threads = [t if t == "auto" else int(t) for t in args.learner_threads]
    for _ in range(args.repeats):
        for lg, th in [(0, "auto"), *((lag, t) for t in threads)]:
            r = measure(cfg, lg, args.iterations, args.warmup, th)
            r["asked"] = th
            rows.append(r)
            name = "serial    " if lg == 0 else f"overlap {lg} "
            name += f" learner {r['threads']} thr"
            print(f"  {name} {r['it_per_min']:6.1f} it/min  {r['positions_per_min']:9,.0f} positions/min  "
                  f"self-play {r['positions_per_s']:7,.0f} pos/s (busy {r['play_busy']:.0%})  "
                  f"learner {r['samples_per_s']:7,.0f} samples/s (busy {r['learn_busy']:.0%})  "
                  f"cores busy {r['cores_busy']:.2f} of {r['ncpu']}", flush=True)
    ser = np.mean([r["it_per_min"] for r in rows if r["lag"] == 0])
    for th in threads:
        ovl = np.mean([r["it_per_min"] for r in rows if r["lag"] != 0 and r["asked"] == th])
        print(f"overlapped (learner threads {th}) / serial iteration rate: {ovl / ser:.2f}")


if __name__ == "__main__":
    main()
