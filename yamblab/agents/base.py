"""The one registry of named agents, keyed by game: every game's ``search`` agent and the agents
its registration (:data:`yamblab.games.protocol.GAMES`) names. The interface is
:class:`~yamblab.agents.agent.Agent`.
"""

from __future__ import annotations

from typing import Callable

from yamblab.agents.agent import Agent
from yamblab.errors import UnknownVariantError
from yamblab.games.protocol import GAMES, as_game, load_piece


#: (game, name) -> factory(game, table, seed, **options) -> Agent
AGENTS: dict[tuple[str, str], Callable[..., Agent]] = {}


def _load() -> None:
    """Fill :data:`AGENTS` on first use: the ``search`` agent for every game, then each game's
    own (its registration's ``agents``: a dict name -> factory)."""
    if AGENTS:
        return
    from yamblab.agents.search_agent import search_factory

    for game, entry in GAMES.items():
        AGENTS[(game, "search")] = search_factory
        AGENTS.update({(game, name): f for name, f in load_piece(entry.agents).items()})


def agent_names(game) -> list[str]:
    """The registered agents of a game (a game, rules object or game name), sorted."""
    _load()
    name = as_game(game).name
    return sorted(n for g, n in AGENTS if g == name)


def make_agent(name: str, game, table=None, seed: int = 0, **options) -> Agent:
    """Build a registered agent by name: one registry for every game.

    Args:
        name: the agent's name (:func:`agent_names`).
        game: a :class:`~yamblab.games.protocol.Game`, or the rules of one (a
            :class:`~yamblab.games.yahtzee.rules.YahtzeeRules` or
            :class:`~yamblab.games.yamb.rules.YambRules`).
        table: Yahtzee's oracle table, when the caller has it already.
        seed: the agent's own random seed (random agents).
        options: agent options (the ``search`` agent's ``valuation`` and ``depth``).

    Raises:
        UnknownVariantError: no agent of that name for this game (the message names them).
    """
    _load()
    g = as_game(game)
    key = (g.name, str(name).strip().lower())
    if key not in AGENTS:
        raise UnknownVariantError(f"unknown {g.name} agent {name!r}; choose one of {', '.join(agent_names(g))}")
    return AGENTS[key](game=g, table=table, seed=seed, **options)
