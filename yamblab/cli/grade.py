"""``yamblab grade`` and ``yamblab baseline``: agents played on seeded dice and graded against the
exact oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import GAME_HELP, MAX_GAMES, MAX_SEED, RULES_HELP, _bad_choice, _rules, check_game_options
from yamblab.cli.user_errors import user_errors
from yamblab.search.registry import DEPTHS
from yamblab.errors import YamblabError


def _graded_agent(agent, checkpoint, valuation, depth) -> tuple[str, str | None]:
    """The agent graded and its valuation: ``--checkpoint`` is the search agent on that network;
    ``--valuation`` and ``--depth`` belong to the search agent alone.

    Raises:
        YamblabError: an option of another agent, a missing checkpoint, an unknown depth.
    """
    if depth is not None and depth not in DEPTHS:
        raise _bad_choice("search depth", depth, list(DEPTHS))
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
    return agent, valuation


@user_errors
def grade(
    agent: Optional[str] = typer.Option(None, help="A registered agent (default greedy). Yahtzee: random, "
                                                   "greedy, oracle, search; Yamb: random, greedy, heuristic, "
                                                   "oracle (a single down/up/free column), search."),
    games: int = typer.Option(1000, min=1, max=MAX_GAMES, help="Number of games."),
    seed: int = typer.Option(0, min=0, max=MAX_SEED,
                             help="Dice seed: the same seed gives every agent the same dice."),
    rules: Optional[str] = typer.Option(None, help=RULES_HELP + " Yahtzee only (default forced)."),
    game: str = typer.Option("yahtzee", help=GAME_HELP),
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
    column_optima: bool = typer.Option(False, "--column-optima", help="A Yamb card: also solve each "
                                       "of its down, up and free columns played alone and print its "
                                       "optimal score beside the agent's points in that column (a minute "
                                       "or so per column)."),
    endgame: Optional[int] = typer.Option(None, min=0, max=12, help="A Yamb card of several columns: also "
                                          "charge the exact regret of every decision made once at most this "
                                          "many boxes are open (the exact endgame oracle; default 8, 0: off)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
):
    """Play seeded games with an agent and grade every decision against the exact oracle.

    Yahtzee and a single Yamb column (down, up or free) are graded decision by decision: the
    regret per game with its 95% CI, by decision and by box. A Yamb card of several columns
    has no exact oracle: it is compared with a bot (--versus, the heuristic by default) on the
    same dice instead: both mean scores and their paired difference with its 95% CI; and the
    decisions of its last turns, once at most --endgame boxes are open, are graded exactly.
    """
    from yamblab.agents.base import make_agent
    from yamblab.games.protocol import make_game

    check_game_options(game, rules=rules, preset=preset, columns=columns)
    agent, valuation = _graded_agent(agent, checkpoint, valuation, depth)
    if game == "yamb":
        cols = [c.strip() for c in columns.split(",")] if columns is not None else None
        if cols is not None and not all(cols):
            raise YamblabError(f"--columns {columns!r}: give column names separated by commas, e.g. free "
                               "or down,up")
        g = make_game("yamb", preset=preset or "croatian", columns=cols)
    else:
        g = make_game("yahtzee", rules or "forced")
    _check_card_options(g, versus, column_optima, endgame)
    options = {}
    if valuation is not None:
        options["valuation"] = valuation
    if depth is not None:
        options["depth"] = depth
    from yamblab.oracle.registry import grade_game, has_table

    grading = {"progress": not as_json}
    if has_table(g):                    # load (or build) the oracle table once, for agent and grader
        from yamblab.oracle.yahtzee.table import OracleTable

        grading["table"] = options["table"] = OracleTable.get(g.rules)
    a = make_agent(agent, g, seed=seed, **options)
    if column_optima:
        from yamblab.oracle.yamb.oracles import column_optima as optima

        grading["column_optima"] = optima(g.rules)
    if not g.solved:
        grading["baseline"] = make_agent(versus or "heuristic", g, seed=seed)
        if endgame != 0:
            from yamblab.search.yamb_endgame import DEFAULT_K, YambEndgameOracle

            grading["endgame"] = YambEndgameOracle(g.rules, k=min(endgame or DEFAULT_K, g.rules.n_turns))
    report = grade_game(a, g, games=games, seed=seed, **grading)
    typer.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.format())


def _check_card_options(g, versus, column_optima: bool, endgame) -> None:
    """Refuse the options of a Yamb card of several columns on a game its exact oracle grades."""
    card = g.name == "yamb" and len(g.rules.columns) > 1
    if versus is not None:
        if g.solved:
            raise YamblabError("--versus names the bot a Yamb card of several columns is compared with; "
                               "this game is graded by its exact oracle instead")
        if versus not in ("heuristic", "greedy", "random"):
            raise _bad_choice("bot to compare with", versus, ["heuristic", "greedy", "random"])
    if column_optima and not card:
        raise YamblabError("--column-optima reports the columns of a Yamb card of several columns")
    if endgame is not None and g.solved:
        raise YamblabError("--endgame grades the last turns of a Yamb card of several columns; this game is "
                           "graded by its exact oracle at every decision")


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
