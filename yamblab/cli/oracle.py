"""``yamblab oracle build``, ``yamblab oracle evaluate`` and ``yamblab advise``: the exact solvers
from the command line."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import RULES_HELP, _bad_choice, _rules, _unknown_game
from yamblab.cli.user_errors import user_errors
from yamblab.errors import YamblabError

oracle_app = typer.Typer(help="The exact solvers: Yahtzee's table (by rule variant) and a single Yamb "
                              "column's (down, up or free).", no_args_is_help=True)


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


def _yamb_api():
    try:
        return importlib.import_module("yamblab.oracle.yamb.build")
    except ModuleNotFoundError as exc:
        if exc.name == "yamblab.oracle.yamb.build":
            raise YamblabError("Yamb support is not installed in this version of yamblab") from None
        raise
