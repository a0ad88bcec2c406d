"""Benchmark: how the solver-graded policy regret tracks the policy head's played-game regret.

Takes a training run kept with ``runtime.snapshots: true`` whose evaluations graded the policy
head alone by playing (``runtime.eval_modes: {none: GAMES}``, as ``configs/yahtzee-cpu.yaml``
does), grades every snapshot's policy head on the decision set (no games played: the
oracle's value of every legal action at the positions of the oracle's own play), and prints,
per snapshot, the played-game regret (with its 95% CI) beside the decision set's expected and
argmax regret per game, then their Pearson and Spearman correlations. With ``--plot`` it draws
both against minutes and against each other.

    python benchmarks/solver_tracking.py runs/yahtzee-cpu-DATE [--games 600] [--plot FILE.png]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="the run folder (with snapshots/ and checkpoint.pt)")
    p.add_argument("--games", type=int, default=600, help="games of oracle play the decision set comes from")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    args = p.parse_args()
    if args.games < 1:
        sys.exit("--games must be at least 1")
    snaps = sorted((args.run / "snapshots").glob("iteration-*.pt"))
    ckpt = args.run / "checkpoint.pt"
    if not snaps or not ckpt.exists():
        sys.exit(f"{args.run} has no snapshots/ or no checkpoint.pt: run with --set runtime.snapshots=true")

    import torch
    from scipy import stats

    from yamblab.model.checkpoint import load_checkpoint, load_network
    from yamblab.search.decision_set import decision_set, solver_losses
    from yamblab.oracle.report import mean_ci
    from yamblab.training.config import RunConfig
    from yamblab.training.configio import validate
    from yamblab.training.placement import machine_description

    import yaml

    torch.set_num_threads(args.threads)
    state = load_checkpoint(ckpt)
    cfg = validate(RunConfig, yaml.safe_load(state["config"]), str(ckpt))
    played = {int(e["iteration"]): e for e in json.loads(state["evals"])}
    game = cfg.game_obj
    t0 = time.perf_counter()
    dset = decision_set(game, games=args.games)
    print(f"{cfg.name}: {len(snaps)} snapshots; decision set of {len(dset)} positions from {dset.games} games "
          f"({time.perf_counter() - t0:.1f} s); {machine_description()}")
    rows = []
    for path in snaps:
        it = int(path.stem.split("-")[1])
        ev = played.get(it)
        if ev is None or "none" not in (ev.get("modes") or {}):
            continue
        snap = load_checkpoint(path)
        net = load_network(path)
        sl = solver_losses(net, dset)
        m, lo, hi = mean_ci(np.asarray(ev["modes"]["none"]["per_game_regret"], np.float64))
        rows.append({"iteration": it, "minutes": float(snap.get("minutes", ev.get("minutes", np.nan))),
                     "played": m, "played_low": lo, "played_high": hi,
                     "expected": sl.metrics["policy_regret"], "argmax": sl.metrics["argmax_regret"],
                     "agreement": sl.metrics["all.agreement"], "seconds": sl.seconds,
                     "full_turn": float(np.mean(ev["per_game_regret"]))})
    if len(rows) < 3:
        sys.exit("fewer than 3 snapshots with a played evaluation of the policy head alone")
    print(f"{'iter':>6s} {'min':>6s} {'played regret/game':>26s} {'set: expected':>14s} {'argmax':>8s} "
          f"{'agree':>6s} {'grading s':>9s}")
    for r in rows:
        ci = f"[{r['played_low']:.1f}, {r['played_high']:.1f}]"
        print(f"{r['iteration']:6d} {r['minutes']:6.1f} {r['played']:10.2f} {ci:>15s} {r['expected']:14.2f} "
              f"{r['argmax']:8.2f} {r['agreement']:6.3f} {r['seconds']:9.2f}")
    x = np.array([r["played"] for r in rows])
    for name in ("expected", "argmax"):
        y = np.array([r[name] for r in rows])
        pr, sr = stats.pearsonr(x, y), stats.spearmanr(x, y)
        lr = stats.pearsonr(np.log(x), np.log(y))
        print(f"played regret vs the set's {name} regret per game: Pearson r = {pr.statistic:.3f} "
              f"(log-log {lr.statistic:.3f}), Spearman rho = {sr.statistic:.3f} over {len(rows)} snapshots")
    print(f"grading one snapshot on the set: median {np.median([r['seconds'] for r in rows]):.2f} s "
          f"({args.threads} thread{'s' if args.threads > 1 else ''})")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.4))
        mins = [r["minutes"] for r in rows]
        a.fill_between(mins, [r["played_low"] for r in rows], [r["played_high"] for r in rows], alpha=0.2,
                       color="tab:blue")
        a.plot(mins, x, "o-", ms=3, color="tab:blue", label="played games (policy head alone), 95% CI")
        a.plot(mins, [r["argmax"] for r in rows], "s-", ms=3, color="tab:orange", label="decision set: argmax regret")
        a.plot(mins, [r["expected"] for r in rows], "^-", ms=3, color="tab:green", label="decision set: expected regret")
        a.set_yscale("log")
        a.set_xlabel("minutes of training")
        a.set_ylabel("regret per game (points, log scale)")
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=8)
        b.scatter(x, [r["argmax"] for r in rows], s=14, color="tab:orange", label="argmax")
        b.scatter(x, [r["expected"] for r in rows], s=14, color="tab:green", label="expected")
        lim = [min(x.min(), min(r["argmax"] for r in rows)) * 0.8, max(x.max(), max(r["expected"] for r in rows)) * 1.2]
        b.plot(lim, lim, "--", color="gray", lw=1, label="y = x")
        b.set_xscale("log")
        b.set_yscale("log")
        b.set_xlabel("played-game regret per game (points)")
        b.set_ylabel("decision-set regret per game (points)")
        b.grid(alpha=0.3, which="both")
        b.legend(fontsize=8)
        fig.suptitle(f"{cfg.name}: the solver-graded policy regret against the played games'; "
                     f"{machine_description()}", fontsize=9)
        fig.tight_layout()
        from yamblab.training.plots import save_png

        save_png(fig, args.plot)
        print(f"figure: {args.plot}")


if __name__ == "__main__":
    main()
