"""Benchmark: learner seconds per iteration, eager against ``runtime.learner_compile``.

On a CPU the tiny network's transformer step is mostly per-operation overhead (a few dozen
rows a step through many small kernels), which ``torch.compile`` fuses. This script plays one
iteration's games with a run config (default ``configs/yahtzee-cpu.yaml``), fills a replay
buffer with them, and times ``Learner.train_iteration`` on one iteration's draw (as the replay
ratio asks), eager (the baseline) and compiled, the two alternating on the same draws; the
compiled learner's first iteration, which compiles, is timed apart. Then the same with a larger
share of decisions in every batch (``train.policy_share``), which a cheaper step can pay for.

    python benchmarks/learner_compile.py [-c configs/yahtzee-cpu.yaml] [--games 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from learner_split import iteration_buffer      # this folder's neighbour: one iteration's games

from yamblab.actors.actors import samples_from_dict
from yamblab.actors.replay import ReplayBuffer
from yamblab.learners.learner import Learner
from yamblab.training.config import load_run_config


def compare(cfg, train, buffer: ReplayBuffer, new_positions: int, repeats: int) -> dict:
    """Eager and compiled learners on the same draws, alternating; medians of ``repeats``."""
    eager, comp = Learner(cfg.model, train), Learner(cfg.model, train, compile=True)
    draws = [samples_from_dict(buffer.sample(train.samples_for(new_positions), train.policy_share))
             for _ in range(repeats + 1)]
    eager.train_iteration(draws[0], health=False)          # warm-up
    t0 = time.perf_counter()
    comp.train_iteration(draws[0], health=False)           # compiles
    first = time.perf_counter() - t0
    te, tc = [], []
    for d in draws[1:]:
        for learner, out in ((eager, te), (comp, tc)):
            t0 = time.perf_counter()
            learner.train_iteration(d, health=False)
            out.append(time.perf_counter() - t0)
    return {"eager": statistics.median(te), "compiled": statistics.median(tc), "first": first,
            "steps": eager.steps // (repeats + 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", default="configs/yahtzee-cpu.yaml", help="run config")
    p.add_argument("--games", type=int, default=64, help="self-play games of the iteration (default 64)")
    p.add_argument("--repeats", type=int, default=5, help="timed iterations per arm; medians are printed")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the learner's share of a 2-core run: 1)")
    p.add_argument("--policy-share", type=float, nargs="*", default=[0.25],
                   help="also measure with these train.policy_share values (default 0.25)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_run_config(args.config)
    samples, buffer = iteration_buffer(cfg, args.games)
    print(f"{cfg.name}: {args.games} games, {len(samples):,} positions "
          f"({float(samples.has_policy.mean()):.1%} with a policy target), replay ratio "
          f"{cfg.train.replay_ratio}, batch {cfg.train.batch_size}, {args.threads} torch thread(s), "
          f"torch {torch.__version__}")
    arms = [("the config's batches", {})] + [(f"policy_share {s:g}", {"policy_share": s}) for s in args.policy_share]
    for label, change in arms:
        r = compare(cfg, cfg.train.model_copy(update=change), buffer, len(samples), args.repeats)
        print(f"  {label:22s} eager {r['eager']:6.2f} s an iteration, compiled {r['compiled']:6.2f} s "
              f"({r['compiled'] / r['eager']:4.2f} x eager), {r['steps']} optimiser steps; "
              f"the compiled learner's first iteration {r['first']:5.1f} s (compiling)")


if __name__ == "__main__":
    main()
