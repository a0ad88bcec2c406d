"""Solve the free Yamb column exactly and print its value, state count, time and peak memory.

Usage: ``python benchmarks/yamb_free_column.py [--preset croatian] [--threads 1] [--chunk 64]``
(several ``--preset`` allowed). Also checks free ≥ down and free ≥ up (a free column may play
either order) with :class:`yamblab.oracle.yamb.column.ColumnOracle`.
"""

from __future__ import annotations

import argparse
import resource
import time

from yamblab.oracle.yamb.column import ColumnOracle, free_column_state_count
from yamblab.oracle.yamb.free import FreeColumnOracle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", action="append", help="preset(s) to solve (default croatian)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--simulate", type=int, default=0,
                    help="also play this many seeded engine games with the oracle's advice")
    ap.add_argument("--no-check", action="store_true", help="skip the down/up comparison")
    a = ap.parse_args()
    for preset in a.preset or ["croatian"]:
        count = free_column_state_count(preset)
        t0 = time.perf_counter()
        o = FreeColumnOracle(preset, n_threads=a.threads, chunk=a.chunk)
        dt = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        line = (f"{preset}: free column {o.value:.4f} points; reachable states "
                f"{count['states']:,}, lanes solved {o.n_states:,} ({o.table_bytes / 1e6:.1f} MB); "
                f"solve {o.solve_seconds:.1f} s (total {dt:.1f} s, {a.threads} thread(s)); "
                f"peak RSS so far {peak:.0f} MiB")
        if not a.no_check:
            down, up = ColumnOracle(preset, "down").value, ColumnOracle(preset, "up").value
            assert o.value >= max(down, up) - 1e-9, (o.value, down, up)
            line += f"; down {down:.4f}, up {up:.4f}"
        print(line, flush=True)
        if a.simulate:
            import numpy as np

            from yamblab.games.yamb.engine import YambBatch
            from yamblab.oracle.yamb.free import FreeColumnOracleAgent

            b = YambBatch(a.simulate, o.rules, seed=2024)
            agent = FreeColumnOracleAgent(o)
            t1 = time.perf_counter()
            while not b.done.all():
                b.step(agent.act(b))
            m, se = float(b.total.mean()), float(b.total.std(ddof=1) / np.sqrt(b.n))
            print(f"  simulated {b.n} games (seed 2024): mean {m:.2f} ± {1.96 * se:.2f} (95%), "
                  f"oracle {o.value:.4f}, z = {(m - o.value) / se:+.2f} "
                  f"({time.perf_counter() - t1:.0f} s)", flush=True)
        del o


if __name__ == "__main__":
    main()
