"""The ``search`` agent: expectimax search (or the policy head alone) as a graded agent.

``make_agent("search", rules, valuation="oracle", depth="full_turn")`` plays full-turn search
driven by the oracle table (optimal: zero regret); ``valuation=PATH`` loads a checkpoint and
drives the search with its value head (and, for ``depth="none"``, plays its policy head).
"""

from __future__ import annotations

import numpy as np

from yamblab.agents.base import Agent, register
from yamblab.games.encoding import encode_yahtzee, shared_action_to_yahtzee
from yamblab.games.yahtzee.rules import YahtzeeRules
from yamblab.search.expectimax import DEPTHS, NetworkValuation, make_search


class SearchAgent(Agent):
    """Chooses ``argmax Q`` of a search, or ``argmax prior`` without search (no noise, ever).

    Args:
        rules: the variant.
        valuation: an oracle table / value table, or a :class:`NetworkValuation`.
        depth: one of :data:`~yamblab.search.expectimax.DEPTHS`.
        net: the network whose policy head plays at depth ``"none"``.
        name: the agent's name in reports.

    Raises:
        ValueError: depth ``"none"`` without a network, or an unknown depth.
    """

    def __init__(self, rules: YahtzeeRules, valuation=None, depth: str = "full_turn", net=None,
                 name: str = "search"):
        if depth not in DEPTHS:
            raise ValueError(f"unknown search depth {depth!r}; choose one of {', '.join(DEPTHS)}")
        if depth == "none" and net is None:
            raise ValueError("depth 'none' plays the policy head: it needs a network, not a table")
        self.rules = rules
        self.depth = depth
        self.net = net
        self.search = make_search(depth, rules, valuation)
        self.name = name

    def reset(self, batch) -> None:
        if self.search is not None:
            self.search.reset()

    def act(self, batch) -> np.ndarray:
        live = ~batch.done
        if self.search is None:
            prior, _ = self.net.predict(encode_yahtzee(batch, self.rules))
            shared = np.argmax(prior, axis=1)
        else:
            shared = np.argmax(self.search.q(batch), axis=1)
        shared = np.where(live, shared, 0)
        return shared_action_to_yahtzee(shared)


def network_agent(net, rules: YahtzeeRules, depth: str = "full_turn", name: str | None = None) -> SearchAgent:
    """A :class:`SearchAgent` whose search (or policy) is a network's."""
    valuation = NetworkValuation(net, rules) if depth != "none" else None
    return SearchAgent(rules, valuation, depth, net=net, name=name or f"net-{depth}")


@register("search")
def _search(rules, table=None, seed=0, valuation: str = "oracle", depth: str = "full_turn",
            device: str = "cpu", **_):
    """Factory: ``valuation="oracle"`` (the exact table) or the path of a checkpoint."""
    if valuation == "oracle":
        if depth != "full_turn":
            raise ValueError("the oracle valuation drives full-turn search only (depth 'full_turn')")
        from yamblab.oracle.table import OracleTable

        table = table or OracleTable.get(rules)
        return SearchAgent(rules, table.values, depth, name="search-oracle")
    from yamblab.learners.checkpoint import load_network

    net = load_network(valuation, map_location=device).to(device)
    return network_agent(net, rules, depth, name=f"search-{depth}")
