"""Benchmark: random Yahtzee games per second of the batched engine (prints figures).

Baseline measured in the same run: the same random games played one at a time with the
plain-Python reference rules (yamblab.games.yahtzee.rules).

    python benchmarks/engine.py [--games 100000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from yamblab.games.dice import histogram
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import BoundaryState, legal_boxes, score_box


def batched(games: int, seed: int) -> float:
    t0 = time.perf_counter()
    b = new_batch(games, seed=seed)
    step = 0
    while not b.done.all():
        b.step(b.random_actions(seed, step))
        step += 1
    return games / (time.perf_counter() - t0)


def reference(games: int, seed: int) -> float:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    for _ in range(games):
        state = BoundaryState()
        for _turn in range(13):
            dice = [rng.randint(1, 6) for _ in range(5)]
            rolls = 2
            while True:
                hist = histogram(dice)
                boxes = legal_boxes(state, hist)
                n = len(boxes) + (32 if rolls else 0)
                pick = rng.randrange(n)
                if pick < len(boxes):
                    _, state = score_box(state, hist, boxes[pick])
                    break
                h = pick - len(boxes)
                dice = [d if (h >> i) & 1 else rng.randint(1, 6) for i, d in enumerate(dice)]
                rolls -= 1
    return games / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    fast = statistics.median(batched(args.games, s) for s in range(args.repeats))
    slow = statistics.median(reference(300, s) for s in range(args.repeats))
    print(f"batched engine: {fast:,.0f} random games/s ({args.games:,} games at once; target >= 100,000)")
    print(f"python reference (baseline): {slow:,.0f} games/s")
    print(f"ratio: {fast / slow:,.0f}x")


if __name__ == "__main__":
    main()
