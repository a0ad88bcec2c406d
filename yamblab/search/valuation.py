"""Valuations for search: anything that says how many points are still to come from a position.

A **valuation** (the Best Values post's term) maps positions to expected points still to come.
Search asks it about **boundary positions** (a card between turns: no dice; full-turn search's
leaves) and, for one-step search, about positions with dice. The protocol is one method::

    values(enc: EncodedBatch) -> float64 (m,)

Implementations: :class:`NetworkValuation` (a network's value head, or its boundary head on
boundary positions) and :class:`YambColumnOracleValuation` (the exact value of a single Yamb
column game's card). Yahtzee's oracle table and rules of thumb are tables over the 536,448
boundary states, which full-turn search uses directly (:class:`~yamblab.oracle.yahtzee.turn.TurnValues`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from yamblab.games.encoding import EncodedBatch, decode_yamb_card


@runtime_checkable
class Valuation(Protocol):
    """Points still to come of encoded positions."""

    def values(self, enc: EncodedBatch) -> np.ndarray:
        """float64 (m,): expected points still to come of each of the m positions."""


def is_valuation(obj) -> bool:
    """True for objects with a callable ``values(enc)`` (a :class:`Valuation`), False for tables."""
    return hasattr(obj, "values") and callable(obj.values)


class NetworkValuation:
    """The value head of a network as a :class:`Valuation`.

    Args:
        net: a :class:`~yamblab.model.network.YambNet` (evaluated without gradients).
        chunk: positions per forward pass.

    Attributes:
        positions_evaluated: positions valued so far (a throughput counter).
    """

    def __init__(self, net, chunk: int = 16384):
        self.net = net
        self.chunk = chunk
        self.positions_evaluated = 0

    def values(self, enc: EncodedBatch) -> np.ndarray:
        self.positions_evaluated += len(enc)
        if len(enc) == 0:
            return np.zeros(0)
        return self.net.predict_value(enc, self.chunk)


class YambColumnOracleValuation:
    """The exact value of the card of a single-column Yamb game (down, up or free).

    Args:
        oracle: a :class:`~yamblab.oracle.yamb.column.ColumnOracle` or
            :class:`~yamblab.oracle.yamb.free.FreeColumnOracle`.

    ``values`` decodes the card of each boundary position and asks the oracle for the
    expected points still to come under optimal play (the position's dice are ignored: use it
    on boundary positions only).

    Raises:
        UnreachablePositionError: (from the oracle) a card no game can reach.
    """

    #: one-step search cannot use it: it values boundary cards only
    values_dice = False

    def __init__(self, oracle):
        self.oracle = oracle
        self.rules = oracle.rules
        self._cache: dict[tuple, float] = {}

    def values(self, enc: EncodedBatch) -> np.ndarray:
        cards = decode_yamb_card(enc, self.rules)
        out = np.zeros(len(enc))
        for i, card in enumerate(cards):
            col = tuple(int(x) for x in card[0])
            if col not in self._cache:
                self._cache[col] = float(self.oracle.state_value(list(col)))
            out[i] = self._cache[col]
        return out


__all__ = ["Valuation", "NetworkValuation", "YambColumnOracleValuation", "is_valuation"]
