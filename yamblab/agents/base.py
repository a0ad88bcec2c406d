"""The agent interface and the one registry of named agents, keyed by game.

An agent looks at a batch of games (a :class:`~yamblab.games.protocol.Game`'s batch) and
returns one action per game in that engine's own action space (Yahtzee: 0..12 score a box,
13 + h reroll the dice not held by hold mask h; Yamb: see :mod:`yamblab.games.yamb.engine`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import numpy as np

from yamblab.errors import UnknownVariantError
from yamblab.games.protocol import as_game


class Agent(ABC):
    """A policy for a batch of games.

    Subclasses implement :meth:`act`; :meth:`reset` is called once before a new batch.
    """

    name: str = "agent"

    def reset(self, batch) -> None:  # noqa: B027 - optional hook
        """Prepare for a new batch of games (called before the first :meth:`act`)."""

    @abstractmethod
    def act(self, batch) -> np.ndarray:
        """Choose actions.

        Args:
            batch: a :class:`~yamblab.games.yahtzee.engine.YahtzeeBatch` of n games.

        Returns:
            int64 (n,): a legal engine action for every unfinished game (Yahtzee: any value for
            finished ones; Yamb: -1).
        """


_AGENT_MODULES = ("yamblab.agents.yahtzee_agents", "yamblab.agents.yamb_bots", "yamblab.agents.search_agent")

#: (game, name) -> factory(game, table, seed, **options) -> Agent
AGENTS: dict[tuple[str, str], Callable[..., Agent]] = {}


def register(name: str, game: str = "yahtzee"):
    """Decorator that registers an agent factory under ``name`` for ``game``.

    The factory is called as ``factory(game=Game, table=..., seed=..., **options)``.
    """
    def deco(factory):
        AGENTS[(game, name)] = factory
        return factory
    return deco


def _load() -> None:
    import importlib

    for module in _AGENT_MODULES:  # each registers its agents on import
        importlib.import_module(module)


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
