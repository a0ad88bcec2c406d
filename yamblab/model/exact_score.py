"""The exact expected score of a trained network's full-turn search (issue 10; the Best Values post's method).

Full-turn search plays every turn exactly against the network's value of the boundary states
the turn can end in, so the network is a valuation: value every reachable boundary state in
batched forward passes, and the backward pass of :mod:`yamblab.oracle.yahtzee.policy_eval` gives the
exact expected score of the agent that plays against those values, with no sampling noise.

**What the network is given.** A boundary state is (filled boxes, upper subtotal capped at 63,
Yahtzee box), but the network's input is a whole card. Every Yahtzee position, in play and in
training as here, is encoded from the *canonical card* of its state
(:mod:`yamblab.games.yahtzee.canonical`: representative lower-box points, the Yahtzee box 0 or
50, the upper subtotal split closest to three of each face), so the network's value is a
function of the boundary state alone and the figure here is exact for the agent that plays.
"""

from __future__ import annotations

import time

import numpy as np

from yamblab.games.yahtzee.canonical import canonical_cards
from yamblab.games.yahtzee.game import encode_yahtzee_boundary
from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules
from yamblab.oracle.yahtzee.policy_eval import expected_score

__all__ = ["canonical_cards", "network_table", "exact_network_score"]


def network_table(net, rules: YahtzeeRules = OFFICIAL, chunk: int = 16384,
                  progress: bool = False) -> tuple[np.ndarray, int]:
    """The network's value of every reachable boundary state, as a valuation table.

    Args:
        net: a :class:`~yamblab.model.network.YambNet` (its ``predict_value``; the boundary
            head when it has one).
        chunk: positions per forward pass.

    Returns:
        ``(W float64 (4096, 3, 64), n_states)``: points still to come (0 for the full card and
        unreachable entries, which the agent never looks at).
    """
    states, scores, raws = canonical_cards(rules)
    W = np.zeros((4096, 3, 64))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(states), desc="network values", unit="states")
    for i in range(0, len(states), chunk):
        sl = slice(i, i + chunk)
        enc = encode_yahtzee_boundary(scores[sl], raws[sl], rules)
        v = np.asarray(net.predict_value(enc, chunk), dtype=np.float64)
        s = states[sl]
        W[s[:, 0], s[:, 1], s[:, 2]] = v
        if bar is not None:
            bar.update(len(s))
    if bar is not None:
        bar.close()
    if not rules.upper_bonus:
        W[:] = W[:, :, :1]
    return W, len(states)


def exact_network_score(net, rules: YahtzeeRules = OFFICIAL, oracle_value: float | None = None,
                        chunk: int = 16384, progress: bool = False) -> dict:
    """Exact expected score and regret per game of full-turn search on ``net``'s values.

    Args:
        net: the network (evaluated without gradients, on its current device).
        rules: the variant.
        oracle_value: the optimal expected score of ``rules`` (default: from the cached oracle).
        chunk: positions per forward pass; progress: show a progress bar.

    Returns:
        dict with ``exact_score`` (points), ``exact_regret`` (optimal minus exact score, points
        per game), ``optimal``, ``states_valued``, ``valuation_seconds`` (forward passes) and
        ``evaluation_seconds`` (backward pass). No sampling noise.
    """
    if oracle_value is None:
        from yamblab.oracle.yahtzee.table import OracleTable

        oracle_value = OracleTable.get(rules).new_game_value
    t0 = time.perf_counter()
    W, n = network_table(net, rules, chunk, progress)
    t1 = time.perf_counter()
    score = expected_score(W, rules)
    t2 = time.perf_counter()
    return {"exact_score": score, "exact_regret": float(oracle_value) - score, "optimal": float(oracle_value),
            "states_valued": n, "valuation_seconds": t1 - t0, "evaluation_seconds": t2 - t1}
