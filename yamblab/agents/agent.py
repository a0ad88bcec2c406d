"""The agent interface.

An agent looks at a batch of games (a :class:`~yamblab.games.protocol.Game`'s batch) and
returns one action per game in that engine's own action space (Yahtzee: 0..12 score a box,
13 + h reroll the dice not held by hold mask h; Yamb: see :mod:`yamblab.games.yamb.engine`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


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


__all__ = ["Agent"]
