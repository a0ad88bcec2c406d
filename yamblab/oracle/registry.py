"""Each game's exact grader, by game name: the one place of the oracle floor where a game's solver
is registered (:data:`GRADERS`, :data:`TABLE_GAMES`); the evaluator and the CLI ask here.
"""

from __future__ import annotations

import importlib

from yamblab.errors import ConfigError

#: game name → "module:function" of its grader: ``fn(agent, game, games, seed, first_game=0,
#: progress=False, **game options) -> GradeReport``
GRADERS: dict[str, str] = {
    "yahtzee": "yamblab.oracle.yahtzee.grading:grade_game",
    "yamb": "yamblab.oracle.yamb.grading:grade_yamb",
}

#: games whose whole game one cached table solves (every boundary state's value), so that the
#: oracle service can grade each decision and full-turn search on a boundary head has an exact
#: score (Yahtzee's :class:`~yamblab.oracle.yahtzee.table.OracleTable`), each with the
#: "module:function" that makes its grader's ``regret_fn`` from the service's grading call
TABLE_GAMES: dict[str, str] = {"yahtzee": "yamblab.oracle.yahtzee.grading:service_regret_fn"}


def service_regret_fn(game, grade):
    """The ``regret_fn`` option of ``game``'s grader when the oracle service's ``grade`` call
    grades each decision (a game of :data:`TABLE_GAMES`)."""
    module, fn = TABLE_GAMES[game.name].split(":")
    return getattr(importlib.import_module(module), fn)(grade)


def has_table(game) -> bool:
    """Whether ``game`` (a :class:`~yamblab.games.protocol.Game`) is solved by one cached table
    of every boundary state (:data:`TABLE_GAMES`)."""
    return getattr(game, "name", None) in TABLE_GAMES


def grade_game(agent, game, games: int, seed: int = 0, **options):
    """Play ``games`` seeded games of ``game`` with ``agent`` and grade them: decision by decision
    in exact regret where the oracles solve the game, else against ``options["baseline"]`` on
    the same dice.

    Args:
        agent: any agent of ``game``.
        game: a :class:`~yamblab.games.protocol.Game`.
        games: number of games (game numbers 0 … of dice seed ``seed``).
        options: the game's grader's own options (Yahtzee: ``table``, ``regret_fn``,
            ``progress``; Yamb: ``baseline``, ``baseline_scores``, ``yardsticks``, ``progress``).

    Returns:
        a :class:`~yamblab.oracle.report.GradeReport`.

    Raises:
        ConfigError: a game with no registered grader.
        ValueError: ``games`` < 1.
    """
    try:
        module, fn = GRADERS[game.name].split(":")
    except KeyError:
        raise ConfigError(f"no grader is registered for the game {game.name!r} "
                          f"(known: {', '.join(GRADERS)})") from None
    return getattr(importlib.import_module(module), fn)(agent, game, games=games, seed=seed, **options)


__all__ = ["GRADERS", "TABLE_GAMES", "has_table", "grade_game", "service_regret_fn"]
