"""Benchmark: random Yamb games per second with the batched engine (prints one line per preset).

Usage: python benchmarks/yamb_engine.py [games] [preset ...]
"""

import sys
import time

from yamblab.games.yamb.rules import PRESETS
from yamblab.games.yamb.engine import play_random


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    presets = sys.argv[2:] or list(PRESETS)
    for name in presets:
        play_random(name, 100, seed=1)  # warm-up (builds the tables)
        t0 = time.perf_counter()
        b = play_random(name, n, seed=2)
        dt = time.perf_counter() - t0
        print(f"{name:14s} {n / dt:10.0f} random games/s  ({n} games in {dt:.2f} s, "
              f"mean score {b.total.mean():.1f})")


if __name__ == "__main__":
    main()
