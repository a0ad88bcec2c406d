"""Benchmark: learner seconds per iteration with mixed batches against split steps.

``train.decision_batch_size`` splits the positions an iteration draws by kind: those without
dice train the boundary head alone in steps of ``batch_size``, those with dice train the
transformer in steps of ``decision_batch_size``. This script plays one iteration's games with
a run config (default ``configs/yahtzee-cpu.yaml``), fills a replay buffer with them, draws what
one iteration's replay ratio asks for, and times ``Learner.train_iteration`` on the same draw,
mixed (the baseline, measured in the same run) and split; then the split steps with a larger
share of decisions (``policy_share``), which the time saved can pay for.

    python benchmarks/learner_split.py [-c configs/yahtzee-cpu.yaml] [--games 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import torch

from yamblab.actors.actors import samples_from_dict, samples_to_dict
from yamblab.actors.replay import ReplayBuffer
from yamblab.learners.learner import Learner
from yamblab.learners.selfplay import SelfPlay
from yamblab.training.config import load_run_config


def seconds_per_iteration(cfg, train, buffer: ReplayBuffer, new_positions: int, repeats: int) -> tuple[float, int, int]:
    """Median learner seconds for one iteration's draw; also its steps and samples with dice."""
    learner = Learner(cfg.model, train)
    times, n_steps, n_dice = [], 0, 0
    for r in range(repeats + 1):                           # the first pass warms up
        batch = samples_from_dict(buffer.sample(train.samples_for(new_positions), train.policy_share))
        s0, t0 = learner.steps, time.perf_counter()
        learner.train_iteration(batch, health=False)
        if r:
            times.append(time.perf_counter() - t0)
        n_steps = learner.steps - s0
        n_dice = int((batch.dice[:, 0] != 0).sum())
    times.sort()
    return times[len(times) // 2], n_steps, n_dice


def iteration_buffer(cfg, games: int):
    """One iteration's self-play games of ``cfg`` (a fresh network, seed 1) and a replay buffer
    holding exactly them: ``(SampleBatch, ReplayBuffer)``."""
    sp = SelfPlay(cfg.model, cfg.train, cfg.search, cfg.game_obj, device="cpu")
    version, w = Learner(cfg.model, cfg.train).get_weights()
    sp.set_weights(w, version)
    samples, _ = sp.play_games(games, seed=1)
    buffer = ReplayBuffer(len(samples), seed=0)
    buffer.add(samples_to_dict(samples))
    return samples, buffer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", default="configs/yahtzee-cpu.yaml", help="run config (needs model.boundary_head)")
    p.add_argument("--games", type=int, default=64, help="self-play games of the iteration (default 64)")
    p.add_argument("--repeats", type=int, default=3, help="timed iterations per arm; the median is printed")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the learner's share of a 2-core run: 1)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_run_config(args.config)
    if not cfg.model.boundary_head:
        p.error(f"{args.config}: split steps need model.boundary_head true")
    samples, buffer = iteration_buffer(cfg, args.games)
    share = float(samples.has_policy.mean())
    print(f"{cfg.name}: {args.games} games, {len(samples):,} positions ({share:.1%} with a policy target), "
          f"replay ratio {cfg.train.replay_ratio}, batch {cfg.train.batch_size}, {args.threads} torch thread(s)")
    arms = [("mixed batches (the baseline)", {}),
            ("split, decision batch 64", {"decision_batch_size": 64}),
            ("split, decision batch 128", {"decision_batch_size": 128}),
            ("split, decision batch 64, policy_share 0.15", {"decision_batch_size": 64, "policy_share": 0.15}),
            ("split, decision batch 128, policy_share 0.25", {"decision_batch_size": 128, "policy_share": 0.25})]
    base = None
    for label, change in arms:
        train = cfg.train.model_copy(update=change)
        s, steps, dice = seconds_per_iteration(cfg, train, buffer, len(samples), args.repeats)
        base = base or s
        print(f"  {label:46s} {s:6.2f} s an iteration ({s / base:4.2f} x the baseline), "
              f"{steps} optimiser steps, {dice:,} samples with dice")


if __name__ == "__main__":
    main()
