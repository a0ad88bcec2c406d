"""``yamblab valuation``: rules of thumb evaluated, compared and tuned exactly (after "The Best Values
Aren't the Averages").

Commands:
    yamblab valuation table    every row of the post's table: exact score, bonus rate, fit error
    yamblab valuation tune     maximise a rule's exact expected score (coordinate descent, Optuna),
                               logged to MLflow

:func:`resolve_valuation` turns a ``--valuation`` argument (a name, a rule file, a ``.npy``
table or a checkpoint) into a table; ``yamblab oracle evaluate`` uses it too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from yamblab.errors import YamblabError

app = typer.Typer(help="Rules of thumb: exact evaluation and tuning "
                       "(after 'The Best Values Aren't the Averages').", no_args_is_help=True)

RULES_HELP = "Rule variant, as for `yamblab oracle evaluate` (default forced, the official rules)."
NAMES = ("zero", "oracle", "average", "average-step", "average-ramp", "fit", "fit-stages",
         "tuned-ramp", "staged-ramp")
VALUATION_HELP = (f"A name ({', '.join(NAMES)}), a rule file (.json/.yaml), a table (.npy, float64 "
                  "(4096, 3, 64)) or a checkpoint (.pt).")


def _user_errors(fn):
    from yamblab.cli.user_errors import user_errors

    return user_errors(fn)


def _rules(text: str):
    from yamblab.games.yahtzee.rules import YahtzeeRules

    return YahtzeeRules.parse(text)


def resolve_valuation(spec: str, rules, table, progress: bool = True) -> tuple[str, np.ndarray, dict]:
    """The table of a ``--valuation`` argument.

    Args:
        spec: a name of :data:`NAMES`, or the path of a rule file, a ``.npy`` table or a
            checkpoint (``.pt``; its network's value of every reachable boundary state).
        rules: the variant; table: its :class:`~yamblab.oracle.yahtzee.table.OracleTable`.

    Returns:
        ``(label, W float64 (4096, 3, 64), extra)``: extra holds a fit's error or a network's
        timings.

    Raises:
        YamblabError: an unknown name, a missing or unreadable file.
    """
    from yamblab.rules_of_thumb import valuations as V

    if spec == "oracle":
        return "oracle", np.asarray(table.values), {}
    if spec in ("fit", "fit-stages"):
        from yamblab.rules_of_thumb.occupancy import forward_occupancy

        occ = forward_occupancy(table.values, rules, progress=progress)
        rule, rms = V.fit_additive(table.values, occ.visits, 1 if spec == "fit" else 13, name=spec)
        return spec, rule.table(rules), {"fit_rms": rms, "n_params": rule.n_params}
    if spec in V.RULE_NAMES or spec in V.TUNED:
        rule = V.named_rule(spec, rules)
        return spec, rule.table(rules), {"n_params": rule.n_params}
    p = Path(spec)
    if not p.suffix:
        raise V.UnknownVariantError(f"unknown valuation {spec!r}; choose one of {', '.join(NAMES)} or give a file")
    if not p.is_file():
        raise YamblabError(f"no valuation file at {spec}")
    if p.suffix == ".npy":
        try:
            W = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise YamblabError(f"cannot read the table {spec}: {exc}") from None
        if W.shape != (4096, 3, 64):
            raise YamblabError(f"{spec} holds an array of shape {W.shape}, not (4096, 3, 64)")
        return p.stem, W.astype(np.float64), {}
    if p.suffix in (".pt", ".pth"):
        from yamblab.model.checkpoint import load_network
        from yamblab.model.exact_score import network_table

        from yamblab.games.yahtzee.game import YahtzeeGame

        net = load_network(str(p), map_location="cpu", game=YahtzeeGame(rules))
        t0 = time.perf_counter()
        W, n = network_table(net, rules, progress=progress)
        return p.stem, W, {"states_valued": n, "valuation_seconds": time.perf_counter() - t0}
    rule = V.load_rule(p)
    return rule.name, rule.table(rules), {"n_params": rule.n_params}


SUFFIXES = (".npy", ".pt", ".pth", ".json", ".yaml", ".yml")


def check_valuation_spec(spec: str, option: str = "--valuation") -> None:
    """Refuse a ``--valuation`` argument before any table is built: an unknown name, a missing
    file, a folder, or a file of a kind that holds no valuation.

    Raises:
        YamblabError: naming ``option`` and the problem.
    """
    from yamblab.rules_of_thumb import valuations as V

    if spec in NAMES or spec in V.RULE_NAMES or spec in V.TUNED:
        return
    p = Path(spec)
    if not p.suffix and not p.exists():
        raise V.UnknownVariantError(f"{option}: unknown valuation {spec!r}; choose one of "
                                    f"{', '.join(NAMES)} or give a file")
    if p.is_dir():
        raise YamblabError(f"{option}: {spec} is a folder, not a valuation file")
    if not p.is_file():
        raise YamblabError(f"{option}: no valuation file at {spec}")
    if p.suffix.lower() not in SUFFIXES:
        raise YamblabError(f"{option}: {spec} is not a valuation file: give a rule file (.json/.yaml), "
                           "a table (.npy) or a checkpoint (.pt)")


def evaluate_command(valuation: str, rules: str, breakdown: bool, as_json: bool) -> None:
    """``yamblab oracle evaluate``: the exact score (and breakdown) of a valuation's agent."""
    from yamblab.rules_of_thumb.occupancy import forward_occupancy
    from yamblab.oracle.yahtzee.policy_eval import expected_score
    from yamblab.oracle.yahtzee.table import OracleTable

    r = _rules(rules)
    check_valuation_spec(valuation)
    table = OracleTable.get(r)
    label, W, extra = resolve_valuation(valuation, r, table, progress=not as_json)
    t0 = time.perf_counter()
    v = expected_score(W, r)
    out = {"valuation": label, "rules": r.name, "exact_score": v, "optimal": table.new_game_value,
           "exact_regret": table.new_game_value - v, "seconds": time.perf_counter() - t0, **extra}
    if breakdown:
        occ = forward_occupancy(W, r, oracle=table.values, progress=not as_json)
        out.update(upper_bonus_rate=occ.upper_bonus_rate if r.upper_bonus else None,
                   yahtzee_bonus_points=occ.yahtzee_bonus_points if r.yahtzee_bonus else None,
                   regret_by_decision=occ.regret_by_decision, regret_by_box=occ.regret_by_box,
                   box_means=dict(zip(_labels(), map(float, occ.box_means))),
                   box_zero_rate=dict(zip(_labels(), map(float, occ.box_zero_rate))))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"turn-perfect play against the {label} valuation ({r.name}): exact expected score "
               f"{v:.4f} points; optimal {table.new_game_value:.4f}; shortfall (exact regret per game) "
               f"{table.new_game_value - v:.4f}  ({out['seconds']:.2f} s)")
    if breakdown:
        bonuses = []
        if out["upper_bonus_rate"] is not None:
            bonuses.append(f"upper bonus {100 * out['upper_bonus_rate']:.1f}%")
        if out["yahtzee_bonus_points"] is not None:
            bonuses.append(f"Yahtzee bonus {out['yahtzee_bonus_points']:.2f} points/game")
        if bonuses:
            typer.echo("  " + "  ".join(bonuses))
        typer.echo("  exact regret by decision  " + "  ".join(
            f"{k}: {x:.3f}" for k, x in out["regret_by_decision"].items()))
        worst = sorted(out["regret_by_box"].items(), key=lambda kv: -kv[1])
        typer.echo("  box decisions by box      " + "  ".join(f"{k}: {x:.3f}" for k, x in worst if x > 5e-4))
        typer.echo(f"  {'box':16s} {'mean':>7s} {'zero %':>7s}")
        for k in _labels():
            typer.echo(f"  {k:16s} {out['box_means'][k]:7.2f} {100 * out['box_zero_rate'][k]:7.1f}")


