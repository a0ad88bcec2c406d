"""Each game's exact grader and oracle table, as its one registration
(:data:`yamblab.games.protocol.GAMES`) names them: the evaluator and the CLI ask here.

A game's ``table`` is the module of the one cached table that solves the whole game (every
boundary state's value), so that an oracle service grades each decision and full-turn search on
a boundary head has an exact score. It offers ``TableService(game)`` (the service),
``load_table(game)``, ``service_regret_fn(grade)`` (its grader's ``regret_fn`` from the service's
``grade`` call) and ``yardstick_seconds()`` (:mod:`yamblab.oracle.yahtzee.service`).
"""

from __future__ import annotations

from yamblab.errors import ConfigError
from yamblab.games.protocol import GAMES, load_piece


def _table_module(game):
    return load_piece(GAMES[game.name].table)


def has_table(game) -> bool:
    """Whether ``game`` (a :class:`~yamblab.games.protocol.Game`) is solved by one cached table
    of every boundary state (its registration's ``table``)."""
    name = getattr(game, "name", None)
    return name in GAMES and GAMES[name].table is not None


def table_service_class(game) -> type:
    """The class of ``game``'s oracle service (a game with a table: :func:`has_table`), built as
    ``cls(game)``: wrapped as a Ray actor, or a plain object."""
    return _table_module(game).TableService


def oracle_table(game):
    """``game``'s exact table, loaded or built (None for a game no table solves)."""
    return _table_module(game).load_table(game) if has_table(game) else None


def service_regret_fn(game, grade):
    """The ``regret_fn`` option of ``game``'s grader when the oracle service's ``grade`` call
    grades each decision (a game with a table: :func:`has_table`)."""
    return _table_module(game).service_regret_fn(grade)


def yardstick_seconds() -> float:
    """The machine's speed as a yardstick for wall times: seconds (float) that Yahtzee's exact
    table for the official rules takes to build on one thread (about 3 s to measure)."""
    return load_piece(GAMES["yahtzee"].table).yardstick_seconds()


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
    if game.name not in GAMES:
        raise ConfigError(f"no grader is registered for the game {game.name!r} (known: {', '.join(GAMES)})")
    return load_piece(GAMES[game.name].grader)(agent, game, games=games, seed=seed, **options)


def grade_endgame(agent, game, endgame, games: int, seed: int) -> dict:
    """The exact regret of ``agent`` over the last turns of ``games`` seeded games of ``game``
    whose openings the game's reference bot plays, by its ``endgame`` oracle (a Yamb card:
    :func:`~yamblab.oracle.yamb.grading.endgame_regrets`, whose dict it returns).

    Raises:
        ConfigError: a game with no endgame grader.
    """
    ref = GAMES[game.name].endgame_grader if game.name in GAMES else None
    if ref is None:
        raise ConfigError(f"the game {game.name!r} has no endgame grader")
    return load_piece(ref)(agent, game, endgame, games=games, seed=seed)


__all__ = ["has_table", "table_service_class", "oracle_table", "grade_game", "grade_endgame",
           "service_regret_fn", "yardstick_seconds"]
