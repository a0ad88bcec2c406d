"""Benchmark: learner optimiser steps/s and self-play positions/s with the seed-sized network.

Runs on the GPU when there is one, else on the CPU, so the same script gives the figures on
any machine. Baseline in the same run: the tiny preset on the same device.

    python benchmarks/learner.py [--preset seed] [--games 32]
    python benchmarks/learner.py --game yamb --yamb-preset jamb_nn --depth one_step   # configs/yamb-gpu.yaml
"""

from __future__ import annotations

import argparse
import time

import torch

from yamblab.games.protocol import make_game
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.learner import Learner
from yamblab.learners.selfplay import SelfPlay
from yamblab.model.config import ModelConfig


def measure(preset: str, device: str, games: int, game, depth: str = "full_turn") -> dict:
    model = ModelConfig.preset(preset, **({"value_max": 1500.0} if game.name == "yamb" else {}))
    train = TrainConfig(batch_size=256)
    learner = Learner(model, train, device=device)
    sp = SelfPlay(model, train, SearchConfig(depth=depth), game, device=device)
    version, w = learner.get_weights()
    sp.set_weights(w, version)
    sp.play_games(2, seed=5)                              # warm-up
    t0 = time.perf_counter()
    samples, stats = sp.play_games(games, seed=1)
    play_s = time.perf_counter() - t0
    learner.train_iteration(samples, health=False)        # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    steps0, t0 = learner.steps, time.perf_counter()
    for _ in range(3):
        learner.train_iteration(samples, health=False)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"params": sum(p.numel() for p in learner.net.parameters()),
            "steps_per_s": (learner.steps - steps0) / dt,
            "positions_per_s": stats["positions"] / play_s, "games_per_s": games / play_s,
            "leaf_per_s": stats["leaf_positions"] / play_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="seed")
    p.add_argument("--games", type=int, default=32)
    p.add_argument("--game", default="yahtzee", choices=["yahtzee", "yamb"])
    p.add_argument("--yamb-preset", default="croatian", help="Yamb's rule preset (with --game yamb)")
    p.add_argument("--depth", default="full_turn", choices=["full_turn", "one_step"],
                   help="self-play's search (configs/yamb-gpu.yaml: one_step, YoloYamb's own)")
    args = p.parse_args()
    game = make_game("yamb", preset=args.yamb_preset) if args.game == "yamb" else make_game("yahtzee")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name(0) if device == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; game: {game.label}; search: {args.depth.replace('_', ' ')}")
    for preset in ("tiny", args.preset):
        m = measure(preset, device, args.games, game, args.depth)
        print(f"  preset {preset:5s} ({m['params'] / 1e6:.2f} M params): learner {m['steps_per_s']:.1f} "
              f"optimiser steps/s (batch 256); self-play {m['positions_per_s']:,.0f} positions/s, "
              f"{m['games_per_s']:.1f} games/s, {m['leaf_per_s']:,.0f} leaf evaluations/s")


if __name__ == "__main__":
    main()
