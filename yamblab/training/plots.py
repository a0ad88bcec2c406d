"""Figures a user would rather see than read: learning curves, score histograms, regret breakdowns.

Every function returns a matplotlib figure (Agg backend, no display needed); the caller saves
it or logs it to MLflow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from yamblab.oracle.report import mean_ci
from yamblab.search.decision_set import SOLVER_LOSSES
from yamblab.training.config import EXACT_MODE


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def close(fig) -> None:
    _plt().close(fig)


def save_png(fig, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG (110 dpi) whole or not at all (a reader never sees half
    a file), and close it. Returns the path.

    Raises:
        OSError: the folder cannot be written (DiskFullError where the disk is full).
    """
    import io

    from yamblab.atomic import atomic_write

    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    close(fig)
    return atomic_write(path, png.getvalue())


def _loss_axis(ax, loss: str) -> None:
    """Label a learning-curve axis's y axis for ``loss``: oracle regret (from 0 up) or, for a card
    with no oracle, points behind the bot (a line at 0); and draw the grid."""
    if loss == "regret":
        ax.set_ylabel("oracle regret per game (points)")
        ax.set_ylim(bottom=0)
    else:
        ax.set_ylabel(f"{loss} per game (points)")
        ax.axhline(0.0, color="gray", lw=1)
    ax.grid(alpha=0.3)


def learning_curve(evals: list[dict], history: list[dict] | None = None, loss: str = "regret",
                   machine: str | None = None):
    """Noise-free loss per game (95% CI) of each evaluation, against training minutes and
    against the self-play positions behind it (two machines compare on the second axis).

    Args:
        evals: dicts with ``minutes``, ``per_game_regret`` (points per evaluation game) and,
            when recorded, ``positions`` (self-play positions so far) and ``steps`` (optimiser
            steps so far).
        history: per-iteration metrics (unused; kept for callers).
        loss: what ``per_game_regret`` holds: ``"regret"`` (exact, 0 = optimal play) or, for a
            Yamb card with no oracle, ``"points below heuristic"`` (paired on the same dice).
        machine: a few words on the machine, for the title.
    """
    plt = _plt()
    with_pos = bool(evals) and all(e.get("positions") is not None for e in evals)
    fig, axes = plt.subplots(1, 2 if with_pos else 1, figsize=(11 if with_pos else 6.5, 4), squeeze=False)
    axes = axes[0]
    stats_ = [mean_ci(np.asarray(e["per_game_regret"])) for e in evals]
    m = np.array([s[0] for s in stats_])
    lo = np.array([s[1] for s in stats_])
    hi = np.array([s[2] for s in stats_])
    xs = [(np.array([e["minutes"] for e in evals]), "training time (minutes)")]
    if with_pos:
        xs.append((np.array([e["positions"] for e in evals]) / 1e6, "self-play positions (millions)"))
    for ax, (x, label) in zip(axes, xs):
        if evals:
            ax.plot(x, m, "o-", color="tab:blue", label="regret / game" if loss == "regret" else loss)
            ax.fill_between(x, lo, hi, color="tab:blue", alpha=0.2, label="95% CI")
        ax.set_xlabel(label)
        _loss_axis(ax, loss)
        ax.legend(loc="upper right")
    title = ("Learning curve (lower is better; 0 = optimal play)" if loss == "regret"
             else "Learning curve (lower is better; below 0 beats the bot)")
    fig.suptitle(title + (f"\n{machine}" if machine else ""), fontsize=10)
    fig.tight_layout()
    return fig


def score_histogram(scores: np.ndarray, cfg, table):
    """The network's evaluation scores against a reference player's on the same dice: the
    optimal player where an exact oracle exists (Yahtzee, a single Yamb column), else the
    heuristic bot."""
    from yamblab.agents.base import make_agent

    plt = _plt()
    game = cfg.game_obj
    games = len(scores)
    from yamblab.oracle.report import play_scores

    ref_name = "optimal player" if game.solved else "heuristic bot"
    ref = make_agent("oracle" if game.solved else "heuristic", game, table=table)
    opt = play_scores(ref, game, games, cfg.runtime.eval_seed)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    bins = np.arange(0, max(float(np.max(opt)), float(np.max(scores)), 100) + 20, 20)
    ax.hist(opt, bins=bins, alpha=0.5, label=f"{ref_name} (mean {np.mean(opt):.1f})", color="tab:gray")
    ax.hist(scores, bins=bins, alpha=0.6, label=f"network (mean {np.mean(scores):.1f})", color="tab:blue")
    ax.set_xlabel("final score (points)")
    ax.set_ylabel("games")
    ax.set_title(f"Scores on the {games} evaluation games (same dice)")
    ax.legend()
    fig.tight_layout()
    return fig