def _labels():
    from yamblab.games.yahtzee.rules import BOX_LABELS

    return BOX_LABELS


def table_rows(rules, progress: bool = True, occupancies: dict | None = None) -> list[dict]:
    """Every row of the Best Values post's table, computed exactly: score, bonus rate, regret, fit error.

    Args:
        rules: the variant.
        progress: show progress bars.
        occupancies: if given, filled with rule name -> its
            :class:`~yamblab.rules_of_thumb.occupancy.Occupancy` (with regrets, for the breakdown plot).

    Returns:
        one dict per row: ``rule``, ``title``, ``exact_score``, ``upper_bonus_rate`` (None
        without the bonus), ``regret``, ``regret_by_decision`` (points per game), ``fit_rms``,
        ``n_params``, the post's figures ``published``, ``published_bonus`` and ``published_fit``
        (official rules only), ``seconds`` (forward pass).
    """
    from yamblab.rules_of_thumb import valuations as V
    from yamblab.rules_of_thumb.occupancy import forward_occupancy
    from yamblab.rules_of_thumb.published import PUBLISHED, PUBLISHED_FIT, ROW_TITLES
    from yamblab.oracle.yahtzee.table import OracleTable

    from yamblab.games.yahtzee.rules import OFFICIAL

    table = OracleTable.get(rules)
    official = rules == OFFICIAL       # the post's figures are the official rules'
    rows = []
    names = ["zero", "average", "average-step", "average-ramp", "fit", "fit-stages"] + list(V.TUNED)
    for name in names:
        label, W, extra = resolve_valuation(name, rules, table, progress=False)
        t0 = time.perf_counter()
        occ = forward_occupancy(W, rules, oracle=table.values, progress=progress)
        if occupancies is not None:
            occupancies[name] = occ
        rows.append({"rule": name, "title": ROW_TITLES.get(name, name), "exact_score": occ.expected_score,
                     "upper_bonus_rate": occ.upper_bonus_rate if rules.upper_bonus else None,
                     "regret": table.new_game_value - occ.expected_score,
                     "regret_by_decision": occ.regret_by_decision,
                     "fit_rms": extra.get("fit_rms"), "n_params": extra.get("n_params"),
                     "published": PUBLISHED.get(name, (None, None))[0] if official else None,
                     "published_bonus": PUBLISHED.get(name, (None, None))[1] if official else None,
                     "published_fit": PUBLISHED_FIT.get(name) if official else None,
                     "seconds": time.perf_counter() - t0})
    return rows


