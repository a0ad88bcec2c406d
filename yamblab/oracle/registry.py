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

#: games whose whole game one cached table solves (every boundary state's value), so that an
#: oracle service grades each decision and full-turn search on a boundary head has an exact
#: score: game name -> the module of its table, offering ``TableService(game)`` (the service),
#: ``load_table(game)``, ``service_regret_fn(grade)`` (its grader's ``regret_fn`` from the
#: service's ``grade`` call) and ``yardstick_seconds()`` (:mod:`yamblab.oracle.yahtzee.service`)
TABLE_GAMES: dict[str, str] = {"yahtzee": "yamblab.oracle.yahtzee.service"}


def _table_module(game):
    return importlib.import_module(TABLE_GAMES[game.name])


def has_table(game) -> bool:
    """Whether ``game`` (a :class:`~yamblab.games.protocol.Game`) is solved by one cached table
    of every boundary state (:data:`TABLE_GAMES`)."""
    return getattr(game, "name", None) in TABLE_GAMES


def table_service_class(game) -> type:
    """The class of ``game``'s oracle service (a game of :data:`TABLE_GAMES`), built as
    ``cls(game)``: wrapped as a Ray actor, or a plain object."""
    return _table_module(game).TableService


def oracle_table(game):
    """``game``'s exact table, loaded or built (None for a game no table solves)."""
    return _table_module(game).load_table(game) if has_table(game) else None


def service_regret_fn(game, grade):
    """The ``regret_fn`` option of ``game``'s grader when the oracle service's ``grade`` call
    grades each decision (a game of :data:`TABLE_GAMES`)."""
    return _table_module(game).service_regret_fn(grade)


def yardstick_seconds() -> float:
    """The machine's speed as a yardstick for wall times: seconds (float) that Yahtzee's exact
    table for the official rules takes to build on one thread (about 3 s to measure)."""
    return importlib.import_module(TABLE_GAMES["yahtzee"]).yardstick_seconds()


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


__all__ = ["GRADERS", "TABLE_GAMES", "has_table", "table_service_class", "oracle_table", "grade_game",
           "service_regret_fn", "yardstick_seconds"]
