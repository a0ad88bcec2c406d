"""The sweep's report: the result table as text (:func:`format_table`) and as a plot
(:func:`plot_table`), and what the parent MLflow run gets: the per-arm aggregates
(:func:`log_aggregates`) and the arms' learning curves overlaid (:func:`log_curves`).
"""

from __future__ import annotations

import json
import logging

import numpy as np

from yamblab.sweeps.stats import TARGET_HALF_WIDTH, _safe, design_for_target, minimum_detectable_effect

log = logging.getLogger(__name__)


def _identical(r: dict) -> bool:
    """Whether a compared arm played exactly the baseline's games: every paired difference 0."""
    return "diff" in r and r["diff"] == 0.0 and r["diff_low"] == 0.0 and r["diff_high"] == 0.0


def _verdict(r: dict, baseline: str) -> str:
    if "diff" not in r:
        return r.get("note") or ("(baseline)" if r["arm"] == baseline else "")
    if _identical(r):
        return "the same games: not measured"
    return ("worse" if r["diff_low"] > 0 else "better") if r["matters"] else "no clear difference"


def format_table(rows: list[dict], baseline: str, loss: str = "regret",
                 target: float | None = TARGET_HALF_WIDTH, endgame: bool = False) -> str:
    """The result table as text: one line per row of :func:`summarise`, with the decision
    mode each line is played in and each compared arm's minimum detectable effect (MDE), then
    the notes on the intervals and one line per mode with the paired intervals' half-widths
    against ``target``.

    ``loss`` names what each game's number is: ``"regret"`` (exact, against the oracle) or, for
    a Yamb card with no oracle, ``"points below heuristic"`` (paired on the same dice).
    ``target``: the half-width (points per game) the paired intervals should reach (None: no
    line on it). ``endgame``: the game is a Yamb card, whose exact mode is its endgame's.
    """
    label = "regret/game" if loss == "regret" else "behind bot/game"
    unit = "points" if loss == "regret" else "points behind the bot"
    if any(r.get("mode") in ("disagreements", "cross_entropy", "value_sq_error") for r in rows):
        label = "loss/game"
    w = max([9, *(len(r.get("mode") or "main") for r in rows)])
    head = (f"{'arm':26s} {'mode':{w}s} {'seeds':>5s} {'games':>6s} {label:>15s} {'95% CI':>18s} "
            f"{'vs ' + baseline:>14s} {'95% CI':>18s} {'MDE':>6s}  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        mode = r.get("mode") or "main"
        lead = f"{r['arm']:26s} {mode:{w}s} {r['seeds']:5d} {r.get('games', 0):6d} {r['regret']:15.2f} {ci:>18s}"
        if "diff" in r:
            dci = f"[{r['diff_low']:+.2f}, {r['diff_high']:+.2f}]"
            lines.append(f"{lead} {r['diff']:+14.2f} {dci:>18s} {r['mde']:6.2f}  {_verdict(r, baseline)}")
        elif r["arm"] == baseline:
            lines.append(f"{lead} {'(baseline)':>14s}")
        else:
            lines.append(f"{lead} {'':>14s} {'':>18s} {'':>6s}  {r.get('note', '')}".rstrip())
    spread = [f"{r['arm']}" + (f" [{r['mode']}]" if r.get("mode") else "") + ": "
              + ", ".join(f"{v:.2f}" for v in r["seed_means"]) for r in rows if len(r.get("seed_means", [])) > 1]
    lines.append("")
    if loss != "regret":
        lines.append(f"Each game's number: {loss} on the same dice (this card has no exact oracle).")
    if spread:
        lines.append("95% intervals: training seeds and evaluation games both random (two-way ANOVA, Satterthwaite's "
                     "degrees of freedom: few seeds give wide intervals), paired by seed and game.")
        lines += [f"  per-seed mean  {t}" for t in spread]
    else:
        lines.append("95% intervals over the evaluation games (one training seed per arm: seed-to-seed "
                     "spread is not included).")
    from yamblab.training.plots import ENDGAME_WORDS, EXACT_MODE, MODE_UNITS, MODE_WORDS

    for mode in dict.fromkeys(r.get("mode") for r in rows):
        if mode in MODE_UNITS:
            card_exact = endgame and mode == EXACT_MODE
            note = ("one number per network: its interval is over the training seeds alone" if mode == EXACT_MODE
                    and not endgame else f"summed over each game's {'endgame' if card_exact else 'positions of the set'}; "
                    "the games column counts the set's games")
            lines.append(f"mode {mode}: {ENDGAME_WORDS if card_exact else MODE_WORDS[mode]}, "
                         f"{MODE_UNITS[mode]} per game ({note})")
    compared = [r for r in rows if "diff" in r]
    if compared:
        lines += _comparison_notes(compared, baseline, target, unit)
    return "\n".join(lines)


def _comparison_notes(compared: list[dict], baseline: str, target: float | None, unit: str = "points") -> list[str]:
    """The table's notes on the compared arms: what MDE means, then per mode the paired
    intervals' half-widths against ``target`` and each arm's variance components with the
    design that would reach it."""
    from yamblab.training.plots import MODE_UNITS

    lines = []
    if compared:
        z = minimum_detectable_effect(1.0)
        lines.append(f"Each arm is compared with {baseline} in the mode it is judged on (played games: none, the "
                     f"policy head alone; one_step, full_turn: search; solver-graded: as named above). MDE: the "
                     f"smallest true paired difference a two-sided 5% test detects with 80% power ({z:.2f} x "
                     f"the paired interval's half-width).")
        for mode in dict.fromkeys(r.get("mode") for r in compared):
            these = [r for r in compared if r.get("mode") == mode]
            if all(_identical(r) for r in these):
                lines.append(f"  mode {mode or 'main'}: every arm played exactly the baseline's games (every paired "
                             f"difference 0): this mode cannot tell these arms apart, and its intervals measure "
                             f"nothing. Modes that can: the policy head alone (runtime.eval_modes.none) and the "
                             f"solver-graded losses (runtime.solver_eval).")
                continue
            mode_unit = MODE_UNITS.get(mode, unit)
            widths = ", ".join(f"{r['arm']} ±{r['half_width']:.2f}" for r in these)
            line = f"  mode {mode or 'main'}: paired 95% half-widths {widths}" + (
                f" ({mode_unit} per game)" if mode_unit != "points" else "")
            if target is not None:
                ok = sum(r["half_width"] <= target + 1e-12 for r in these)
                worst = max(r["half_width"] for r in these)
                line += (f"; all within the ±{target:g} target" if ok == len(these) else
                         f"; {ok} of {len(these)} within the ±{target:g} target (widest ±{worst:.2f})")
            lines.append(line)
            for r in these:
                if "sd_seed" not in r:
                    continue
                line = (f"    {r['arm']}: the difference's SD between training seeds {r['sd_seed']:.2f}, "
                        f"between games {r['sd_game']:.2f}, rest {r['sd_resid']:.2f} ({mode_unit.split(',')[0]}/game; "
                        f"from {r['seeds']} seeds, so rough)")
                if target is not None:
                    # the row's design is for the default target: plan again for this table's one
                    vc = {"seed": r["sd_seed"] ** 2, "game": r["sd_game"] ** 2, "resid": r["sd_resid"] ** 2}
                    n_seeds, n_games = design_for_target(vc, r["games"], target)
                    line += f"; ±{target:g} needs about {n_seeds} training seeds at {n_games} games"
                    if n_games > r["games"]:
                        line += f" (at {r['games']} games the games' own spread alone is too wide)"
                lines.append(line)
    return lines


def plot_table(rows: list[dict], baseline: str, loss: str = "regret"):
    """The arms side by side (a matplotlib figure): left, each arm's mean regret per game with
    its 95% interval and each training seed's mean as a dot; right, each arm's paired difference
    from the baseline with its 95% interval (green: clearly better, red: clearly worse). Where
    the rows span several decision modes, each label names its mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    several = len({r.get("mode") for r in rows}) > 1

    def label(r: dict) -> str:
        return f"{r['arm']} [{r['mode']}]" if several and r.get("mode") else r["arm"]

    has_diff = any("diff" in r for r in rows)
    fig, axes = plt.subplots(1, 2 if has_diff else 1, figsize=(max(6, 1.1 * len(rows) + 3) * (1.8 if has_diff else 1), 4.2),
                             squeeze=False)
    ax = axes[0][0]
    names = [label(r) for r in rows]
    x = np.arange(len(rows))
    means = np.array([r["regret"] for r in rows])
    err = np.array([[r["regret"] - r["ci_low"] for r in rows], [r["ci_high"] - r["regret"] for r in rows]])
    colors = ["tab:gray" if r["arm"] == baseline else ("tab:red" if r.get("matters") and r["diff"] > 0
              else "tab:green" if r.get("matters") else "tab:blue") for r in rows]
    ax.bar(x, means, yerr=err, capsize=4, color=colors, alpha=0.85)
    for i, r in enumerate(rows):
        sm = r.get("seed_means", [])
        if len(sm) > 1:
            ax.scatter(np.full(len(sm), i) + np.linspace(-0.15, 0.15, len(sm)), sm, s=14, color="black",
                       zorder=3, label="one training seed" if i == 0 else None)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("regret per game (points, 95% CI)" if loss == "regret"
                  else f"{loss} per game (points, 95% CI)")
    ax.set_title("Each arm (grey: baseline; dots: training seeds)")
    if any(len(r.get("seed_means", [])) > 1 for r in rows):
        ax.legend(loc="best", fontsize=8)
    if has_diff:
        ax2 = axes[0][1]
        d = [r for r in rows if "diff" in r]
        y = np.arange(len(d))
        dm = np.array([r["diff"] for r in d])
        derr = np.array([[r["diff"] - r["diff_low"] for r in d], [r["diff_high"] - r["diff"] for r in d]])
        dcol = ["tab:red" if r["matters"] and r["diff"] > 0 else "tab:green" if r["matters"] else "tab:blue" for r in d]
        for i in range(len(d)):
            ax2.errorbar(dm[i], y[i], xerr=derr[:, i:i + 1], fmt="o", color=dcol[i], capsize=4, lw=2)
        ax2.axvline(0.0, color="gray", lw=1, ls="--")
        ax2.set_yticks(y, [label(r) for r in d])
        ax2.invert_yaxis()
        ax2.set_xlabel(f"paired difference from {baseline} (points per game, 95% CI)")
        ax2.set_title("Which idea helps (left of 0: better)")
    fig.tight_layout()
    return fig


#: the run-summary columns a sweep prints per trial: (summary key, heading, format)
RUN_COLUMNS = (
    ("summary.exact_regret", "exact regret", "{:.2f}"),
    ("summary.policy_regret", "policy alone", "{:.2f}"),
    ("summary.minutes_to_2", "min to 2", "{:.1f}"),
    ("summary.minutes_to_1", "min to 1", "{:.1f}"),
    ("summary.minutes_to_0_5", "min to 0.5", "{:.1f}"),
    ("summary.worst_after_2", "worst after 2", "{:.2f}"),
    ("summary.positions", "M positions", "{:.2f}"),
    ("machine.oracle_seconds_start", "machine s before", "{:.2f}"),
    ("machine.oracle_seconds_end", "after", "{:.2f}"),
)


def format_run_summaries(arms: dict[str, list[tuple[int, dict]]]) -> str:
    """Each trial's own run summary (:func:`yamblab.training.summary.run_summary`) and, per arm,
    the median and range over its training seeds: what a run of the arm's config gives, with
    what spread, and how fast.

    Args:
        arms: ``{arm: [(training seed, {summary key: value}), …]}``; a threshold a run never
            reached is missing from its summary, printed "-", and counts as later than any run
            that reached it in the median and range (a median of "-": most runs did not).

    Returns:
        The block of text ("" when no trial has a summary with any of :data:`RUN_COLUMNS`).
    """
    cols = [c for c in RUN_COLUMNS if any(c[0] in s for runs in arms.values() for _, s in runs)]
    if not cols:
        return ""

    def cell(key: str, fmt: str, v) -> str:
        if v is None:
            return "-"
        if key == "summary.positions":         # a short run's few thousand positions are not "0.00"
            return f"{v / 1e6:.2f}" if v >= 1e4 or v == 0 else f"{v / 1e6:.4f}"
        return fmt.format(v)

    w = [max(10, len(h)) for _, h, _ in cols]
    head = f"{'arm':26s} {'seed':>11s} " + " ".join(f"{h:>{n}s}" for (_, h, _), n in zip(cols, w))
    lines = ["Each run's own curve (the exact full-turn regret where it is computed; minutes of its own "
             "wall time, first evaluation at or below each threshold; '-': not reached"
             + ("; machine: the oracle table's build on one thread before and after the run, in seconds, "
                "the yardstick of its minutes" if any(k.startswith("machine.") for k, _, _ in cols) else "")
             + "):", head, "-" * len(head)]
    for arm, runs in arms.items():
        for seed, s in sorted(runs, key=lambda r: r[0]):
            lines.append(f"{arm:26s} {seed:>11d} "
                         + " ".join(f"{cell(k, f, s.get(k)):>{n}s}" for (k, _, f), n in zip(cols, w)))
        if len(runs) > 1:          # a threshold a run did not reach counts as later than any that did
            for label in ("median", "min..max"):
                out = []
                for (k, _, f), n in zip(cols, w):
                    vals = np.array([s.get(k, np.inf) for _, s in runs], dtype=np.float64)
                    lo, mid, hi = (float(x) for x in (vals.min(), np.median(vals), vals.max()))
                    fin = lambda x: cell(k, f, x) if np.isfinite(x) else "-"   # noqa: E731
                    txt = fin(mid) if label == "median" else f"{fin(lo)}..{fin(hi)}"
                    out.append(f"{txt:>{n}s}")
                lines.append(f"{'':26s} {label:>11s} " + " ".join(out))
    return "\n".join(lines)


def _grid_key(t) -> tuple:
    """A grid trial's (arm, training seed): user attributes (parameters in older studies)."""
    return (t.user_attrs.get("arm", t.params.get("arm")), t.user_attrs.get("seed", t.params.get("seed")))


def log_aggregates(tracker, parent: str, rows: list[dict], baseline: str, table: str, loss: str = "regret") -> None:
    """Log the per-arm aggregates to the sweep's parent run, so the MLflow UI answers "which
    idea helps" without an export: per row of the table (``KEY``: the arm's name; the
    baseline off its main mode is ``BASELINE.MODE``) the mean regret per game across
    training seeds and evaluation games with its 95% interval (``KEY.regret``,
    ``KEY.ci_low``, ``KEY.ci_high``), the paired difference from the baseline on the arm's
    mode with its interval and minimum detectable effect (``KEY.diff``, ``KEY.diff_low``,
    ``KEY.diff_high``, ``KEY.half_width``, ``KEY.mde``), with two seeds or more the
    difference's variance components and the seeds the ±0.5 target needs (``KEY.sd_seed``,
    ``KEY.sd_game``, ``KEY.sd_resid``, ``KEY.seeds_needed``, ``KEY.games_needed``), the number of seeds and games; the
    table as text, JSON and an MLflow table (``results_table.json``, with each row's
    ``mode``); and the comparison plot with intervals (``regret_by_arm.png``). A resumed
    sweep logs them again, one step further on."""
    tracker.log_text(parent, table, "results.txt")
    tracker.log_text(parent, json.dumps(rows, indent=2), "results.json")
    if not rows:
        return
    step = len(tracker.client.get_metric_history(parent, "arms"))
    metrics: dict[str, float] = {"arms": float(len({r["arm"] for r in rows}))}
    for r in rows:
        a = r.get("key") or _safe(r["arm"])
        metrics.update({f"{a}.regret": r["regret"], f"{a}.ci_low": r["ci_low"], f"{a}.ci_high": r["ci_high"],
                        f"{a}.seeds": float(r["seeds"]), f"{a}.games": float(r["games"])})
        if "diff" in r:
            metrics.update({f"{a}.diff": r["diff"], f"{a}.diff_low": r["diff_low"],
                            f"{a}.diff_high": r["diff_high"], f"{a}.half_width": r["half_width"],
                            f"{a}.mde": r["mde"]})
        for k in ("sd_seed", "sd_game", "sd_resid", "seeds_needed", "games_needed"):
            if r.get(k) is not None:
                metrics[f"{a}.{k}"] = float(r[k])
    tracker.log_metrics(parent, metrics, step=step)
    cols = ["arm", "mode", "seeds", "games", "regret", "ci_low", "ci_high", "diff", "diff_low", "diff_high",
            "half_width", "mde", "sd_seed", "sd_game", "sd_resid", "seeds_needed", "games_needed"]
    data = {c: [r.get(c) for r in rows] for c in cols}
    data["verdict"] = [_verdict(r, baseline) for r in rows]
    data["training_seeds"] = [",".join(str(x) for x in r.get("training_seeds", [])) for r in rows]
    try:
        tracker.client.log_table(parent, data=data, artifact_file="results_table.json")
    except Exception as exc:  # noqa: BLE001 - the text and JSON forms are logged already
        log.warning("could not log the results as an MLflow table: %s", exc)
    tracker.log_figure(parent, plot_table(rows, baseline, loss), "regret_by_arm.png")


def curve_data(tracker, groups: dict[str, list], main_mode: str,
               loss: str = "regret") -> dict[str, dict[str, list[dict]]]:
    """Each arm's evaluation history in every decision mode, read back from its trials'
    MLflow runs.

    Args:
        tracker: the sweep's :class:`~yamblab.training.tracking.Tracker`.
        groups: arm -> its finished Optuna trials (their ``mlflow_run_id``, ``seed`` and
            ``eval_mode`` user attributes).
        main_mode: the main decision mode of a trial that did not store its own (the base
            config's ``eval_depth``).
        loss: what the played modes' numbers are: ``"regret"`` reads ``eval[.MODE].regret_*``;
            anything else (a Yamb card's points behind the bot) ``eval[.MODE].vs_baseline_*``.
            The solver-graded and exact modes always read ``regret_*``.

    Returns:
        mode -> arm -> one dict per training seed: ``seed``, ``step`` (iterations, int),
        ``mean``, ``ci_low``, ``ci_high`` (the evaluation's loss per game and its 95% CI,
        points; the CI may be absent) and ``positions`` (self-play positions behind each
        evaluation, where logged), float lists of equal length.
    """
    from yamblab.training.plots import MODE_UNITS

    client = tracker.client
    out: dict[str, dict[str, list[dict]]] = {}

    def history(run_id: str, name: str) -> dict[int, float]:
        return {int(m.step): float(m.value) for m in client.get_metric_history(run_id, name)}

    for arm, trials in groups.items():
        for t in trials:
            run_id = t.user_attrs.get("mlflow_run_id")
            if not run_id:
                continue
            main = t.user_attrs.get("eval_mode") or main_mode
            modes = list(dict.fromkeys([main, *(t.user_attrs.get("per_game_regret_modes") or {})]))
            positions = history(run_id, "eval.selfplay_positions")
            for mode in modes:
                key = "regret" if loss == "regret" or mode in MODE_UNITS else "vs_baseline"
                prefix = "eval." if mode == main else f"eval.{mode}."
                mean = history(run_id, f"{prefix}{key}_mean")
                if not mean:
                    continue
                lo, hi = history(run_id, f"{prefix}{key}_ci_low"), history(run_id, f"{prefix}{key}_ci_high")
                steps = sorted(mean)
                curve = {"seed": _grid_key(t)[1], "step": steps, "mean": [mean[k] for k in steps]}
                if all(k in lo and k in hi for k in steps):
                    curve["ci_low"] = [lo[k] for k in steps]
                    curve["ci_high"] = [hi[k] for k in steps]
                if all(k in positions for k in steps):
                    curve["positions"] = [positions[k] for k in steps]
                out.setdefault(mode, {}).setdefault(arm, []).append(curve)
    return out


def log_curves(tracker, parent: str, groups: dict[str, list], baseline: str, judge: dict[str, list[str]],
               main_mode: str, loss: str = "regret", endgame: bool = False) -> list[str]:
    """Log the arms' learning curves overlaid to the sweep's parent run: one figure per
    decision mode (``curves_MODE.png``, see :func:`yamblab.training.plots.arm_curves`) and
    the curves' data (``curves.json``, see :func:`curve_data`). ``judge``: arm -> the modes it
    is judged on (its curves are solid in those, dashed in the others); ``loss``: the played
    modes' (:func:`curve_data`); ``endgame``: a Yamb card, whose exact mode is its endgame's.

    Returns:
        the names of the figures logged.
    """
    from yamblab.training import plots

    data = curve_data(tracker, groups, main_mode, loss)
    tracker.log_text(parent, json.dumps(data, indent=1), "curves.json")
    names = []
    for mode, curves in data.items():
        fig = plots.arm_curves(curves, mode, loss="regret" if mode in plots.MODE_UNITS else loss, baseline=baseline,
                               judged=[a for a in curves if mode in judge.get(a, []) and a != baseline],
                               words=plots.ENDGAME_WORDS if endgame and mode == plots.EXACT_MODE else None)
        name = f"curves_{_safe(mode)}.png"
        tracker.log_figure(parent, fig, name)     # closes it
        names.append(name)
    return names
