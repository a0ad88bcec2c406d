"""Benchmark: one-step search's leaves with yamb-gpu's network, before and after (prints figures).

Plays the first decisions of the same jamb_nn games three ways, on the same dice and weights,
in one run, and prints decisions (self-play positions) per second and leaves valued:

* before: every leaf valued, each through the whole network (policy branch included);
* de-duplicated: each distinct leaf valued once;
* after (today): each distinct leaf once, through the trunk and value branch alone.

The three must give the same Q values to float rounding (checked). The ratios are the figure.

    python benchmarks/onestep_leaves.py [--config configs/yamb-gpu.yaml] [--games 2] [--decisions 6]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from yamblab.games.protocol import step_shared
from yamblab.model.network import YambNet
from yamblab.search.registry import make_search
from yamblab.search.valuation import NetworkValuation
from yamblab.search.yamb_search import YambOneStepSearch
from yamblab.training.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]


class _WholeNetwork(NetworkValuation):
    """Leaves valued by the whole network's forward pass (policy branch and head included)."""

    def values(self, enc):
        self.positions_evaluated += len(enc)
        return self.net.predict(enc, self.chunk)[1]


def play(net, game, games: int, decisions: int, seed: int, dedup: bool, whole: bool):
    """Seconds, leaves valued and the Q of each decision of the first ``decisions`` steps."""
    YambOneStepSearch.dedup = dedup
    try:
        batch = game.new_batch(games, seed=seed)
        val = (_WholeNetwork if whole else NetworkValuation)(net)
        search = make_search("one_step", game, val)
        qs = []
        t0 = time.perf_counter()
        for _ in range(decisions):
            q = search.q(batch)
            qs.append(q)
            step_shared(game, batch, np.argmax(np.where(np.isfinite(q), q, -np.inf), axis=1))
        return time.perf_counter() - t0, val.positions_evaluated, qs
    finally:
        YambOneStepSearch.dedup = True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(ROOT / "configs" / "yamb-gpu.yaml"))
    p.add_argument("--games", type=int, default=2, help="games played at once")
    p.add_argument("--decisions", type=int, default=6, help="decisions of each game (a turn has up to 3)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (a worker declares one CPU)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_run_config(args.config)
    torch.manual_seed(0)
    net = YambNet(cfg.model).eval()
    game = cfg.game_obj
    print(f"{cfg.name}: size {cfg.size} ({sum(q.numel() for q in net.parameters()) / 1e6:.2f} M parameters), "
          f"one-step search, {game.label}; {args.games} games x {args.decisions} decisions, "
          f"{args.threads} torch thread(s), {torch.get_num_threads()} used")
    runs = {}
    for name, dedup, whole in (("before", False, True), ("de-duplicated", True, True), ("after", True, False)):
        runs[name] = play(net, game, args.games, args.decisions, args.seed, dedup, whole)
    ref = runs["before"][2]
    positions = args.games * args.decisions
    base = runs["before"][0]
    for name, (sec, leaves, qs) in runs.items():
        with np.errstate(invalid="ignore"):     # -inf - -inf on illegal actions
            diff = max(float(np.max(np.abs(np.where(np.isfinite(a), a - b, 0.0)))) for a, b in zip(ref, qs))
        print(f"{name:15s} {sec:7.1f} s  {positions / sec:6.3f} positions/s  {leaves:7d} leaves valued  "
              f"{base / sec:4.2f}x before  (largest Q difference from before {diff:.1e} points)")


if __name__ == "__main__":
    main()
