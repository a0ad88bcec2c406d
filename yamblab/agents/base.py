"""The agent interface and the registry of named Yahtzee agents.

An agent looks at a batch of games and returns one action per game in the engine's
45-action space (0..12 score a box, 13 + h reroll the dice not held by hold mask h).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import numpy as np

from yamblab.errors import UnknownVariantError


class Agent(ABC):
    """A policy for a batch of Yahtzee games.

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
            int64 (n,): a legal action for every unfinished game (any value for finished ones).
        """


_AGENT_MODULES = ("yamblab.agents.yahtzee_agents", "yamblab.agents.search_agent")

#: name -> factory(rules, table, seed, **options) -> Agent
AGENTS: dict[str, Callable[..., Agent]] = {}


def register(name: str):
    """Decorator that registers an agent factory under ``name``."""
    def deco(factory):
        AGENTS[name] = factory
        return factory
    return deco


def make_agent(name: str, rules, table=None, seed: int = 0, **options) -> Agent:
    """Build a registered agent by name.

    Raises:
        UnknownVariantError: no agent of that name.
    """
    import importlib

    for module in _AGENT_MODULES:  # each registers its agents on import
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise

    if name not in AGENTS:
        raise UnknownVariantError(f"unknown agent {name!r}; choose one of {', '.join(sorted(AGENTS))}")
    return AGENTS[name](rules=rules, table=table, seed=seed, **options)
