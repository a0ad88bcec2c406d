"""Benchmark: self-play throughput against the raw batched forward pass (prints figures).

Plays one iteration's games with the default CPU config (configs/yahtzee-cpu.yaml) and
reports decision positions/s and games/s; then measures the raw forward-pass positions/s of
the same network, in the same run, at the mean batch size self-play used. The ratio of the
network positions self-play evaluates per second (policy forward passes plus search leaves)
to that raw rate shows how much of self-play is spent outside the network (target >= 0.5).

    python benchmarks/selfplay.py [--config configs/yahtzee-cpu.yaml] [--games N]
    python benchmarks/selfplay.py --config configs/yamb-free-cpu.yaml      # Yamb
"""

from __future__ import annotations

import argparse
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from yamblab.games.encoding import EncodedBatch
from yamblab.learners.selfplay import rows
from yamblab.platform.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(ROOT / "configs" / "yahtzee-cpu.yaml"))
    p.add_argument("--games", type=int, default=None, help="games (default: the config's games per iteration)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (a worker declares one CPU)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_run_config(args.config)
    from yamblab.learners.learner import Learner
    from yamblab.learners.selfplay import SelfPlay

    n = args.games or cfg.train.games_per_iteration
    sp = SelfPlay(cfg.model, cfg.train, cfg.search, cfg.game_obj)
    version, weights = Learner(cfg.model, cfg.train).get_weights()
    sp.set_weights(weights, version)
    calls = []
    orig = sp.net.predict

    def counted(enc, chunk=8192):
        calls.append(len(enc))
        return orig(enc, chunk)

    sp.net.predict = counted
    sp.play_games(max(2, n // 8), seed=99)            # warm-up
    calls.clear()
    t0 = time.perf_counter()
    samples, stats = sp.play_games(n, seed=1)
    dt = time.perf_counter() - t0
    net_positions = int(np.sum(calls))
    mean_batch = net_positions / max(1, len(calls))

    # raw forward pass of the same network at the mean batch size self-play used
    enc = EncodedBatch(**{f.name: getattr(samples, f.name) for f in fields(EncodedBatch)})
    b = int(max(1, round(mean_batch)))
    idx = np.resize(np.arange(len(enc)), b)
    batch = rows(enc, idx)
    orig(batch)
    reps, t1 = 0, time.perf_counter()
    while time.perf_counter() - t1 < 3.0:
        orig(batch)
        reps += 1
    raw = reps * b / (time.perf_counter() - t1)
    net_rate = net_positions / dt
    print(f"self-play ({cfg.name}: {cfg.game_obj.label}, network {cfg.size}, search {cfg.search.depth}, "
          f"{args.threads} thread):")
    print(f"  {n} games in {dt:.2f} s: {n / dt:.1f} games/s, {stats['positions'] / dt:,.0f} decision positions/s")
    print(f"  network positions evaluated: {net_positions:,} in {len(calls)} forward calls "
          f"(mean batch {mean_batch:,.0f}) = {net_rate:,.0f} positions/s")
    print(f"  raw batched forward pass at batch {b:,}: {raw:,.0f} positions/s (baseline, same run)")
    print(f"  ratio self-play / raw forward: {net_rate / raw:.2f}  (target >= 0.5)")


if __name__ == "__main__":
    main()
