"""Probes: hand-crafted Yahtzee positions whose correct answers the oracle knows (the YoloYamb
post, "Probes, Scaffolding, and Crashes": one probe showed the network blind to the upper bonus).

Each probe is a scorecard, five dice and the rolls left; its correct answers are every action
the oracle values within ``1e-9`` points of the best (ties count as correct). A probe passes
when the agent picks a correct answer; :func:`run_probes` reports the pass rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import YahtzeeRules


@dataclass(frozen=True)
class Probe:
    """A position: ``card`` maps box index (0..12, card order) to its points; ``dice`` the
    five faces in slot order; ``rolls_left`` 0..2; ``what`` the idea it tests."""

    name: str
    card: dict
    dice: tuple
    rolls_left: int
    what: str


_UPPER_57 = {0: 3, 1: 6, 2: 9, 4: 15, 5: 24}          # Fours open, upper sum 57
_MOST_LOWER = {6: 22, 7: 0, 9: 30, 10: 40, 12: 21}

PROBES: tuple[Probe, ...] = (
    Probe("yahtzee-first-turn", {}, (6, 6, 6, 6, 6), 0, "five sixes on an empty card score the Yahtzee"),
    Probe("large-straight", {}, (2, 3, 4, 5, 6), 0, "a large straight on an empty card scores 40"),
    Probe("upper-bonus", {**_UPPER_57, **_MOST_LOWER}, (4, 4, 4, 1, 2), 0,
          "three fours reach 63 in the upper section: the 35-point bonus"),
    Probe("full-house", {0: 2, 1: 6, 2: 9}, (3, 3, 5, 5, 5), 0, "take the full house"),
    Probe("keep-triple-sixes", {}, (6, 2, 6, 1, 6), 2, "hold the three sixes"),
    Probe("hold-for-straight", {0: 3, 1: 6, 2: 9, 3: 12, 4: 15, 5: 18, 6: 20, 7: 0, 8: 25, 11: 50, 12: 20},
          (1, 2, 3, 4, 6), 1, "only the straights are left: hold 1-2-3-4"),
    Probe("scratch-wisely", {0: 3, 1: 6, 2: 9, 3: 12, 4: 15, 5: 18, 8: 25, 9: 30, 10: 40, 12: 22},
          (1, 2, 2, 5, 6), 0, "nothing fits: scratch the cheapest box"),
    Probe("joker", {4: 15, 11: 50}, (5, 5, 5, 5, 5), 0,
          "a second Yahtzee with Fives filled: the joker scores it in a lower box"),
)


def probe_batch(probes, rules: YahtzeeRules):
    """A YahtzeeBatch whose game ``i`` is in the position of ``probes[i]``."""
    b = new_batch(len(probes), rules, seed=0)
    for i, p in enumerate(probes):
        scores = np.full(13, -1, np.int16)
        for box, pts in p.card.items():
            scores[box] = pts
        filled = int(sum(1 << box for box in p.card))
        b.box_scores[i] = scores
        b.filled[i] = filled
        b.turn[i] = len(p.card)
        up = int(sum(v for k, v in p.card.items() if k < 6))
        b.upper_raw[i] = up
        b.ystate[i] = 0 if 11 not in p.card else (2 if p.card[11] == 50 else 1)
        lower = int(sum(v for k, v in p.card.items() if k >= 6))
        b.total[i] = up + lower + (35 if up >= 63 and rules.upper_bonus else 0)
        b.dice[i] = np.asarray(p.dice, np.int8)
        b.rolls_left[i] = p.rolls_left
    return b


@dataclass
class ProbeReport:
    """Pass rate (0..1) and, per probe name, whether it passed and the action chosen (45-space)."""

    pass_rate: float
    passed: dict = field(default_factory=dict)
    chosen: dict = field(default_factory=dict)
    correct: dict = field(default_factory=dict)


def correct_actions(rules: YahtzeeRules, table, probes=PROBES, tol: float = 1e-9) -> np.ndarray:
    """bool (len(probes), 45): the oracle-optimal actions of each probe."""
    from yamblab.oracle.yahtzee.turn import TurnValues

    b = probe_batch(probes, rules)
    box, hold, _ = TurnValues(table.values, rules).action_values(b)
    q = np.concatenate([box, hold], axis=1)
    best = q.max(axis=1, keepdims=True)
    return (q >= best - tol) & np.isfinite(q)


def run_probes(agent, rules: YahtzeeRules, table=None, probes=PROBES) -> ProbeReport:
    """Ask ``agent`` every probe once (noise-free) and compare with the oracle's answers."""
    if table is None:
        from yamblab.oracle.yahtzee.table import OracleTable

        table = OracleTable.get(rules)
    ok = correct_actions(rules, table, probes)
    b = probe_batch(probes, rules)
    agent.reset(b)
    act = np.asarray(agent.act(b), np.int64)
    passed = ok[np.arange(len(probes)), act]
    return ProbeReport(
        pass_rate=float(passed.mean()),
        passed={p.name: bool(x) for p, x in zip(probes, passed)},
        chosen={p.name: int(a) for p, a in zip(probes, act)},
        correct={p.name: np.flatnonzero(ok[i]).tolist() for i, p in enumerate(probes)},
    )
