"""Learning curve of a run in every decision mode (prints figures; not a test).

A run trained with ``runtime.snapshots: true`` keeps the network of every evaluation in
``RUN/snapshots/iteration-NNNNNN.pt``. This grades those networks afterwards, in a decision mode
too costly to grade during the run on a CPU (one-step search by default), on the first
``--games`` games of the run's own evaluation dice (``runtime.eval_seed``: the games the
evaluator played), and prints the curve beside what the evaluator logged at the same iterations
(its main mode, the modes of ``runtime.eval_modes``, and the exact regret when it computed one).
Each regret is points per game below the optimal player's expected score, with its 95% CI.

    python benchmarks/mode_curve.py runs/RUN [--depth one_step] [--games 30] [--every 2]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from yamblab.agents.search_agent import network_agent
from yamblab.model.checkpoint import load_checkpoint, network_from_state
from yamblab.oracle.yahtzee.grading import grade
from yamblab.oracle.report import mean_ci
from yamblab.oracle.yahtzee.table import OracleTable
from yamblab.training.config import RunConfig
from yamblab.training.resume import CHECKPOINT


def _ci(per_game) -> str:
    """Mean and 95% interval of the evaluator's per-game regrets (the interval grading uses)."""
    m, lo, hi = mean_ci(per_game)
    return f"{m:.2f} [{lo:.2f}, {hi:.2f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="a run folder with snapshots/ and checkpoint.pt")
    p.add_argument("--depth", default="one_step", choices=["none", "one_step", "full_turn"])
    p.add_argument("--games", type=int, default=30, help="evaluation games per snapshot (the first ones)")
    p.add_argument("--every", type=int, default=1, help="grade every k-th snapshot (the last always)")
    args = p.parse_args()
    snaps = sorted((args.run / "snapshots").glob("iteration-*.pt"))
    if not snaps:
        raise SystemExit(f"{args.run}/snapshots holds no snapshot: train with --set runtime.snapshots=true")
    snaps = [s for i, s in enumerate(snaps) if i % args.every == 0 or s == snaps[-1]]
    cfg = RunConfig(**yaml.safe_load(load_checkpoint(snaps[0])["config"]))
    if cfg.game != "yahtzee":
        raise SystemExit("this curve grades Yahtzee runs (the exact oracle grades every decision)")
    evals = {}
    if (args.run / CHECKPOINT).is_file():
        evals = {e["iteration"]: e for e in json.loads(load_checkpoint(args.run / CHECKPOINT)["evals"])}
    rules, table = cfg.rules_obj, OracleTable.get(cfg.rules_obj)
    print(f"{args.run.name}: {len(snaps)} snapshots; {args.depth} graded on the first {args.games} games of "
          f"eval seed {cfg.runtime.eval_seed}, beside the evaluator's figures at the same iterations")
    modes = sorted({m for e in evals.values() for m in e.get("modes", {})})
    main_mode = cfg.search.depth if cfg.runtime.eval_depth == "search" else cfg.runtime.eval_depth
    head = ["iteration", "minutes", "M positions", f"{args.depth} (post hoc)", f"eval {main_mode}"]
    head += [f"eval {m}" for m in modes]
    print(" | ".join(head))
    t_all = time.perf_counter()
    for s in snaps:
        meta = load_checkpoint(s)
        net = network_from_state(meta, source=str(s))
        rep = grade(network_agent(net, cfg.game_obj, args.depth), rules, games=args.games,
                    seed=cfg.runtime.eval_seed, table=table)
        e = evals.get(meta["iteration"], {})
        row = [str(meta["iteration"]), f"{meta['minutes']:.1f}", f"{meta['positions_total'] / 1e6:.2f}",
               f"{rep.regret_mean:.2f} [{rep.regret_ci[0]:.2f}, {rep.regret_ci[1]:.2f}]",
               _ci(e["per_game_regret"]) if e else "-"]
        row += [_ci(e["modes"][m]["per_game_regret"]) if e and m in e.get("modes", {}) else "-" for m in modes]
        print(" | ".join(row), flush=True)
    print(f"graded in {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
