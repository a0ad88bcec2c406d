"""Benchmark: one exact policy evaluation of a turn-perfect agent (prints figures; not a test).

The exact score of a valuation (the Best Values post's method: the backward pass run with the agent's own
choices and the true rewards) is the inner loop of ``yamblab valuation tune``. This prints the
median wall time of one evaluation of the tuned-ramp rule's table under the official rules,
with all cores and with one thread, beside the oracle's own table build timed in the same run
(a baseline: the evaluation runs the oracle's keep recursion for the agent's values and
for the true ones, plus the choice of the agent's keeps), and the reference kernel that runs the
same evaluation on whole rows of 64 upper subtotals (``_kernels.evaluate_policy``, the second
baseline: the lane-blocked kernel must beat it at the same numbers), with the ratios.

    python benchmarks/exact_eval.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.oracle.yahtzee import _kernels
from yamblab.oracle.yahtzee.policy_eval import evaluate_policy
from yamblab.rules_of_thumb.valuations import named_rule


def _median(fn, repeats: int) -> tuple[float, float, float]:
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    W = named_rule("tuned-ramp").table(OFFICIAL)
    rules = (OFFICIAL.joker_code, OFFICIAL.upper_bonus, OFFICIAL.yahtzee_bonus)
    print(f"exact evaluation of the tuned ramp (official rules), {args.repeats} runs each, {cores} cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    rows = {}
    for threads, label in ((0, "all cores"), (1, "1 thread")):
        ev = _median(lambda: evaluate_policy(W, OFFICIAL, n_threads=threads), args.repeats)
        ob = _median(lambda: _kernels.solve(*rules, threads), args.repeats)
        ref = _median(lambda: _kernels.evaluate_policy(W, *rules, threads), max(3, args.repeats // 2))
        rows[label] = (ev, ob)
        print(f"  {label:9s}: evaluation median {ev[0]:.3f} s (min {ev[1]:.3f}, max {ev[2]:.3f});  "
              f"oracle build {ob[0]:.3f} s;  reference kernel {ref[0]:.3f} s;  "
              f"evaluation / build {ev[0] / ob[0]:.2f};  evaluation / reference {ev[0] / ref[0]:.2f}")
    ev = rows["all cores"][0][0]
    print(f"  target: one evaluation <= 0.5 s -> {'met' if ev <= 0.5 else 'NOT met'} ({ev:.3f} s)")


if __name__ == "__main__":
    main()
