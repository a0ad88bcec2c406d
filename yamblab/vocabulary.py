"""The words every output uses for decisions, figures and agents, defined once: the command
line, JSON, the API, the browser page and MLflow say the same thing the same way, for both games.
docs/vocabulary.md is the reader's copy.
"""

from __future__ import annotations

import math

#: a turn's keeps, in order (Yahtzee has two; a Yamb turn of five rolls four)
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")

#: the box decision, and Yamb's announcement of a box before the second roll
BOX, ANNOUNCE = "box", "announce"


def keep_name(k: int) -> str:
    """The ``k``-th keep of a turn (from 1): ``"first keep"``, ``"second keep"``, …"""
    return f"{_ORDINALS[k - 1]} keep"


def decision_names(rolls: int, announce: bool = False) -> tuple[str, ...]:
    """The kinds of decision of a turn of ``rolls`` rolls: its keeps, then the box (then
    ``announce`` where the game has one)."""
    return (*(keep_name(k) for k in range(1, rolls)), BOX, *((ANNOUNCE,) if announce else ()))


def metric_key(name: str) -> str:
    """A decision's or box's name as a metric key (``"first keep"`` -> ``"first_keep"``)."""
    return name.replace(" ", "_")


#: how a network decides, by search depth, in words (an agent's name, a mode's)
DEPTH_WORDS = {"none": "policy head alone", "one_step": "one-step search", "full_turn": "full-turn search"}


def network_agent_name(depth: str) -> str:
    """A trained network's agent as reports name it: ``"network, full-turn search"``."""
    return f"network, {DEPTH_WORDS[depth]}"


#: the figures, in words (the docs say the same)
FIGURES = {
    "regret": "regret: expected points lost a game against the optimal player, each decision of the "
              "evaluation games graded exactly (the games' dice are drawn once, the same for every run)",
    "exact_regret": "exact full-turn regret: the same loss of full-turn search on the network's values, "
                    "computed over every dice outcome (no games drawn)",
    "endgame_regret": "exact endgame regret: the same loss of full-turn search over a Yamb card's last turns, "
                      "on the decision set's games from the heuristic bot's openings",
    "vs_baseline": "score against the heuristic bot: the paired difference on the same dice, where a card "
                   "has no exact oracle",
}

#: metric names recorded by earlier versions -> today's (a resumed run's history is renamed, so
#: its curve goes on under one name; the old series stay in MLflow as they were logged)
RENAMED_METRICS = {f"eval.regret.keep_{k}": f"eval.regret.{metric_key(keep_name(k))}" for k in range(1, 8)}


def current_metrics(metrics: dict) -> dict:
    """``metrics`` with names of earlier versions renamed (:data:`RENAMED_METRICS`)."""
    return {RENAMED_METRICS.get(k, k): v for k, v in metrics.items()}


def rounded(obj, digits: int = 4):
    """``obj`` (JSON-like) with every float rounded to ``digits`` decimals: what a figure
    means, not the float arithmetic's last bits (``73.50000000000004`` -> ``73.5``). NaN and
    infinities become None (JSON has neither)."""
    if isinstance(obj, float):
        return round(obj, digits) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj
