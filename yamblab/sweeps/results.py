"""A sweep's results: each arm's per-game losses read back from its finished Optuna trials,
summarised against the baseline arm (:func:`~yamblab.sweeps.stats.summarise`), formatted as the
table and logged with the arms' curves to the sweep's parent MLflow run."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from yamblab.sweeps.report import _grid_key, format_run_summaries, format_table, log_aggregates, log_curves
from yamblab.sweeps.stats import ArmResult, summarise

log = logging.getLogger(__name__)


def sweep_results(sweep, study, parent: str) -> list[dict]:
    """A sweep's result rows from its study: the latest finished trial of each (arm, seed) the
    spec has now (a grid) or every finished trial (a tuning study), each arm's per-game losses
    summarised against the baseline on the same dice; the table and plots logged to the
    parent run, which is ended. Sets ``sweep.table_text`` and ``sweep.baseline``."""
    import optuna

    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
                and "per_game_regret" in t.user_attrs]
    want = sweep.grid() if sweep.spec.kind == "grid" else {}
    if sweep.spec.kind == "grid":    # the latest finished trial of each (arm, seed) the spec has now
        latest: dict[tuple, Any] = {}
        for t in sorted(complete, key=lambda t: t.number):
            key = _grid_key(t)
            d = t.user_attrs.get("config_digest")
            if key in want and (d is None or d == want[key].digest):
                latest[key] = t
        complete = list(latest.values())
    groups: dict[str, list] = {}
    for t in complete:
        key = _grid_key(t)[0] if sweep.spec.kind == "grid" else f"trial{t.number}"
        groups.setdefault(key, []).append(t)
    arms = {}
    for key, trials in groups.items():
        seed_of = (lambda t: _grid_key(t)[1]) if sweep.spec.kind == "grid" else (lambda t: t.number)
        trials = sorted(trials, key=lambda t: (seed_of(t), t.number))
        groups[key] = trials
        arms[key] = arm_result(sweep, key, trials, [seed_of(t) for t in trials], want)
    if sweep.spec.kind == "grid":
        order = [a for a in sweep.spec.arm_overrides() if a in arms]
        arms = {a: arms[a] for a in order}
        baseline = sweep.spec.baseline_arm or (order[0] if order else "")
    else:
        best = min(complete, key=lambda t: t.value).number if complete else None
        baseline = f"trial{best}" if best is not None else ""
    target = sweep.spec.target_half_width
    rows = summarise(arms, baseline, {a: m for a, m in sweep.judge.items() if a in arms}, target)
    for r in rows:
        r["training_seeds"] = [int(x) for x in arms[r["arm"]].seeds]
        r["evaluation_seed"] = int(sweep.base.runtime.eval_seed)
    played = complete[0].user_attrs.get("loss", "regret") if complete else "regret"   # the played games'
    from yamblab.search.registry import has_endgame
    from yamblab.training.plots import MODE_UNITS

    # every row exact (a card's endgame included), none a played game behind the bot: regret
    loss = "regret" if rows and all(r.get("mode") in MODE_UNITS for r in rows) else played
    endgame = has_endgame(sweep.base.game_obj)
    table = format_table(rows, baseline, loss, target, endgame=endgame)
    sweep.loss = loss
    table += _where_from(sweep)
    if sweep.base_checkpoint is None and sweep.branch_id is None and sweep.spec.kind == "grid":   # from scratch: own curves
        runs = format_run_summaries({a: [(_grid_key(t)[1], t.user_attrs.get("summary") or {})
                                         for t in groups[a]] for a in arms})
        if runs:
            table += "\n\n" + runs
    sweep.table_text = table
    sweep.baseline = baseline
    log_aggregates(sweep.tracker, parent, rows, baseline, table, loss)
    if sweep.spec.kind == "grid":
        try:
            log_curves(sweep.tracker, parent, groups, baseline, sweep.judge, sweep.base.eval_depth, played,
                       endgame=endgame)
        except Exception as exc:  # noqa: BLE001 - the table is logged already; the figures are extra
            log.warning("could not draw the arms' learning curves: %s", exc)
    sweep.tracker.end_run(parent)
    return rows


def _where_from(sweep) -> str:
    """The table's lines on what every arm was graded on: the evaluation dice, the decision set,
    and the base the trials branched from."""
    rt = sweep.base.runtime
    games = ", ".join(f"{m} {n}" for m, n in {sweep.base.eval_depth: rt.eval_games, **rt.eval_modes}.items())
    out = (f"\nTraining seeds (train.seed, one trial each): per arm above; evaluation: the same dice "
           f"(seed {rt.eval_seed}, runtime.eval_seed) for every arm, the first games of them in each "
           f"decision mode (games: {games}).")
    if rt.solver_eval:
        from yamblab.search.decision_set import DECISION_SEED
        from yamblab.search.registry import endgame_oracle, has_endgame

        game = sweep.base.game_obj
        play = (f"the endgames of {rt.solver_games} games (the heuristic bot to {endgame_oracle(game).k} open boxes, "
                f"then the endgame oracle)" if has_endgame(game) else f"{rt.solver_games} games of the oracle's own play")
        out += (f"\nSolver-graded losses: the decision set of {play} (dice seed {DECISION_SEED}), every arm "
                f"graded on the same positions.")
    if sweep.base_checkpoint is not None or sweep.branch_id is not None:
        where = sweep.base_checkpoint or sweep.base_run_dir()
        if not sweep.base_iteration and sweep.base_checkpoint is None:     # every trial done before: not loaded
            import json
            from pathlib import Path

            try:
                sweep.base_iteration = int(json.loads((Path(where) / "base-done.json").read_text())["iteration"])
            except (OSError, ValueError, KeyError, TypeError):       # unreadable: the line says "?"
                sweep.base_iteration = 0
        out += (f"\nBranched: every trial continued the base {where} from its iteration "
                f"{sweep.base_iteration or '?'} for {rt.iterations} iterations.")
    return out


def arm_result(sweep, arm: str, trials: list, seeds: list[int], want: dict) -> ArmResult:
    """One arm's results from its finished trials' user attributes: the main mode's
    per-game regrets and every other mode's (trials from before modes were stored have
    their main mode only, named by their config)."""
    per_trial = []
    for t in trials:
        ua = t.user_attrs
        main = ua.get("eval_mode")
        if main is None:
            cfg = want[_grid_key(t)].cfg if _grid_key(t) in want else sweep.base
            main = cfg.eval_depth
        by_mode = dict(ua.get("per_game_regret_modes") or {})
        by_mode.setdefault(main, ua["per_game_regret"])
        per_trial.append((main, by_mode))
    main = per_trial[0][0]
    common = [m for m in per_trial[0][1] if all(m in bm for _, bm in per_trial)]

    def stack(mode: str) -> np.ndarray:
        xs = [np.asarray(bm[mode], dtype=np.float64) for _, bm in per_trial]
        n = min(len(x) for x in xs)
        return np.stack([x[:n] for x in xs])

    return ArmResult(arm, stack(main), seeds, mode=main,
                     modes={m: stack(m) for m in common if m != main})