def _check_png(out: Optional[Path], option: str = "--plot") -> None:
    if out is None:
        return
    if out.is_dir():
        raise YamblabError(f"{option} {out}: a folder, not a file")
    if not out.parent.is_dir():
        raise YamblabError(f"{option} {out}: no folder {out.parent} to write it in")
    if out.suffix.lower() != ".png":
        raise YamblabError(f"{option} {out}: the plot is a PNG file; give a name ending in .png")


def log_breakdown(occs: dict, rules, tracking_uri: Optional[str], experiment: str, run_name: str,
                  plot: Optional[Path] = None, params: dict | None = None) -> tuple[str, object]:
    """Log the exact breakdown of several valuations' agents to MLflow, as one run.

    Logs each label's exact score, regret, regret by decision and by box, and upper-bonus rate
    as metrics (``<label>.exact_score`` …), the figure of
    :func:`yamblab.rules_of_thumb.plots.breakdown_figure` as the artifact ``breakdown.png``
    and the numbers as ``breakdown.json``; writes the figure to ``plot`` too if given.

    Returns:
        ``(run_id, tracker)``.
    """
    from yamblab.rules_of_thumb.plots import breakdown_figure
    from yamblab.training.tracking import DEFAULT_TRACKING_URI, Tracker

    fig = breakdown_figure(occs)
    if plot is not None:
        fig.savefig(plot, dpi=110)
    tracker = Tracker(tracking_uri or DEFAULT_TRACKING_URI, experiment)
    run_id = tracker.start_run(run_name, params={"rules": rules.name, "valuations": ",".join(occs),
                                                 **(params or {})})
    try:
        numbers = {}
        for label, occ in occs.items():
            m = {"exact_score": occ.expected_score, "regret": occ.regret,
                 **{f"regret.{k.replace(' ', '_')}": v for k, v in occ.regret_by_decision.items()},
                 **{f"regret_box.{k.replace(' ', '_')}": v for k, v in occ.regret_by_box.items()}}
            if rules.upper_bonus:
                m["upper_bonus_rate"] = occ.upper_bonus_rate
            numbers[label] = m
            tracker.log_metrics(run_id, {f"{label}.{k}": v for k, v in m.items()}, step=0)
        tracker.log_text(run_id, json.dumps(numbers, indent=2), "breakdown.json")
        tracker.log_figure(run_id, fig, "breakdown.png")
    except Exception:
        tracker.end_run(run_id, "FAILED")
        raise
    tracker.end_run(run_id)
    return run_id, tracker


