"""The learning curves of several training runs of one config (its training seeds), side by side.

Reads each run folder's checkpoint (``checkpoint.pt``: every evaluation's minutes, self-play
positions and per-game regrets) and prints, for the headline regret (the exact full-turn regret
where the runs compute it) and the policy head alone, each seed's value at the last evaluation
at or before each minute mark, with the median and range over the seeds; then draws both
against minutes and against self-play positions, one line per seed (``--plot``). Pass the run
folders, or a sweep's runs folder (``runs/sweeps/NAME``: every run in it).

    python benchmarks/seed_curves.py runs/sweeps/yahtzee-seeds [--marks 5 10 15 20 25 30] [--plot FILE.png]

Curves against positions show learning per position apart from the machine's speed: a faster
machine moves the minute curve left, not the position curve.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from yamblab.training.summary import run_label as label


def series(evals: list[dict], which: str) -> np.ndarray:
    """float64 (k, 3): minutes, self-play positions, regret points/game of each evaluation;
    ``which``: ``"headline"`` (exact full-turn where computed) or ``"policy"`` (the policy
    head alone, the ``none`` mode)."""
    from yamblab.training.summary import POLICY_MODE, regret_series

    if which == "headline":
        return np.asarray(regret_series(evals)[1], np.float64).reshape(-1, 3)
    rows = [(e["minutes"], e["positions"], float(np.mean(e["modes"][POLICY_MODE]["per_game_regret"])))
            for e in evals if POLICY_MODE in (e.get("modes") or {})]
    return np.asarray(rows, np.float64).reshape(-1, 3)


def at_marks(s: np.ndarray, marks: list[float]) -> list[float]:
    """The regret of the last evaluation at or before each minute mark (nan before the first,
    and past the run's last evaluation by more than half a minute: a run stopped or still going)."""
    out = []
    for m in marks:
        before = np.flatnonzero(s[:, 0] <= m + 1e-9)
        late = not len(s) or m > s[-1, 0] + 0.5
        out.append(float(s[before[-1], 2]) if before.size and not late else float("nan"))
    return out


def first_reached(evals: list[dict]) -> dict[float, tuple[float, float]]:
    """Threshold -> (minutes, self-play positions) of the first evaluation whose headline regret
    is at or below it (:func:`yamblab.training.summary.run_summary`'s ``minutes_to_T``)."""
    from yamblab.training.summary import THRESHOLDS, _key, run_summary

    sm = run_summary(evals)
    return {t: (sm[f"summary.minutes_to_{_key(t)}"], sm[f"summary.positions_to_{_key(t)}"])
            for t in THRESHOLDS if f"summary.minutes_to_{_key(t)}" in sm}


def print_first_reached(runs: dict[str, list[dict]], names: list[str]) -> None:
    """Print each run's minutes (and M positions) to first reach each regret threshold, with the
    median over the runs (a run that did not reach a threshold counts as later than any that
    did: "-" where most did not); where runs evaluated more densely early (``runtime.eval_early``), also
    what the whole evaluations alone (``eval_every``'s grid) would have said."""
    from yamblab.training.summary import THRESHOLDS

    grids = [("all evaluations", lambda e: True)]
    if any(not e.get("whole", True) for n in names for e in runs[n]):
        grids.append(("the whole evaluations only (eval_every's grid)", lambda e: e.get("whole", True)))
    for title, keep in grids:
        print(f"\nminutes (M positions) to first reach each regret, {title}")
        print(f"{'run':<34}" + "".join(f"{'<=' + format(t, 'g'):>16}" for t in THRESHOLDS))
        table = []
        for n in names:
            hit = first_reached([e for e in runs[n] if keep(e)])
            table.append([hit.get(t, (np.inf, np.nan))[0] for t in THRESHOLDS])
            print(f"{label(n):<34}" + "".join(
                f"{f'{hit[t][0]:.1f} ({hit[t][1] / 1e6:.2f})' if t in hit else '-':>16}" for t in THRESHOLDS))
        # a threshold a run did not reach counts as later than any run that did (as in the sweep's table)
        med = np.median(np.asarray(table, np.float64), axis=0)
        print(f"{'median (minutes)':<34}" + "".join(f"{v:>16.1f}" if np.isfinite(v) else f"{'-':>16}" for v in med))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+", help="run folders, or a folder of run folders")
    p.add_argument("--marks", type=float, nargs="+", default=[2.5, 5, 7.5, 10, 15, 20, 25, 30],
                   help="minute marks of the printed table")
    p.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    a = p.parse_args()
    from yamblab.errors import YamblabError
    from yamblab.training.summary import load_run_evals

    try:
        runs = load_run_evals(a.runs)
    except (FileNotFoundError, YamblabError) as exc:
        sys.exit(str(exc))
    names = sorted(runs)
    curves = {w: {n: series(runs[n], w) for n in names} for w in ("headline", "policy")}
    from yamblab.training.summary import regret_series

    head = {"exact_regret": "exact full-turn regret"}.get(regret_series(runs[names[0]])[0], "regret")
    for w, title in (("headline", head), ("policy", "policy head alone")):
        if not any(len(s) for s in curves[w].values()):
            continue
        print(f"\n{title} (points/game) at the last evaluation by each minute mark")
        print(f"{'run':<34}" + "".join(f"{m:>8g}" for m in a.marks) + f"{'end':>8}" + "  (min, M positions)")
        grid = []
        for n in names:
            s = curves[w][n]
            vals = (at_marks(s, a.marks) if len(s) else [float("nan")] * len(a.marks)) \
                + [float(s[-1, 2]) if len(s) else float("nan")]
            grid.append(vals)
            end = f"({s[-1, 0]:.1f}, {s[-1, 1] / 1e6:.2f})" if len(s) else ""
            print(f"{label(n):<34}" + "".join(f"{v:>8.2f}" for v in vals) + f"  {end}")
        g = np.asarray(grid)
        with np.errstate(all="ignore"):
            print(f"{'median':<34}" + "".join(f"{v:>8.2f}" for v in np.nanmedian(g, axis=0)))
            print(f"{'min':<34}" + "".join(f"{v:>8.2f}" for v in np.nanmin(g, axis=0)))
            print(f"{'max':<34}" + "".join(f"{v:>8.2f}" for v in np.nanmax(g, axis=0)))
    print_first_reached(runs, names)
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, n in enumerate(names):
            for w, style, what in (("headline", "o-", head), ("policy", "s--", "policy head alone")):
                s = curves[w][n]
                if len(s):
                    for ax, x in zip(axes, (s[:, 0], s[:, 1] / 1e6)):
                        ax.plot(x, s[:, 2], style, color=colors[i % len(colors)], ms=3, lw=1.3,
                                label=f"{label(n)}: {what}")
        for ax, xl in zip(axes, ("minutes", "self-play positions (millions)")):
            ax.set_yscale("log")
            ax.set_xlabel(xl)
            ax.set_ylabel("regret per game (points, log scale)")
            ax.grid(alpha=0.3, which="both")
        axes[0].legend(fontsize=7, loc="upper right")
        fig.suptitle(f"{len(names)} training runs: {head} (solid) and the policy head alone (dashed)")
        fig.tight_layout()
        from yamblab.training.plots import save_png

        save_png(fig, a.plot)
        print(f"\nwrote {a.plot}")


if __name__ == "__main__":
    main()
