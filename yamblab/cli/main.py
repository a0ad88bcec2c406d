"""The ``yamblab`` command line.

Commands:
    yamblab oracle build      build (or load) the exact table and print a new game's value
    yamblab oracle evaluate   exact expected score of turn-perfect play for a valuation
    yamblab advise            rank every legal action of a position by exact expected score
    yamblab grade             play seeded games with an agent and grade every decision
    yamblab baseline          build the oracle and grade the baseline agents (a quick tour)
    yamblab play              play a game in the terminal, every decision graded
    yamblab serve             the advice API and the browser client
    yamblab train             AlphaZero-style training on a Ray cluster (resumable)
    yamblab sweep             ablation grids and tuning studies (Optuna + Ray + MLflow)

A user's mistake (impossible dice, an unreachable position, an unknown variant …) prints
``error: …`` and exits with status 2, without a traceback.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup

from yamblab.errors import YamblabError
from yamblab.cli.user_errors import user_errors


class _Group(TyperGroup):
    """The root command: typer's own usage errors (an unknown option, a number out of range, a
    missing value) are reported like every other mistake, as one ``error: …`` line, status 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except typer.TyperException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":    # a bare group: its help
                exc.show()
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.command_path}: " if ctx is not None else ""
            typer.echo(f"error: {where}{' '.join(exc.format_message().split())}", err=True)
            sys.exit(2 if getattr(exc, "exit_code", 1) == 2 else exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=_Group,
    help="yamblab: AlphaZero-style agents for Yahtzee and Yamb, graded by an exact oracle.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
)
oracle_app = typer.Typer(help="The exact solvers: Yahtzee's table (by rule variant) and a single Yamb "
                              "column's (down, up or free).", no_args_is_help=True)
app.add_typer(oracle_app, name="oracle")

#: the most games one command grades, and the largest dice seed
MAX_GAMES = 100_000_000
MAX_SEED = 2**64 - 1

RULES_HELP = ("Rule variant: a joker rule (forced = official, free = Verhoeff, priority = the reading "
              "of the 'How The AI Works' page, none), optionally followed by ',no-upper-bonus' "
              "and/or ',no-yahtzee-bonus'.")


def _rules(text: str):
    from yamblab.games.yahtzee.rules import YahtzeeRules

    return YahtzeeRules.parse(text)


@oracle_app.command("build")
@user_errors
def oracle_build(
    rules: Optional[str] = typer.Option(None, help=RULES_HELP + " Yahtzee only (default forced)."),
    game: str = typer.Option("yahtzee", help="yahtzee (the whole game's table), or yamb (a single column, "
                                             "see --preset/--column)."),
    preset: Optional[str] = typer.Option(None, help="Yamb rule preset (default croatian; with --game yamb)."),
    column: Optional[str] = typer.Option(None, help="Yamb column to solve: down (default), up or free "
                                                    "(with --game yamb)."),
    rebuild: bool = typer.Option(False, help="Ignore a cached Yahtzee table and rebuild it."),
    cache_dir: Optional[str] = typer.Option(None, help="Yahtzee table cache folder (default $YAMBLAB_CACHE_DIR "
                                                       "or ~/.cache/yamblab)."),
):
    """Build (or load from the cache) an exact table and print the value of a new game.

    Yahtzee: the whole game's table for a rule variant (cached on disk). Yamb: the exact
    solution of a single column (down, up or free) of a preset (not cached).
    """
    if game == "yamb":
        if rules is not None:
            raise YamblabError("--rules is a Yahtzee option; Yamb takes --preset (and --column)")
        if rebuild or cache_dir is not None:
            raise YamblabError("--rebuild and --cache-dir are Yahtzee options: a Yamb column's "
                               "solution is not cached")
        from yamblab.games.yamb.rules import get_preset

        preset = preset or "croatian"
        get_preset(preset)
        col = (column or "down").strip().lower()
        if col not in ("down", "up", "free"):
            raise _bad_choice("Yamb column", column, ["down", "up", "free"])
        api = _yamb_api()
        value = api.build_column_oracle(preset, col)
        typer.echo(f"yamb preset {preset} column {col}: optimal expected score {value:.4f}")
        return
    if game != "yahtzee":
        raise _unknown_game(game)
    if preset is not None or column is not None:
        raise YamblabError("--preset and --column are Yamb options (with --game yamb)")
    if cache_dir is not None and Path(cache_dir).exists() and not Path(cache_dir).is_dir():
        raise YamblabError(f"--cache-dir {cache_dir} is a file, not a folder")
    import time

    from yamblab.oracle.yahtzee.table import OracleTable

    r = _rules(rules or "forced")
    t0 = time.perf_counter()
    table = OracleTable.get(r, directory=cache_dir, progress=True, rebuild=rebuild)
    dt = time.perf_counter() - t0
    typer.echo(f"rules {r.name}: optimal expected score of a new game {table.new_game_value:.4f} "
               f"points ({dt:.2f} s; cache {OracleTable.cache_path(r, cache_dir)})")


