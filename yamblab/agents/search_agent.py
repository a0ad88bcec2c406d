"""The ``search`` agent: expectimax search (or the policy head alone) as a graded agent, any game.

``make_agent("search", game, valuation="oracle", depth="full_turn")`` plays full-turn search
driven by the exact oracle (Yahtzee's table, or a single Yamb column's oracle): optimal play,
zero regret. ``valuation=PATH`` loads a checkpoint and drives the search with its value head
(and, for ``depth="none"``, plays its policy head).
"""

from __future__ import annotations

import numpy as np

from yamblab.agents.agent import Agent
from yamblab.games.protocol import as_game
from yamblab.errors import ConfigError
from yamblab.search.registry import DEPTHS, exact_valuation, make_search
from yamblab.search.valuation import NetworkValuation
from yamblab.vocabulary import network_agent_name


class SearchAgent(Agent):
    """Chooses ``argmax Q`` of a search, or ``argmax prior`` without search (no noise, ever).

    Args:
        game: a :class:`~yamblab.games.protocol.Game` (or a rules object).
        valuation: a :class:`~yamblab.search.valuation.Valuation`, or Yahtzee's (4096, 3, 64)
            table of boundary values.
        depth: one of :data:`~yamblab.search.registry.DEPTHS`.
        net: the network whose policy head plays at depth ``"none"``.
        name: the agent's name in reports.

    Attributes:
        last_q: float64 (n, 208), the search's Q of the last :meth:`shared_actions` call
            (expected points still to come after each action, this turn included; ``-inf``
            where illegal or finished), or None when the policy head plays (depth ``"none"``).

    Raises:
        ValueError: depth ``"none"`` without a network, or an unknown depth.
    """

    def __init__(self, game, valuation=None, depth: str = "full_turn", net=None, name: str = "search"):
        if depth not in DEPTHS:
            raise ValueError(f"unknown search depth {depth!r}; choose one of {', '.join(DEPTHS)}")
        if depth == "none" and net is None:
            raise ValueError("depth 'none' plays the policy head: it needs a network, not a table")
        self.game = as_game(game)
        self.rules = self.game.rules
        self.depth = depth
        self.net = net
        self.search = make_search(depth, self.game, valuation)
        self.name = name
        self.last_q = None

    def reset(self, batch) -> None:
        if self.search is not None:
            self.search.reset()

    def shared_actions(self, batch) -> np.ndarray:
        """int64 (n,): the chosen action of every game in the shared action space."""
        if self.search is None:
            prior, _ = self.net.predict(self.game.encode(batch))
            return np.argmax(prior, axis=1)
        self.last_q = self.search.q(batch)
        return np.argmax(self.last_q, axis=1)

    def act(self, batch) -> np.ndarray:
        live = ~np.asarray(batch.done)
        shared = self.shared_actions(batch)
        out = np.full(batch.n, self.game.idle_action, np.int64)
        out[live] = self.game.to_engine(shared[live])
        return out


def network_agent(net, game, depth: str = "full_turn", name: str | None = None) -> SearchAgent:
    """A :class:`SearchAgent` whose search (or policy) is a network's."""
    valuation = NetworkValuation(net) if depth != "none" else None
    return SearchAgent(game, valuation, depth, net=net, name=name or network_agent_name(depth))


def search_factory(game, table=None, seed=0, valuation: str = "oracle", depth: str = "full_turn",
            device: str = "cpu", **_):
    """Factory: ``valuation="oracle"`` (the exact oracle) or the path of a checkpoint.

    Raises:
        ConfigError: the oracle valuation with a depth other than ``full_turn``, or for a Yamb
            card that has no exact oracle.
    """
    if valuation == "oracle":
        if depth != "full_turn":
            raise ConfigError(f"the oracle valuation drives full-turn search only (got depth {depth!r})")
        return SearchAgent(game, exact_valuation(game, table), depth, name="oracle, full-turn search")
    from yamblab.model.checkpoint import load_network

    net = load_network(valuation, map_location=device, game=as_game(game)).to(device)
    return network_agent(net, game, depth, name=network_agent_name(depth))
