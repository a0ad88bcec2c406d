"""Benchmark: grading a network on the solver-graded decision set versus by playing games (prints
figures; not a test).

Builds (or loads from the cache) the decision set of a Yahtzee variant (positions of the oracle's
optimal play with the oracle's value of every legal action, :mod:`yamblab.search.decision_set`),
prints its positions and build time, then times :func:`~yamblab.search.decision_set.solver_losses`
of the tiny network on ``--threads`` torch threads (median of ``--repeats`` runs), with positions
per second and the time scaled to 20,000 positions. As a baseline measured in the same run it times
grading the same network's policy head by playing ``--grade-games`` games against the oracle
(:func:`yamblab.oracle.yahtzee.grading.grade`), and prints the ratio.

    python benchmarks/decision_set.py [--games 600] [--threads 1] [--repeats 5] [--grade-games 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from yamblab.agents.search_agent import network_agent
from yamblab.games.protocol import make_game
from yamblab.model.network import build_model
from yamblab.search.decision_set import DECISION_SEED, decision_set, solver_losses
from yamblab.oracle.yahtzee.grading import grade
from yamblab.oracle.yahtzee.table import OracleTable


def _median(fn, repeats: int) -> tuple[float, float, float, object]:
    out = fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts), out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=600, help="games of the decision set (default 600)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--rules", default="forced", help="Yahtzee rule variant (default forced)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs of each measurement (default 5)")
    p.add_argument("--grade-games", type=int, default=100,
                   help="games played by the baseline, grading by play (default 100)")
    p.add_argument("--no-cache", action="store_true", help="build the set without the disk cache")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    game = make_game("yahtzee", a.rules)
    table = OracleTable.get(game.rules)
    print(f"decision set benchmark: {game.label}, {a.games} games, {a.threads} torch thread(s), "
          f"{len(os.sched_getaffinity(0))} cores; load average {os.getloadavg()[0]:.1f}")

    t0 = time.perf_counter()
    dset = decision_set(game, a.games, seed=DECISION_SEED, cache=not a.no_cache)
    built = time.perf_counter() - t0
    print(f"  {dset.summary()}")
    print(f"  built or loaded in {built:.2f} s (checksum {dset.checksum})")

    net = build_model("tiny", seed=0)
    med, lo, hi, losses = _median(lambda: solver_losses(net, dset), a.repeats)
    n = len(dset)
    print(f"  solver_losses (tiny network): median {med:.3f} s (min {lo:.3f}, max {hi:.3f}) for {n} positions; "
          f"{n / med:,.0f} positions/s; {20_000 * med / n:.2f} s per 20,000 positions")
    m = losses.metrics
    print(f"    untrained net: policy regret {m['policy_regret']:.1f} points/game (argmax {m['argmax_regret']:.1f}), "
          f"agreement {m['all.agreement']:.3f}, cross-entropy {m['all.cross_entropy']:.2f} nats, "
          f"value RMSE {m['all.value_rmse']:.1f} points")

    agent = network_agent(net, game, "none")
    gmed, glo, ghi, rep = _median(lambda: grade(agent, game.rules, games=a.grade_games, seed=1, table=table),
                                  max(1, a.repeats // 2))
    print(f"  baseline, grading by play ({a.grade_games} games): median {gmed:.3f} s (min {glo:.3f}, max {ghi:.3f}); "
          f"regret {rep.regret_mean:.1f} points/game")
    per_set = med / dset.games
    per_play = gmed / a.grade_games
    print(f"  ratio: decision set / play {med / gmed:.2f} for {dset.games} vs {a.grade_games} games; per game graded "
          f"{1e3 * per_set:.2f} ms vs {1e3 * per_play:.2f} ms ({per_play / per_set:.1f}x faster)")
    target = 20_000 * med / n
    print(f"  target: 20,000 positions <= 10 s on one thread -> {'met' if target <= 10 else 'NOT met'} "
          f"({target:.2f} s on {a.threads} thread(s))")


if __name__ == "__main__":
    main()