@app.command("table")
def table_cmd(
    rules: str = typer.Option("forced", help=RULES_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    log: bool = typer.Option(False, "--log", help="Log the rows and the plot of their exact regret by "
                                                  "decision and by box to MLflow."),
    plot: Optional[Path] = typer.Option(None, help="Write the plot of exact regret by decision and by box "
                                                   "of every row here (PNG)."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default sqlite:///mlflow.db)."),
    experiment: str = typer.Option("valuations", help="MLflow experiment (with --log)."),
):
    """The rules of thumb of "The Best Values Aren't the Averages", exact (forward and backward passes)."""
    @_user_errors
    def run():
        r = _rules(rules)
        _check_png(plot)
        occs: dict = {}
        rows = table_rows(r, progress=not as_json, occupancies=occs)
        if log:
            run_id, tracker = log_breakdown(occs, r, tracking_uri, experiment, f"table-{r.name}", plot)
            tracker.log_text(run_id, json.dumps(rows, indent=2), "table.json")
        elif plot is not None:
            from yamblab.rules_of_thumb.plots import breakdown_figure

            fig = breakdown_figure(occs)
            fig.savefig(plot, dpi=110)
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        typer.echo(f"{'rule (' + r.name + ')':42s} {'params':>6s} {'exact score':>11s} {'bonus':>6s} "
                   f"{'regret':>7s} {'fit err':>7s}   Best Values post")
        for row in rows:
            published = row["published"]
            ref = "" if published is None else f"{published:.2f}"
            if row["published_bonus"] is not None:
                ref += f", {100 * row['published_bonus']:.1f}%"
            if row["published_fit"] is not None:
                ref += f", fit {row['published_fit']:.2f}"
            fit = "" if row["fit_rms"] is None else f"{row['fit_rms']:.2f}"
            bonus = "—" if row["upper_bonus_rate"] is None else f"{100 * row['upper_bonus_rate']:5.1f}%"
            typer.echo(f"{row['title']:42s} {row['n_params'] or 0:6d} {row['exact_score']:11.4f} "
                       f"{bonus:>6s} {row['regret']:7.3f} {fit:>7s}   {ref}")
        if plot is not None:
            typer.echo(f"plot written to {plot}")
        if log:
            typer.echo(f"logged to MLflow: {tracker.ui_command()}")
    run()


@app.command("breakdown")
def breakdown_cmd(
    valuation: list[str] = typer.Option(["zero", "average-ramp", "tuned-ramp", "staged-ramp"], "--valuation", "-v",
                                        help="A valuation to compare (repeat the option): " + VALUATION_HELP),
    rules: str = typer.Option("forced", help=RULES_HELP),
    plot: Optional[Path] = typer.Option(None, help="Also write the plot here (PNG)."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default sqlite:///mlflow.db)."),
    experiment: str = typer.Option("valuations", help="MLflow experiment."),
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as JSON."),
):
    """Exact regret by decision and by box of several valuations side by side; the plot goes to MLflow."""
    @_user_errors
    def run():
        from yamblab.rules_of_thumb.occupancy import forward_occupancy
        from yamblab.oracle.yahtzee.table import OracleTable

        r = _rules(rules)
        for spec in valuation:
            check_valuation_spec(spec)
        _check_png(plot)
        table = OracleTable.get(r)
        occs: dict = {}
        for spec in valuation:
            label, W, _ = resolve_valuation(spec, r, table, progress=not as_json)
            while label in occs:
                label += "'"
            occs[label] = forward_occupancy(W, r, oracle=table.values, progress=not as_json)
        run_id, tracker = log_breakdown(occs, r, tracking_uri, experiment, f"breakdown-{r.name}", plot)
        if as_json:
            typer.echo(json.dumps({k: {"exact_score": o.expected_score, "regret": o.regret,
                                       "regret_by_decision": o.regret_by_decision,
                                       "regret_by_box": o.regret_by_box} for k, o in occs.items()}, indent=2))
            return
        from yamblab.vocabulary import decision_names

        typer.echo(f"{'valuation':24s} {'exact score':>11s} {'regret':>7s} " +
                   " ".join(f"{d:>11s}" for d in decision_names(3)))
        for label, o in occs.items():
            typer.echo(f"{label:24s} {o.expected_score:11.4f} {o.regret:7.3f} " +
                       " ".join(f"{x:11.3f}" for x in o.regret_by_decision.values()))
        if plot is not None:
            typer.echo(f"plot written to {plot}")
        typer.echo(f"logged to MLflow (artifact breakdown.png): {tracker.ui_command()}")
    run()


def _check_tuning(method: str, radius, step, out: Path | None) -> None:
    """Refuse an unknown method, an option of the other kind of method, and an ``--out`` that
    cannot be written."""
    from yamblab.errors import UnknownVariantError

    if method not in ("cd", "tpe", "cmaes"):
        raise UnknownVariantError(f"--method: unknown method {method!r}; choose cd, tpe or cmaes")
    if method == "cd" and radius is not None:
        raise YamblabError("--radius is an option of the Optuna methods (--method tpe or cmaes), not of cd")
    if method != "cd" and step is not None:
        raise YamblabError("--step is an option of coordinate descent (--method cd), not of the Optuna methods")
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        raise YamblabError(f"--out {out}: " + ("a folder, not a file" if out.is_dir() else
                                               f"no folder {out.parent} to write it in"))


def _start_rule(start: str, rules, stages: int):
    """The rule a tuning starts from: a named one or a rule file, split into ``stages`` stage
    bins when asked."""
    from yamblab.rules_of_thumb import valuations as V

    if Path(start).suffix or Path(start).exists():
        p = Path(start)
        if not p.is_file():
            raise YamblabError(f"--start: {'a folder' if p.is_dir() else 'no rule file'} at {start}")
        if p.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise YamblabError(f"--start: {start} is not a rule file (.json or .yaml)")
        rule = V.load_rule(start)
    else:
        rule = V.named_rule(start, rules)
    return V.split_stages(rule, stages) if stages else rule


def _trials_plot(scores):
    """Each trial's exact expected score and the best so far."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(scores, ".", ms=3, label="trial")
    ax.plot(np.maximum.accumulate(scores), "-", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("exact expected score")
    ax.legend()
    fig.tight_layout()
    return fig


@app.command("tune")
def tune_cmd(
    start: str = typer.Option("tuned-ramp", help="Starting rule: a name (average-ramp, tuned-ramp, "
                                                 "staged-ramp) or a rule file."),
    method: str = typer.Option("cd", help="cd (the coordinate descent of 'The Best Values "
                                                "Aren't the Averages'), tpe or cmaes (Optuna)."),
    trials: int = typer.Option(200, min=1, max=1_000_000, help="Most exact evaluations."),
    stages: int = typer.Option(0, min=0, max=13, help="Split the start's box values, bonus size and flag "
                                                      "into this many stage bins first (0: keep)."),
    step: Optional[float] = typer.Option(None, min=0.01, max=100.0,
                                         help="With --method cd: the first step, points (default 2; halved "
                                              "after a pass without a gain, down to an eighth of it)."),
    radius: Optional[float] = typer.Option(None, min=0.001, max=1000.0,
                                           help="With --method tpe or cmaes: search ± this many points "
                                                "around the start (default 3)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    out: Optional[Path] = typer.Option(None, help="Write the best rule here (JSON)."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default sqlite:///mlflow.db)."),
    experiment: str = typer.Option("valuation-tuning", help="MLflow experiment."),
):
    """Maximise a rule of thumb's exact expected score; a run per study in MLflow."""
    @_user_errors
    def run():
        from tqdm.auto import tqdm

        from yamblab.rules_of_thumb.tuning import coordinate_descent, optuna_search
        from yamblab.training.tracking import DEFAULT_TRACKING_URI, Tracker

        _check_tuning(method, radius, step, out)
        r = _rules(rules)
        rule = _start_rule(start, r, stages)
        tracker = Tracker(tracking_uri or DEFAULT_TRACKING_URI, experiment)
        run_id = tracker.start_run(f"{method}-{rule.name}-{rule.n_params}p",
                                   params={"method": method, "start": start, "n_params": rule.n_params,
                                           "trials": trials, "rules": r.name, "stages": stages,
                                           "step": step, "radius": radius})
        bar = tqdm(total=trials, desc=f"tuning {rule.name} ({method})", unit="evals")
        best = [-np.inf]

        def on_trial(n, score, trial_rule):
            if score > best[0] and out is not None:      # keep the best so far on disk
                out.write_text(trial_rule.model_copy(update={"name": f"{rule.name}-tuned"}).model_dump_json(indent=2))
            best[0] = max(best[0], score)
            tracker.log_metrics(run_id, {"score": score, "best_score": best[0]}, step=n)
            bar.update(1)
            bar.set_postfix(best=f"{best[0]:.4f}")

        t0 = time.perf_counter()
        try:
            if method == "cd":
                first = 2.0 if step is None else step
                res = coordinate_descent(rule, r, step=first, min_step=first / 8, max_evals=trials, on_trial=on_trial)
            else:
                res = optuna_search(rule, r, trials=trials, radius=3.0 if radius is None else radius,
                                    sampler=method, on_trial=on_trial)
        except ValueError as exc:
            tracker.end_run(run_id, "FAILED")
            raise YamblabError(str(exc)) from None
        finally:
            bar.close()
        dt = time.perf_counter() - t0
        best_rule = res.best.model_copy(update={"name": f"{rule.name}-tuned"})
        tracker.log_params(run_id, {f"best.{k}": round(float(x), 4) for k, x in
                                    zip(best_rule.param_names(), best_rule.vector())})
        tracker.log_metrics(run_id, {"final_best_score": res.best_score, "seconds": dt,
                                     "seconds_per_eval": dt / max(1, len(res.scores))}, step=len(res.scores))
        tracker.log_text(run_id, best_rule.model_dump_json(indent=2), "best_rule.json")
        try:
            tracker.log_figure(run_id, _trials_plot(res.scores), "score_vs_trials.png")
        finally:
            tracker.end_run(run_id)
        if out is not None:
            out.write_text(best_rule.model_dump_json(indent=2))
        typer.echo(f"best exact expected score {res.best_score:.4f} with {best_rule.n_params} parameters "
                   f"after {len(res.scores)} evaluations ({dt:.0f} s, {dt / max(1, len(res.scores)):.2f} s each)")
        typer.echo(json.dumps(dict(zip(best_rule.param_names(), np.round(best_rule.vector(), 3).tolist()))))
        if out is not None:
            typer.echo(f"rule written to {out}")
        typer.echo(f"see the study: {tracker.ui_command()}")
    run()
