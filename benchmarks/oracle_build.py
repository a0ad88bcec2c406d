"""Benchmark: full oracle-table build time and peak memory (prints figures; not a test).

Prints the median wall time of building the official-rules table with all cores and with one
thread (the baseline measured in the same run), their ratio, and the process's peak memory.

    python benchmarks/oracle_build.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics

from yamblab.oracle.yahtzee.table import timed_build


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    timed_build(0)  # warm-up
    full = [timed_build(0) for _ in range(args.repeats)]
    one = [timed_build(1) for _ in range(args.repeats)]
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mf, m1 = statistics.median(full), statistics.median(one)
    print(f"oracle build (official rules), {args.repeats} runs each, {cores} cores")
    print(f"  all cores : median {mf:.3f} s  (min {min(full):.3f}, max {max(full):.3f})")
    print(f"  1 thread  : median {m1:.3f} s  (baseline)")
    print(f"  speed-up over 1 thread: {m1 / mf:.2f}x   target: full table <= 2 s -> "
          f"{'met' if mf <= 2.0 else 'NOT met'}")
    print(f"  peak RSS {rss1 / 1024:.1f} MiB (before the builds {rss0 / 1024:.1f} MiB; table 6.0 MiB float64)")


if __name__ == "__main__":
    main()