@oracle_app.command("evaluate")
@user_errors
def oracle_evaluate(
    valuation: str = typer.Option("zero", help="zero (greedy), oracle, a rule of thumb (average, "
                                               "average-step, average-ramp, fit, fit-stages, tuned-ramp), "
                                               "a rule file (.json/.yaml), a table (.npy) or a checkpoint (.pt)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    breakdown: bool = typer.Option(False, help="Also the exact regret per game by decision and by box, "
                                               "box means and the bonus rate (forward pass)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
):
    """Exact expected score of turn-perfect play against a valuation (no sampling noise)."""
    from yamblab.cli.valuation import evaluate_command

    evaluate_command(valuation, rules, breakdown, as_json)


@app.command()
@user_errors
def advise(
    dice: str = typer.Option(..., help="The five dice in order, e.g. 1,1,3,4,6 or 11346."),
    rolls_left: int = typer.Option(2, min=0, max=2,
                                   help="Rerolls left this turn: 2 after the first roll, 0 after the last."),
    card: str = typer.Option("", help="The scorecard so far, e.g. 'ones=3,full_house=25,yahtzee=50' "
                                     "(add 'yahtzee_bonuses=N' for bonuses earned)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    top: int = typer.Option(10, min=0, help="Show the best N actions (0: all)."),
):
    """Rank every legal keep and box of a position by its exact expected final score."""
    from yamblab.errors import UnreachablePositionError
    from yamblab.games.dice import validate_dice
    from yamblab.oracle.yahtzee.advice import advise as _advise
    from yamblab.oracle.yahtzee.advice import card_position
    from yamblab.oracle.yahtzee.table import OracleTable

    r = _rules(rules)
    validate_dice(dice)
    state, so_far, _, _ = card_position(card, r)
    if state.is_terminal:
        raise UnreachablePositionError("--card: the scorecard is full: there is nothing left to decide")
    table = OracleTable.get(r)
    ranked = _advise(table, state, dice, rolls_left, so_far)
    shown = ranked if top == 0 else ranked[:top]
    typer.echo(f"{'action':34s} {'expected final':>15s} {'loss':>9s}")
    for a in shown:
        typer.echo(f"{a.label:34s} {a.expected_final:15.4f} {a.loss:9.4f}")
    if len(shown) < len(ranked):
        typer.echo(f"… {len(ranked) - len(shown)} more (use --top 0 to see all)")


@app.command()
@user_errors
def grade(
    agent: Optional[str] = typer.Option(None, help="A registered agent (default greedy). Yahtzee: random, "
                                                   "greedy, oracle, search; Yamb: random, greedy, heuristic, "
                                                   "oracle (a single down/up/free column), search."),
    games: int = typer.Option(1000, min=1, max=MAX_GAMES, help="Number of games."),
    seed: int = typer.Option(0, min=0, max=MAX_SEED,
                             help="Dice seed: the same seed gives every agent the same dice."),
    rules: Optional[str] = typer.Option(None, help=RULES_HELP + " Yahtzee only (default forced)."),
    game: str = typer.Option("yahtzee", help="yahtzee or yamb."),
    preset: Optional[str] = typer.Option(None, help="Yamb rule preset (default croatian; with --game yamb)."),
    columns: Optional[str] = typer.Option(None, help="Yamb only: play only these columns of the preset, "
                                                     "comma-separated (e.g. free: the single free-column game, "
                                                     "graded decision by decision by its exact oracle)."),
    valuation: Optional[str] = typer.Option(None, help="For --agent search: 'oracle' or a checkpoint path."),
    checkpoint: Optional[str] = typer.Option(None, help="Grade a trained agent from this checkpoint "
                                                        "(the search agent on its network)."),
    depth: Optional[str] = typer.Option(None, help="Search depth of a network agent: none (policy "
                                                   "alone), one_step or full_turn (default)."),
    versus: Optional[str] = typer.Option(None, help="A Yamb card of several columns: the bot it is "
                                                    "compared with on the same dice (heuristic, the "
                                                    "default, greedy or random)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
):
    """Play seeded games with an agent and grade every decision against the exact oracle.

    Yahtzee and a single Yamb column (down, up or free) are graded decision by decision: the
    regret per game with its 95% CI, by decision and by box. A Yamb card of several columns
    has no exact oracle: it is compared with a bot (--versus, the heuristic by default) on the
    same dice instead: both mean scores and their paired difference with its 95% CI.
    """
    from yamblab.agents.base import make_agent
    from yamblab.games.protocol import make_game

    if game not in ("yahtzee", "yamb"):
        raise _unknown_game(game)
    if game == "yamb" and rules is not None:
        raise YamblabError("--rules is a Yahtzee option; Yamb takes --preset (and --columns)")
    if game == "yahtzee" and (preset is not None or columns is not None):
        raise YamblabError("--preset and --columns are Yamb options (with --game yamb)")
    if depth is not None and depth not in ("none", "one_step", "full_turn"):
        raise _bad_choice("search depth", depth, ["none", "one_step", "full_turn"])
    if checkpoint is not None:
        if agent not in (None, "search"):
            raise YamblabError(f"--checkpoint plays the search agent on its network; drop --agent {agent}")
        if valuation is not None:
            raise YamblabError("--checkpoint is the valuation; drop --valuation")
        if not Path(checkpoint).is_file():
            raise YamblabError(f"--checkpoint: no checkpoint file at {checkpoint}")
        agent, valuation = "search", checkpoint
    agent = agent if agent is not None else "greedy"
    if agent != "search" and valuation is not None:
        raise YamblabError(f"--valuation is an option of the search agent, not of {agent}")
    if agent != "search" and depth is not None:
        raise YamblabError(f"--depth is an option of the search agent, not of {agent}")
    if valuation is not None and valuation != "oracle" and not Path(valuation).is_file():
        raise YamblabError(f"--valuation: no checkpoint file at {valuation} (or use 'oracle')")
    if game == "yamb":
        cols = [c.strip() for c in columns.split(",")] if columns is not None else None
        if cols is not None and not all(cols):
            raise YamblabError(f"--columns {columns!r}: give column names separated by commas, e.g. free "
                               "or down,up")
        g = make_game("yamb", preset=preset or "croatian", columns=cols)
    else:
        g = make_game("yahtzee", rules or "forced")
    if versus is not None:
        if g.name != "yamb" or g.oracle_column:
            raise YamblabError("--versus names the bot a Yamb card of several columns is compared with; "
                               "this game is graded by its exact oracle instead")
        if versus not in ("heuristic", "greedy", "random"):
            raise _bad_choice("bot to compare with", versus, ["heuristic", "greedy", "random"])
    options = {}
    if valuation is not None:
        options["valuation"] = valuation
    if depth is not None:
        options["depth"] = depth
    if g.name == "yamb":
        from yamblab.oracle.yamb.grading import grade_yamb

        a = make_agent(agent, g, seed=seed, **options)
        base = None if g.oracle_column else make_agent(versus or "heuristic", g, seed=seed)
        report = grade_yamb(a, g, games=games, seed=seed, baseline=base, progress=not as_json)
    else:
        from yamblab.oracle.yahtzee.grading import grade as _grade
        from yamblab.oracle.yahtzee.table import OracleTable

        table = OracleTable.get(g.rules)
        a = make_agent(agent, g, table=table, seed=seed, **options)
        report = _grade(a, g.rules, games=games, seed=seed, table=table, progress=not as_json)
    typer.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.format())


@app.command()
@user_errors
def baseline(
    games: int = typer.Option(2000, min=1, max=MAX_GAMES, help="Games per agent."),
    seed: int = typer.Option(0, min=0, max=MAX_SEED, help="Dice seed."),
    rules: str = typer.Option("forced", help=RULES_HELP),
):
    """Build the oracle, evaluate greedy play exactly, and grade the baseline agents."""
    from yamblab.agents.base import make_agent
    from yamblab.agents.yahtzee_agents import zero_valuation
    from yamblab.oracle.yahtzee.grading import grade as _grade
    from yamblab.oracle.yahtzee.policy_eval import expected_score
    from yamblab.oracle.yahtzee.table import OracleTable

    r = _rules(rules)
    table = OracleTable.get(r, progress=True)
    typer.echo(f"optimal expected score ({r.name}): {table.new_game_value:.4f}")
    typer.echo(f"greedy (turn-perfect, zero valuation), exact: {expected_score(zero_valuation(), r):.4f}")
    for name in ("random", "greedy", "oracle"):
        report = _grade(make_agent(name, r, table=table, seed=seed), r, games=games, seed=seed,
                        table=table, progress=True)
        typer.echo(report.format())


@app.command()
@user_errors
def play(
    seed: Optional[int] = typer.Option(None, min=0, max=MAX_SEED, help="Dice seed (default: random)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    hints: bool = typer.Option(False, help="Show the oracle's move before each decision."),
):
    """Play a game of Yahtzee in the terminal; the oracle grades every decision you make."""
    import random

    from yamblab.cli.play import play_game

    play_game(_rules(rules), seed if seed is not None else random.randrange(2**32), hints)


@app.command()
@user_errors
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port."),
    rules: list[str] = typer.Option(["forced"], help=RULES_HELP + " Repeat to serve several."),
    checkpoint: Optional[str] = typer.Option(None, help="A trained checkpoint, served as agent 'checkpoint'."),
    yamb_free: bool = typer.Option(False, help="Also build the free-column Yamb oracle (about 20 s, 150 MB)."),
    target: bool = typer.Option(False, help="Also load (or build: minutes, once) the target-score table of "
                                            "the first variant: advice that maximises P(final >= T)."),
    target_max: Optional[int] = typer.Option(None, min=1, max=2000, help="With --target: the largest target "
                                                                         "the target-score table answers "
                                                                         "(default 300)."),
):
    """Serve the advice API (docs at /docs) and the browser client; prints the URL."""
    from yamblab.service.serve import check_address, run_server
    from yamblab.service.service import Service

    check_address(host, port)
    names = [_rules(r).name for r in rules]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise YamblabError(f"--rules names the variant {twice[0]} twice")
    if target_max is not None and not target:
        raise YamblabError("--target-max is an option of --target (the target-score table)")
    if checkpoint is not None:
        if not Path(checkpoint).is_file():
            raise YamblabError(f"--checkpoint: no checkpoint file at {checkpoint}")
        from yamblab.model.checkpoint import load_network

        load_network(checkpoint)      # a damaged file is refused now, not at the first request
    typer.echo("loading tables …")
    run_server(Service(rules, checkpoint=checkpoint, yamb_free=yamb_free, target=target,
                       target_max_points=target_max or 300, progress=True), host, port)


def _parse_sets(sets: list[str]) -> dict:
    """``--set train.lr=3e-4`` options as a dict of dotted keys to YAML-parsed values."""
    import yaml

    from yamblab.errors import ConfigError

    out = {}
    for item in sets or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
        k, _, v = item.partition("=")
        if not k.strip():
            raise ConfigError(f"--set {item!r}: no key before '=', e.g. train.lr=3e-4")
        try:
            out[k.strip()] = yaml.safe_load(v)
        except yaml.YAMLError:
            raise ConfigError(f"--set {item!r}: the value {v!r} is not valid YAML") from None
    return out


@app.command()
@user_errors
def train(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML (configs/…)."),
    resume: Optional[str] = typer.Option(None, help="Resume a run: its folder, or its name under runtime.run_dir."),
    address: Optional[str] = typer.Option(None, help="Join an existing Ray cluster (e.g. 'auto'); default: start a local one."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default: sqlite:///mlflow.db here)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key, e.g. --set train.lr=3e-4 (repeatable)."),
):
    """Train an agent by AlphaZero-style self-play on a Ray cluster, graded by the oracle."""
    import datetime

    from yamblab.training.runtime import CHECKPOINT, TrainingRun
    from yamblab.training.config import apply_overrides, load_run_config
    from yamblab.training.tracking import Tracker

    if resume:
        from yamblab.model.checkpoint import load_checkpoint
        from yamblab.training.config import RunConfig
        from yamblab.training.configio import validate

        run_dir = Path(resume)
        if not (run_dir / CHECKPOINT).exists():
            base = load_run_config(config).runtime.run_dir if config else "runs"
            run_dir = Path(base) / resume
        if not (run_dir / CHECKPOINT).exists():
            raise YamblabError(f"no run to resume at {resume} (looked for {run_dir / CHECKPOINT})")
        import yaml

        cfg = validate(RunConfig, yaml.safe_load(load_checkpoint(run_dir / CHECKPOINT)["config"]),
                       str(run_dir / CHECKPOINT))
        if set_:
            cfg = apply_overrides(cfg, _parse_sets(set_), "--set")
    else:
        if config is None:
            raise YamblabError("give --config configs/NAME.yaml (or --resume RUN)")
        cfg = load_run_config(config, _parse_sets(set_))
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = Path(cfg.runtime.run_dir) / f"{cfg.name}-{stamp}"
    tracker = Tracker(tracking_uri or cfg.tracking.uri, cfg.tracking.experiment)
    from yamblab.actors.cluster import init_ray

    init_ray(address)
    started = True
    run = None
    try:
        run = TrainingRun(cfg, run_dir, resume=bool(resume), tracker=tracker)
        typer.echo(f"run {run_dir} (iteration {run.iteration} of {cfg.runtime.iterations}); "
                   f"resume with: yamblab train --resume {run_dir}")
        rt = cfg.runtime
        typer.echo(f"resources: {run.backend.resources.describe()}\n"
                   f"loop: self-play plays up to {rt.max_policy_lag} weight version(s) ahead of the learner; "
                   f"replay ratio {cfg.train.replay_ratio:g} optimiser samples per new position")
        run.run()
        out = run.finish()
        last = {**run.history[-1], **(run.last_eval or {})}
        if "eval.regret_mean" in last:
            graded = (f"noise-free regret {last['eval.regret_mean']:.2f} points/game "
                      f"[{last['eval.regret_ci_low']:.2f}, {last['eval.regret_ci_high']:.2f}]")
        else:
            graded = (f"noise-free score vs the heuristic bot on the same dice "
                      f"{last.get('eval.vs_baseline_mean', float('nan')):+.1f} points/game "
                      f"[{last.get('eval.vs_baseline_ci_low', float('nan')):+.1f}, "
                      f"{last.get('eval.vs_baseline_ci_high', float('nan')):+.1f}]")
        typer.echo(f"done: {run.iteration} iterations, {run.elapsed / 60:.1f} min; {graded}, score "
                   f"{last.get('eval.score_mean', float('nan')):.1f}")
        typer.echo(f"checkpoint: {out['files'][0]}\nsee the runs: {tracker.ui_command()}")
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: the last checkpoint is kept; resume with: yamblab train --resume {run_dir}",
                   err=True)
        if run is not None and run.run_id:
            tracker.end_run(run.run_id, "KILLED")
        raise typer.Exit(130) from None
    finally:
        if started:
            import ray

            ray.shutdown()


@app.command()
@user_errors
def sweep(
    spec: Path = typer.Argument(..., help="Sweep spec YAML (experiments/…)."),
    address: Optional[str] = typer.Option(None, help="Join an existing Ray cluster (HOST:6379, or auto on "
                                          "a cluster node); default: start a local one."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI: an MLflow server "
                                               "(http://HOST:5000); default sqlite:///mlflow.db here."),
    storage: Optional[str] = typer.Option(None, help="Optuna storage: a journal file path (one driver), or "
                                          "postgresql://USER:PASS@HOST:5432/DB (several sweeps at once)."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a key of the sweep spec "
                                   "(the value is read as YAML), e.g. --set name=ablation-b --set 'seeds=[4,5,6,7]' "
                                   "--set overrides.runtime.iterations=8 (a run setting of every trial) "
                                   "--set branch_from.iterations=40. Repeatable. A new name makes a new study; "
                                   "give the same --set again to resume it."),
):
    """Run (or resume) an ablation grid or tuning study; print each arm's regret and verdict.

    Rerun the same command to resume: finished trials are kept, trials a killed driver left half done carry on from their checkpoints, and after an edit of the spec the unchanged arms are kept while changed and new arms run (it says which). A trial whose node dies resumes from its checkpoint on another node. The parent MLflow run holds each arm's mean regret with its 95% interval across training seeds and evaluation games, and a comparison plot.

    Laptop: yamblab sweep experiments/ablation-small.yaml (a local Ray cluster, MLflow in mlflow.db, the Optuna journal in .yamblab/sweeps/).

    Ray cluster (ray up infra/ray-cluster.yaml, or ray start --head / ray start --address on each machine, RAY_AUTH_MODE=token with the same token everywhere), on the head: yamblab sweep SPEC --address auto --tracking-uri http://MLFLOW:5000 --storage postgresql://USER:PASS@DB:5432/optuna, from a folder every node mounts (the checkpoints go to runs/ there).

    KubeRay: kubectl apply -f infra/rayjob.yaml (its entrypoint is this command).

    Exact steps for each: infra/README.md."""
    from yamblab.sweeps.spec import load_sweep
    from yamblab.sweeps.driver import Sweep

    import time

    t0 = time.perf_counter()
    sp, base = load_sweep(spec, storage, _parse_sets(set_) if set_ else None)
    sw = Sweep(sp, base, tracking_uri=tracking_uri, ray_address=address)
    rows = sw.run()
    if sp.branch_from is not None:
        typer.echo(f"\nsweep {sp.name}: every trial branched from one trained base at iteration "
                   f"{sw.base_iteration} and trained {base.runtime.iterations} more iterations; each arm's "
                   f"loss per game in the mode it is judged on (modes explained under the table), lower is better\n")
    else:
        typer.echo(f"\nsweep {sp.name}: oracle regret per game on the same evaluation dice (seed "
                   f"{base.runtime.eval_seed}; the games per mode are under the table), lower is better\n")
    typer.echo(sw.table_text if rows else "no finished trials")
    typer.echo(f"\nwall time {time.perf_counter() - t0:.0f} s on {_machine_speed()}")
    typer.echo(f"open the MLflow UI on these runs:  {sw.tracker.ui_command()}")


def _machine_speed() -> str:
    """The machine in a few words with its speed: the exact oracle's build on one thread (the
    official rules' table; benchmarks/oracle_build.py), a yardstick for comparing wall times."""
    import time

    from yamblab.games.yahtzee.rules import OFFICIAL
    from yamblab.oracle.yahtzee import _kernels
    from yamblab.training.runtime import machine_description

    t0 = time.perf_counter()
    _kernels.solve(OFFICIAL.joker_code, OFFICIAL.upper_bonus, OFFICIAL.yahtzee_bonus, 1)
    return f"{machine_description()}; the oracle table builds in {time.perf_counter() - t0:.2f} s on one thread"


def _yamb_api():
    try:
        return importlib.import_module("yamblab.oracle.yamb.build")
    except ModuleNotFoundError as exc:
        if exc.name == "yamblab.oracle.yamb.build":
            raise YamblabError("Yamb support is not installed in this version of yamblab") from None
        raise


def _unknown_game(game: str) -> YamblabError:
    from yamblab.errors import UnknownVariantError

    return UnknownVariantError(f"unknown game {game!r}; choose yahtzee or yamb")


def _bad_choice(what: str, value: str, choices: list[str]) -> YamblabError:
    from yamblab.errors import UnknownVariantError

    return UnknownVariantError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def _mount_optional(name: str, module: str, help_text: str) -> None:
    """Mount a sub-command group that lives in another part of the package, if present."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return
        raise
    app.add_typer(mod.app, name=name, help=help_text)


_mount_optional("model", "yamblab.cli.model", "The network: presets and summaries.")
_mount_optional("valuation", "yamblab.cli.valuation", "Rules of thumb: exact evaluation and tuning.")


def main() -> None:
    """Entry point of the ``yamblab`` console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
