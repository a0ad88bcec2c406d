"""The learning curve of Yamb training runs in mean score: the search agent, the policy head alone
and the bot they are paired with, against minutes and self-play positions, beside a target.

A Yamb card has no exact oracle, so a Yamb run's evaluations (``checkpoint.pt``'s ``evals``)
pair each of its fixed evaluation games with a bot's score on the same dice (``per_game_regret``
= the bot's points minus the agent's). This script turns them back into mean scores, prints the
mean of the evaluations in each band of minutes (one evaluation plays about 100 games, so a
single one is noisy: its standard error is about 11 points on ``jamb_nn``), and draws the
curves with a published figure to beat as a line (``--target``).

    python benchmarks/yamb_curve.py runs/RUN [runs/OTHER ...] [--band 20] \\
        [--target 1722.09 --target-label "JambNeuralNetwork (PPO)"] [--plot FILE.png]

Pass run folders, or a folder of run folders (a sweep's). A run carried on with
``yamblab train --resume`` keeps its evaluations, so its curve runs on from where it stopped.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from yamblab.training.summary import run_label as label

#: the columns of :func:`score_series`
COLUMNS = ("minutes", "positions", "search", "policy", "bot")


def score_series(evals: list[dict]) -> np.ndarray:
    """float64 (k, 5): each evaluation's minutes, self-play positions and mean scores (points a
    game) of the run's agent (its main mode: full-turn search by default), its policy head alone
    (nan where not played) and the bot on the same dice.

    Raises:
        ValueError: an evaluation that was not paired with a bot (a Yahtzee run graded by the
            exact oracle: see ``benchmarks/seed_curves.py``).
    """
    from yamblab.training.summary import POLICY_MODE

    rows = []
    for e in evals:
        if not str(e.get("loss", "")).startswith("points below") or "scores" not in e:
            raise ValueError(f"the evaluation at {e.get('minutes', float('nan')):.1f} minutes was not paired "
                             f"with a bot (loss {e.get('loss')!r}): this script reads Yamb card runs")
        agent = np.asarray(e["scores"], np.float64)
        bot = agent + np.asarray(e["per_game_regret"], np.float64)
        modes = e.get("modes") or {}
        policy = (float(np.mean(bot - np.asarray(modes[POLICY_MODE]["per_game_regret"], np.float64)))
                  if POLICY_MODE in modes else math.nan)
        rows.append((float(e["minutes"]), float(e["positions"]), float(agent.mean()), policy, float(bot.mean())))
    return np.asarray(rows, np.float64).reshape(-1, len(COLUMNS))


def bands(s: np.ndarray, width: float) -> list[tuple[float, float, int, float, float, float, float]]:
    """The means of the evaluations in each band of ``width`` minutes (empty bands left out; an
    evaluation up to half a minute past a band's end counts in it).

    Args:
        s: :func:`score_series`'s array.
        width: the band's width in minutes (> 0).

    Returns:
        ``(from, to, evaluations, M positions at the band's last one, search, policy head
        alone, search minus bot)`` per band; a mean over evaluations in points a game.

    Raises:
        ValueError: a width that is not positive.
    """
    if not width > 0:
        raise ValueError(f"the band width must be positive minutes, not {width}")
    out = []
    # an evaluation up to half a minute past a band's end counts in it: a run's last evaluation
    # falls just after its time budget, and would otherwise make a band of its own
    band = np.maximum(np.floor((s[:, 0] - 0.5) / width), 0)
    for k in np.unique(band):
        rows = s[band == k]
        with np.errstate(all="ignore"):
            policy = float(np.nanmean(rows[:, 3])) if np.isfinite(rows[:, 3]).any() else math.nan
        out.append((k * width, (k + 1) * width, len(rows), rows[-1, 1] / 1e6, float(rows[:, 2].mean()), policy,
                    float((rows[:, 2] - rows[:, 4]).mean())))
    return out


def rolling(y: np.ndarray, window: int) -> np.ndarray:
    """The centred moving mean of ``y`` over ``window`` points (fewer at the ends; nans skipped)."""
    half = window // 2
    out = np.full(len(y), math.nan)
    for i in range(len(y)):
        part = y[max(0, i - half): i + half + 1]
        if np.isfinite(part).any():
            out[i] = np.nanmean(part)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+", help="run folders, or a folder of run folders")
    p.add_argument("--band", type=float, default=20.0, help="minutes per band of the printed table (default 20)")
    p.add_argument("--target", type=float, default=None, help="a mean score to beat, drawn as a line")
    p.add_argument("--target-label", default="target", help="the target line's label")
    p.add_argument("--window", type=int, default=9, help="evaluations in the plot's moving mean (default 9)")
    p.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    a = p.parse_args()
    if not a.band > 0 or a.window < 1:
        sys.exit("--band must be positive minutes and --window at least 1 evaluation")
    from yamblab.errors import YamblabError
    from yamblab.training.summary import load_run_evals

    try:
        runs = load_run_evals(a.runs)
        curves = {n: score_series(runs[n]) for n in sorted(runs)}
    except (FileNotFoundError, ValueError, YamblabError) as exc:
        sys.exit(str(exc))
    # each run's bot and main decision mode, as its last evaluation names them
    bots = {n: runs[n][-1]["loss"].removeprefix("points below ") for n in curves if runs[n]}
    modes = {n: runs[n][-1].get("mode", "full_turn") for n in curves if runs[n]}
    for n, s in curves.items():
        if not len(s):
            print(f"\n{label(n)}: no evaluations yet")
            continue
        bot = bots[n]
        print(f"\n{label(n)}: {len(s)} evaluations, each {len(runs[n][-1]['scores'])} games; the {bot} bot "
              f"scores {s[-1, 4]:.1f} on them")
        print(f"{'minutes':>13} {'evals':>6} {'M pos':>7} {'search':>8} {'policy':>8} {'vs ' + bot:>14}")
        for lo, hi, k, mpos, search, policy, vs in bands(s, a.band):
            print(f"{lo:6.0f}-{hi:<6.0f} {k:6d} {mpos:7.2f} {search:8.1f} {policy:8.1f} {vs:+14.1f}")
        last = s[-1]
        print(f"last evaluation ({last[0]:.1f} min, {last[1] / 1e6:.2f} M positions): search {last[2]:.1f}, "
              f"policy head alone {last[3]:.1f}"
              + (f"; target {a.target:.2f} ({a.target_label})" if a.target is not None else ""))
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from yamblab.training.plots import MODE_WORDS, save_png

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (n, s) in enumerate(curves.items()):
            if not len(s):
                continue
            c = colors[i % len(colors)]
            for ax, x in zip(axes, (s[:, 0], s[:, 1] / 1e6)):
                ax.plot(x, s[:, 2], ".", color=c, ms=2.5, alpha=0.35)
                ax.plot(x, rolling(s[:, 2], a.window), "-", color=c, lw=1.8,
                        label=f"{label(n)}: {MODE_WORDS.get(modes[n], modes[n])}")
                if np.isfinite(s[:, 3]).any():
                    ax.plot(x, rolling(s[:, 3], a.window), "--", color=c, lw=1.2,
                            label=f"{label(n)}: policy head alone")
            for ax in axes:
                ax.axhline(s[-1, 4], color=c, lw=0.9, ls=":", label=f"{bots[n]} bot on the same games")
        for ax, xl in zip(axes, ("minutes", "self-play positions (millions)")):
            if a.target is not None:
                ax.axhline(a.target, color="black", lw=1.1, ls="-.", label=f"{a.target_label}: {a.target:g}")
            ax.set_xlabel(xl)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("mean score a game (points)")
        lo = min(float(np.nanmin(s[:, 2:5])) for s in curves.values() if len(s))
        hi = max([float(np.nanmax(s[:, 2:5])) for s in curves.values() if len(s)]
                 + ([a.target] if a.target is not None else []))
        axes[0].set_ylim(max(lo, hi - 400), hi + 15)      # the early games' low scores would flatten the rest
        axes[0].legend(fontsize=7, loc="lower right")
        fig.suptitle(f"mean score on the evaluation games (dots: each evaluation; lines: moving mean of {a.window})")
        fig.tight_layout()
        save_png(fig, a.plot)
        print(f"\nwrote {a.plot}")


if __name__ == "__main__":
    main()