def regret_breakdown(by_decision: dict[str, float], by_box: dict[str, float]):
    """Mean regret per game split by decision type and by the box chosen."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [1, 3]})
    a1.bar(list(by_decision), list(by_decision.values()), color="tab:orange")
    a1.set_ylabel("regret per game (points)")
    a1.set_title("by decision")
    a1.tick_params(axis="x", rotation=30)
    items = sorted(by_box.items(), key=lambda kv: -kv[1])
    a2.bar([k for k, _ in items], [v for _, v in items], color="tab:red")
    a2.set_title("box decisions, by box chosen")
    a2.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    return fig


#: what each decision mode means, for titles
MODE_WORDS = {"none": "the policy head alone", "one_step": "one-step search", "full_turn": "full-turn search",
              **{name: words for name, (words, _) in SOLVER_LOSSES.items()},
              EXACT_MODE: "full-turn search's exact regret (backward pass, no dice)"}

#: what :data:`EXACT_MODE` means on a Yamb card: one number per game of the decision set's dice
ENDGAME_WORDS = ("full-turn search's exact regret over the endgame (the decision set's games, their openings "
                 "played by the heuristic bot)")

#: The unit of each solver-graded loss and exact figure, per game (the played modes: points).
MODE_UNITS = {**{name: unit for name, (_, unit) in SOLVER_LOSSES.items()}, EXACT_MODE: "points"}


def _align(seeds: list[dict], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values (seeds, steps) with NaN where a seed has no evaluation) of one arm."""
    steps = np.array(sorted({int(k) for c in seeds for k in c["step"]}), dtype=np.int64)
    vals = np.full((len(seeds), len(steps)), np.nan)
    for i, c in enumerate(seeds):
        if name not in c:
            continue
        where = np.searchsorted(steps, np.asarray(c["step"], dtype=np.int64))
        vals[i, where] = np.asarray(c[name], dtype=np.float64)
    return steps, vals


def arm_curves(curves: dict[str, list[dict]], mode: str, loss: str = "regret", baseline: str | None = None,
               judged: list[str] | None = None, words: str | None = None):
    """The arms' learning curves in one decision mode, overlaid: for each arm the mean over its
    training seeds of each evaluation's loss per game, against training iterations and (where
    every seed logged them) against the self-play positions behind the evaluation.

    The band around each arm's curve is the 95% Student-t interval of its mean over the training
    seeds when it has several, else the evaluation's 95% CI over its games (the legend says which).

    Args:
        curves: arm -> one dict per training seed, each with ``step`` (iterations, ints),
            ``mean`` (loss per game, points) and optionally ``ci_low``/``ci_high`` (the
            evaluation's 95% CI, points) and ``positions`` (self-play positions), lists of
            equal length.
        mode: the decision mode (``"none"``, ``"one_step"``, ``"full_turn"``), for the title.
        loss: ``"regret"`` (exact, 0 = optimal play) or what else each number is (a Yamb card
            without an oracle: ``"points below heuristic"``).
        baseline: the baseline arm (drawn in black).
        judged: the arms judged on this mode (solid lines; the others, graded on it but judged
            on another mode, dashed). None: all solid.
        words: what the mode is, for the title (default :data:`MODE_WORDS`'s).
    """
    plt = _plt()
    with_pos = bool(curves) and all("positions" in c for cs in curves.values() for c in cs)
    fig, axes = plt.subplots(1, 2 if with_pos else 1, figsize=(12 if with_pos else 7, 4.4), squeeze=False)
    axes = axes[0]
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for arm, seeds in curves.items():
        steps, vals = _align(seeds, "mean")
        with np.errstate(all="ignore"):
            m = np.nanmean(vals, axis=0)
            if len(seeds) > 1:
                from scipy import stats

                n = np.sum(np.isfinite(vals), axis=0)
                half = stats.t.ppf(0.975, np.maximum(n - 1, 1)) * np.nanstd(vals, axis=0, ddof=1) / np.sqrt(n)
                lo, hi = m - half, m + half
                band = f"95% CI over {len(seeds)} seeds"
            else:
                lo, hi = _align(seeds, "ci_low")[1][0], _align(seeds, "ci_high")[1][0]
                band = "evaluation's 95% CI"
        color = "black" if arm == baseline else next(colors)
        style = "-" if judged is None or arm == baseline or arm in judged else "--"
        xs = [steps.astype(np.float64)]
        if with_pos:
            xs.append(np.nanmean(_align(seeds, "positions")[1], axis=0) / 1e6)
        for ax, x in zip(axes, xs):
            ax.plot(x, m, "o" + style, color=color, ms=3.5, lw=1.6,
                    label=f"{arm}{' (baseline)' if arm == baseline else ''}; band: {band}")
            if np.isfinite(lo).any():
                ax.fill_between(x, lo, hi, color=color, alpha=0.15)
    labels = ["training iterations", "self-play positions (millions, mean over seeds)"]
    for ax, label in zip(axes, labels):
        ax.set_xlabel(label)
        _loss_axis(ax, loss)
        if mode in MODE_UNITS:
            ax.set_ylabel(f"{mode} per game ({MODE_UNITS[mode]})")
    axes[-1].legend(loc="best", fontsize=7)
    tail = "" if judged is None else "; solid: arms judged on this mode, dashed: judged on another"
    fig.suptitle(f"Learning curves, {words or MODE_WORDS.get(mode, mode)} ({mode}):\nmean over training seeds, "
                 f"lower is better{tail}", fontsize=10)
    fig.tight_layout()
    return fig
