"""The bad-input tally: how the command line answers malformed input, counted.

Runs every generator of ``tests/test_bad_input.py`` (dice, scorecards, rule strings, presets,
columns, agents, paths, numbers out of range, options that do not apply, run configs and sweep
specs with a bad key or value at any depth) and counts, instead of asserting, what each input
got:

* clean error: status 2, one ``error: …`` line naming the problem, nothing else, no file left;
* traceback: a Python exception reached the user (or work started: a stub was reached);
* silently accepted: status 0;
* unclean: refused, but not as the contract says (another status, more lines, unnamed …).

    python benchmarks/bad_input_tally.py            # totals and a line per command
    python benchmarks/bad_input_tally.py --show     # also every input that was not clean

Nothing real runs: no training, no sweep, no server (see the test module's stubs).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", action="store_true", help="print every input that was not a clean error")
    ap.add_argument("--examples", type=int, default=40, help="examples per generator (the tests run 12)")
    args = ap.parse_args()
    os.environ["YAMBLAB_FUZZ_EXAMPLES"] = str(args.examples)
    spec = importlib.util.spec_from_file_location("test_bad_input", ROOT / "tests" / "test_bad_input.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["test_bad_input"] = mod
    spec.loader.exec_module(mod)
    mod.RECORD = []
    t0 = time.perf_counter()
    with mod.workspace():
        for name in sorted(n for n in dir(mod) if n.startswith("test_")):
            fn = getattr(mod, name)
            if hasattr(fn, "hypothesis"):
                fn()
    dt = time.perf_counter() - t0
    kinds = collections.Counter()
    by_cmd: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for cmd, verdict, argv, output in mod.RECORD:
        kind = verdict.split(":")[0]
        kinds[kind] += 1
        by_cmd[cmd][kind] += 1
        if args.show and kind != "clean":
            print(f"{verdict}\n  yamblab {' '.join(argv)}\n  " + output.strip().replace("\n", "\n  "))
    total = len(mod.RECORD)
    print(f"inputs tried {total}; clean errors {kinds['clean']}; tracebacks {kinds['traceback']}; "
          f"silently accepted {kinds['accepted']}; unclean refusals {kinds['unclean']}  ({dt:.1f} s)")
    for cmd in sorted(by_cmd):
        c = by_cmd[cmd]
        print(f"  {cmd:18s} {sum(c.values()):4d} tried  {c['clean']:4d} clean  {c['traceback']:3d} tracebacks  "
              f"{c['accepted']:3d} accepted  {c['unclean']:3d} unclean")
    return 0 if kinds["clean"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
