"""Each game's searches and exact valuation, by game name, as its one registration
(:data:`yamblab.games.protocol.GAMES`) names them: everything above the search floor asks here.

Three depths (:data:`DEPTHS`): ``"none"`` (the policy head alone), ``"one_step"`` (the YoloYamb
post's search: every move valued one step ahead by the value head) and ``"full_turn"`` (exact
play to the end of the turn against a valuation of the boundary cards it can end in); see
:mod:`yamblab.search.expectimax` (Yahtzee) and :mod:`yamblab.search.yamb_search` (Yamb).
"""

from __future__ import annotations

from typing import Literal

from yamblab.errors import ConfigError
from yamblab.games.protocol import GAMES, load_piece
from yamblab.search.valuation import is_valuation

DEPTHS = ("none", "one_step", "full_turn")
Depth = Literal["none", "one_step", "full_turn"]


def _entry(game):
    name = getattr(game, "name", "yahtzee")
    if name not in GAMES:
        raise ConfigError(f"no search is registered for the game {name!r} (known: {', '.join(GAMES)})")
    return GAMES[name]


def make_search(depth: Depth, game, valuation):
    """The search of a depth for a game and a valuation.

    Args:
        depth: ``"none"`` (returns None: the policy head plays), ``"one_step"`` or
            ``"full_turn"``.
        game: a :class:`~yamblab.games.protocol.Game` (or, for Yahtzee, its rules).
        valuation: a :class:`~yamblab.search.valuation.Valuation` (a network, a Yamb column
            oracle), or for Yahtzee full-turn search a (4096, 3, 64) table of boundary values.

    Returns:
        an object with ``q(batch) -> float64 (n, 208)`` and ``reset()``, or None.

    Raises:
        ValueError: an unknown depth, or one-step search with a table or a valuation of
            boundary cards only.
        ConfigError: a game with no registered search.
    """
    if depth not in DEPTHS:
        raise ValueError(f"unknown search depth {depth!r}; choose one of {', '.join(DEPTHS)}")
    if depth == "none":
        return None
    entry = _entry(game)
    rules = getattr(game, "rules", game)
    if depth == "one_step" and not (is_valuation(valuation) and getattr(valuation, "values_dice", True)):
        raise ValueError("one-step search needs a network valuation (it values positions with dice)")
    return load_piece(entry.full_turn if depth == "full_turn" else entry.one_step)(rules, valuation)


def exact_position_values(game, enc, table):
    """Exact optimal points still to come of encoded positions of a table game, float64 (m,):
    its registration's ``position_values(enc, rules, table)`` (Yahtzee's).

    Raises:
        ConfigError: a game that has none.
    """
    ref = _entry(game).position_values
    if ref is None:
        raise ConfigError(f"the game {game.name!r} has no exact values of single positions")
    return load_piece(ref)(enc, game.rules, table)


def check_solved(game) -> None:
    """Raise unless the oracles solve ``game`` exactly (:attr:`Game.solved`).

    Raises:
        ConfigError: a game with no exact oracle (a full Yamb card, a single Yamb column of a
            kind the oracles do not solve), naming why.
    """
    if getattr(game, "solved", True) and game.name in GAMES and GAMES[game.name].exact:
        return
    rules = game.rules
    columns = getattr(rules, "columns", ())
    if len(columns) > 1:
        raise ConfigError("a full Yamb card has no exact oracle for the whole game, only for its last turns "
                          "(yamblab grade --endgame); a card is graded against the heuristic bot on the same "
                          "dice, and a network's search needs --checkpoint")
    if len(columns) == 1:
        raise ConfigError(f"a single {columns[0]} Yamb column has no exact oracle (the oracles "
                          "solve a single down, up or free column); its evaluation stays the paired "
                          "comparison with the heuristic bot")
    raise ConfigError(f"the game {game.name!r} has no exact oracle")


def exact_valuation(game, table=None):
    """The exact oracle's valuation of a solved game's boundary cards: with it, full-turn search
    plays optimally.

    Args:
        game: a solved :class:`~yamblab.games.protocol.Game`.
        table: Yahtzee only, an already loaded oracle table (else it is loaded or built).

    Returns:
        Yahtzee: the table's float64 (4096, 3, 64) values; a single Yamb column: a
        :class:`~yamblab.search.valuation.YambColumnOracleValuation`.

    Raises:
        ConfigError: a game the oracles do not solve (:func:`check_solved`).
    """
    check_solved(game)
    return load_piece(GAMES[game.name].exact)(game, table)


def endgame_oracle(game, k: int | None = None):
    """The exact oracle of ``game``'s last turns (a Yamb card: :mod:`yamblab.search.yamb_endgame`),
    solving cards of at most ``k`` open boxes (None: its default).

    Raises:
        ConfigError: a game with no endgame oracle.
    """
    ref = _entry(game).endgame
    if ref is None:
        raise ConfigError(f"the game {game.name!r} has no endgame oracle")
    cls = load_piece(ref)
    return cls(game.rules) if k is None else cls(game.rules, k=k)


def has_endgame(game) -> bool:
    """Whether ``game`` has an exact oracle of its last turns (and no exact oracle of the whole)."""
    return not getattr(game, "solved", True) and _entry(game).endgame is not None


def exact_search(game, table=None):
    """The oracle's full-turn search of a solved game: its ``q(batch)`` is the exact action
    values (float64 (n, 208), points still to come).

    Raises:
        ConfigError: a game the oracles do not solve.
    """
    return make_search("full_turn", game, exact_valuation(game, table))


__all__ = ["DEPTHS", "Depth", "make_search", "endgame_oracle", "has_endgame", "check_solved",
           "exact_valuation", "exact_search", "exact_position_values"]
