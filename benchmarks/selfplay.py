"""Benchmark: how much of self-play is network work (prints figures).

Plays one iteration's games with a CPU config (default configs/yahtzee-cpu.yaml) and counts
every network call self-play makes, of both kinds: the policy forward pass on positions with
dice (the prior), and the search's leaf values (with a boundary value head these skip the
transformer: a small MLP on the card). Then, in the same run, it times each kind raw, batched
at the mean batch size self-play used. The ratio of the raw time those positions need to the
self-play wall time is the share of self-play that is network work (target >= 0.5: the rest is
search bookkeeping outside the network). It also prints self-play's positions/s against the
learner's samples/s on the same machine, since that decides which side of the loop waits.

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
from yamblab.training.config import load_run_config

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
    calls: dict[str, list[int]] = {"policy": [], "leaf": []}
    orig_predict, orig_value = sp.net.predict, sp.net.predict_value
    depth = [0]

    def counted(kind, fn):
        def call(enc, chunk=8192):
            if depth[0] == 0:
                calls[kind].append(len(enc))
            depth[0] += 1
            try:
                return fn(enc, chunk)
            finally:
                depth[0] -= 1
        return call

    sp.net.predict = counted("policy", orig_predict)
    sp.net.predict_value = counted("leaf", orig_value)
    sp.play_games(max(2, n // 8), seed=99)            # warm-up
    for v in calls.values():
        v.clear()
    t0 = time.perf_counter()
    samples, stats = sp.play_games(n, seed=1)
    dt = time.perf_counter() - t0

    enc = EncodedBatch(**{f.name: getattr(samples, f.name) for f in fields(EncodedBatch)})
    with_dice = np.flatnonzero(enc.dice[:, 0] > 0)
    no_dice = np.flatnonzero(enc.dice[:, 0] == 0)
    raw_seconds = 0.0
    print(f"self-play ({cfg.name}: {cfg.game_obj.label}, network {cfg.size}, search {cfg.search.depth}, "
          f"boundary head {'on' if cfg.model.boundary_head else 'off'}, {args.threads} thread):")
    print(f"  {n} games in {dt:.2f} s: {n / dt:.1f} games/s, {stats['positions'] / dt:,.0f} training positions/s")
    for kind, fn, pool in (("policy", orig_predict, with_dice), ("leaf", orig_value, no_dice)):
        sizes = calls[kind]
        if not sizes:
            continue
        total = int(np.sum(sizes))
        b = int(max(1, round(total / len(sizes))))
        src = pool if (kind == "policy" or cfg.model.boundary_head) and len(pool) else np.arange(len(enc))
        batch = rows(enc, np.resize(src, b))
        fn(batch)
        reps, t1 = 0, time.perf_counter()
        while time.perf_counter() - t1 < 2.0:
            fn(batch)
            reps += 1
        raw = reps * b / (time.perf_counter() - t1)
        raw_seconds += total / raw
        print(f"  {kind:6s}: {total:,} positions in {len(sizes):,} calls (mean batch {b:,}); raw batched rate "
              f"{raw:,.0f} positions/s (same run) -> {total / raw:.2f} s of network work")
    print(f"  ratio network work / self-play time: {raw_seconds / dt:.2f}  (target >= 0.5)")

    learner = Learner(cfg.model, cfg.train)
    sub = samples.take(slice(0, min(len(samples), 8 * cfg.train.batch_size)))
    learner.train_iteration(sub, health=False)
    t1 = time.perf_counter()
    m = learner.train_iteration(sub, health=False)
    lrate = m["samples"] / (time.perf_counter() - t1)
    print(f"  learner on the same positions: {lrate:,.0f} samples/s; self-play makes "
          f"{stats['positions'] / dt:,.0f} positions/s, so a replay ratio of {lrate / (stats['positions'] / dt):.1f} "
          f"keeps both sides equally busy")


if __name__ == "__main__":
    main()
