"""The target-score table (timpalpant/yahtzee): build time and memory, P(final >= T) checked by simulation.

Prints: the build time of the table (official rules, targets up to ``--max-points`` points), its
size and the process's peak memory; the table's P(final >= T) for a new game under play that
maximises it; the share of seeded games reaching T under that play (a simulation of the policy,
with a 95% Clopper-Pearson interval from scipy) and under expected-score play (the oracle agent;
timpalpant/yahtzee and the issue quote about 14.4% for T = 300).

    python benchmarks/target_score.py                   # T = 300, 20,000 + 100,000 games
    python benchmarks/target_score.py --games 5000      # quicker
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from scipy import stats

from yamblab.games.yahtzee.rules import OFFICIAL, BoundaryState
from yamblab.oracle.yahtzee.target import TargetTable, simulate_target_play


def _share(hits: int, n: int) -> str:
    ci = stats.binomtest(hits, n).proportion_ci(0.95)
    return f"{100 * hits / n:.2f}% [{100 * ci.low:.2f}, {100 * ci.high:.2f}] ({n} games)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", type=int, default=300)
    ap.add_argument("--max-points", type=int, default=300)
    ap.add_argument("--games", type=int, default=20000, help="games of target play")
    ap.add_argument("--ev-games", type=int, default=100000, help="games of expected-score play")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rebuild", action="store_true", help="build even if the table is cached")
    args = ap.parse_args()

    t0 = time.perf_counter()
    table = TargetTable.get(OFFICIAL, args.max_points, progress=True, rebuild=args.rebuild)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    how = f"built in {table.build_seconds:.0f} s" if table.build_seconds else f"loaded in {dt:.1f} s"
    print(f"target table ({OFFICIAL.name}, up to {args.max_points} points): {how}; "
          f"{table.data.nbytes / 1e6:.0f} MB float32; peak memory {peak:.0f} MB")
    p = table.probability(BoundaryState(), args.target)
    print(f"P(final >= {args.target}) under target play, from the table: {100 * p:.2f}%")

    t0 = time.perf_counter()
    scores = simulate_target_play(table, args.target, args.games, seed=args.seed)
    hits = int((scores >= args.target).sum())
    print(f"  simulated target play: {_share(hits, args.games)}  mean score {scores.mean():.1f}  "
          f"({time.perf_counter() - t0:.0f} s)")

    from yamblab.agents.base import make_agent
    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.oracle.yahtzee.table import OracleTable

    ev = OracleTable.get(OFFICIAL)
    agent = make_agent("oracle", OFFICIAL, table=ev)
    ev_scores = []
    for start in range(0, args.ev_games, 5000):
        b = new_batch(min(5000, args.ev_games - start), OFFICIAL, seed=args.seed + 1, first_game=start)
        agent.reset(b)
        while not b.done.all():
            b.step(agent.act(b))
        ev_scores.append(b.total.astype(np.int64))
    ev_scores = np.concatenate(ev_scores)
    hits_ev = int((ev_scores >= args.target).sum())
    print(f"  simulated expected-score play: {_share(hits_ev, args.ev_games)}  mean score {ev_scores.mean():.1f}")


if __name__ == "__main__":
    main()
