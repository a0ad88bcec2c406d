"""Compare two runs of the same sweep with disjoint training seeds (prints figures; not a test).

Reads each sweep's results table (the parent MLflow run's ``results_table.json`` artifact: under
``mlruns/EXPERIMENT/RUN/artifacts/``) and, for every arm and mode both judged, prints the two
paired differences with their 95% intervals and checks the two things a replication must show:
no opposite verdicts (``better`` in one, ``worse`` in the other), and every resolved effect of
one run inside the other's interval (with the margin, in the mode's unit). Exits 1 when either
fails.

    python benchmarks/compare_sweeps.py RUN1/artifacts/results_table.json RUN2/artifacts/results_table.json
"""

from __future__ import annotations

import argparse
import json
import sys


def load(path: str) -> dict[tuple[str, str], dict]:
    """(arm, mode) -> the row, for every compared row (the baseline's rows left out)."""
    with open(path) as f:
        table = json.load(f)
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    return {(r["arm"], r["mode"]): r for r in rows if r.get("diff") is not None and r.get("verdict")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first", help="results_table.json of the first run")
    p.add_argument("second", help="results_table.json of the second run")
    a = p.parse_args()
    one, two = load(a.first), load(a.second)
    ok = True
    print(f"{'arm':<24}{'mode':<17}{'run 1':>28}{'run 2':>28}  check")
    for key in sorted(set(one) & set(two)):
        r1, r2 = one[key], two[key]
        cells = [f"{r['diff']:+.3f} [{r['diff_low']:+.3f}, {r['diff_high']:+.3f}]" for r in (r1, r2)]
        notes = []
        if {r1["verdict"], r2["verdict"]} == {"better", "worse"}:
            ok = False
            notes.append("OPPOSITE verdicts")
        for mine, other, name in ((r1, r2, "1 in 2"), (r2, r1, "2 in 1")):
            if mine["verdict"] in ("better", "worse"):
                margin = min(mine["diff"] - other["diff_low"], other["diff_high"] - mine["diff"])
                if margin < 0:
                    ok = False
                notes.append(f"{name}: {'inside' if margin >= 0 else 'OUTSIDE'} by {abs(margin):.3f}")
        widths = max(r1["half_width"], r2["half_width"])
        notes.append(f"widest ±{widths:.2f}")
        print(f"{key[0]:<24}{key[1]:<17}{cells[0]:>28}{cells[1]:>28}  {r1['verdict']} / {r2['verdict']}; "
              + "; ".join(notes))
    missing = set(one) ^ set(two)
    if missing:
        print(f"rows in one run only: {sorted(missing)}")
    print("replicated: no opposite verdicts, every resolved effect inside the other run's interval"
          if ok else "NOT replicated (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
