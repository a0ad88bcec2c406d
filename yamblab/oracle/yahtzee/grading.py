"""Grading: play seeded games with any agent and charge every decision its regret.

The **regret** of a decision is the oracle's expected final score after the best action minus
that after the chosen one (the Best Values post). A game's regrets add up to its expected shortfall from
optimal play, with far less noise than its score.
"""

from __future__ import annotations

import numpy as np

from yamblab.oracle.yahtzee.turn import TurnValues, hold_values
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import BOX_LABELS, OFFICIAL, UPPER_BONUS_THRESHOLD, YAHTZEE, YahtzeeRules
from yamblab.oracle.report import GradeReport, mean_ci
from yamblab.oracle.yahtzee.table import OracleTable
from yamblab.vocabulary import decision_names

DECISIONS = decision_names(3)


class Grader:
    """Charges each decision of a batch its regret against an oracle table."""

    def __init__(self, table: OracleTable):
        self.values = TurnValues(table.values, table.rules)

    def regrets(self, batch, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Regret of each game's action before it is applied.

        Returns:
            ``(regret float64 (n,), decision int8 (n,))``: decision 0 first keep, 1 second
            keep, 2 box, -1 finished game (regret 0).
        """
        box, hold, _ = self.values.action_values(batch)
        return regrets_from_values(box, hold, actions, batch.rolls_left, batch.turn < 13)


def regrets_from_values(box: np.ndarray, hold: np.ndarray, actions, rolls_left, live) -> tuple[np.ndarray, np.ndarray]:
    """Regret of each chosen action given the oracle's action values.

    Args:
        box: float64 (n, 13) value of scoring each box (-inf if illegal).
        hold: float64 (n, 32) value of each hold mask (-inf with no roll left).
        actions: int (n,) engine actions; rolls_left: int (n,); live: bool (n,) unfinished games.

    Returns:
        ``(regret float64 (n,), decision int8 (n,))`` as in :meth:`Grader.regrets`.
    """
    n = box.shape[0]
    a = np.asarray(actions, dtype=np.int64)
    live = np.asarray(live, dtype=bool)
    best = np.maximum(box.max(axis=1), hold.max(axis=1))
    chosen = np.where(a < 13, box[np.arange(n), np.clip(a, 0, 12)],
                      hold[np.arange(n), np.clip(a - 13, 0, 31)])
    with np.errstate(invalid="ignore"):
        regret = np.where(live, best - chosen, 0.0)
    return regret, decision_kinds(a, rolls_left, live)


def decision_kinds(actions, rolls_left, live) -> np.ndarray:
    """Kind of each decision, int8 (n,): 0 first keep, 1 second keep, 2 box, -1 finished game."""
    a = np.asarray(actions, dtype=np.int64)
    decision = np.where(a < 13, 2, np.where(np.asarray(rolls_left) == 2, 0, 1)).astype(np.int8)
    decision[~np.asarray(live, dtype=bool)] = -1
    return decision


def service_regret_fn(grade):
    """The ``regret_fn`` of :func:`grade_game` when an oracle service grades the decisions:
    ``grade(states, rolls, rolls_left, keeps, actions)`` is its :func:`grade_decisions` (called
    in process or through Ray), asked only for the decisions of unfinished games."""
    from yamblab.games.yahtzee.rules import N_BOXES

    def regret_fn(batch, actions):
        live = batch.turn < N_BOXES
        idx = np.flatnonzero(live)
        regret = np.zeros(batch.n)
        if idx.size:
            regret[idx] = grade(batch.boundary_states()[idx], batch.roll_indices()[idx],
                                batch.rolls_left[idx], batch.hold_keeps()[idx], np.asarray(actions)[idx])
        return regret, decision_kinds(actions, batch.rolls_left, live)

    return regret_fn


def grade_decisions(table: OracleTable, states: np.ndarray, rolls: np.ndarray, rolls_left: np.ndarray,
                    keeps: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Regret of a batch of recorded decisions (for the oracle service).

    Args:
        states: int64 (n, 3) boundary states (mask12, ystate, upper); rolls: int64 (n,) roll
            indices; rolls_left: int (n,); keeps: int (n, 32) keep index of each hold mask over
            the dice as they lay; actions: int (n,) engine actions.

    Returns:
        float64 (n,): points of expected score lost by each decision.
    """
    from yamblab.oracle.yahtzee import _kernels

    rules = table.rules
    args = (rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus)
    states = np.ascontiguousarray(states, dtype=np.int64)
    box = _kernels.box_values(table.values, *args, states, np.ascontiguousarray(rolls, dtype=np.int64))
    e1, e2 = _kernels.turn_solutions(table.values, *args, states)
    rl = np.asarray(rolls_left)
    hold = hold_values(e1, e2, keeps, rl)
    regret, _ = regrets_from_values(box, hold, actions, rl, np.ones(len(rl), dtype=bool))
    return regret


def grade(agent, rules: YahtzeeRules = OFFICIAL, games: int = 1000, seed: int = 0,
          table: OracleTable | None = None, chunk: int = 4096, progress: bool = False,
          first_game: int = 0, regret_fn=None) -> GradeReport:
    """Play ``games`` seeded games with ``agent`` and grade every decision with the oracle.

    Args:
        agent: any :class:`~yamblab.agents.agent.Agent`.
        games: number of games (game numbers ``first_game`` … on dice seed ``seed``).
        chunk: games played at once (memory: about 15 KB per game).
        progress: show a progress bar over games.
        regret_fn: ``fn(batch, actions) -> (regret (n,), decision (n,))`` that grades each
            step (default: :class:`Grader` on ``table``; the Ray evaluator passes one that asks
            the oracle service).

    Raises:
        ValueError: ``games`` < 1.
        IllegalActionError: the agent chose an illegal action.
    """
    if games < 1:
        raise ValueError(f"number of games must be at least 1, got {games}")
    if regret_fn is None:
        regret_fn = Grader(table or OracleTable.get(rules)).regrets
    scores, regrets, ubonus, yrate = [], [], [], []
    by_decision = np.zeros(3)
    by_box = np.zeros(13)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=games, desc=f"grading {agent.name}", unit="games")
    done = 0
    while done < games:
        n = min(chunk, games - done)
        batch = new_batch(n, rules, seed=seed, first_game=first_game + done)
        agent.reset(batch)
        game_regret = np.zeros(n)
        while not batch.done.all():
            actions = np.asarray(agent.act(batch), dtype=np.int64)
            r, d = regret_fn(batch, actions)
            live = d >= 0
            game_regret += r
            np.add.at(by_decision, d[live], r[live])
            is_box = live & (d == 2)
            np.add.at(by_box, actions[is_box], r[is_box])
            batch.step(actions)
        scores.append(batch.total.astype(np.float64))
        regrets.append(game_regret)
        ubonus.append(batch.upper_raw >= UPPER_BONUS_THRESHOLD)
        yrate.append(batch.box_scores[:, YAHTZEE] == 50)
        done += n
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    s = np.concatenate(scores)
    g = np.concatenate(regrets)
    m, lo, hi = mean_ci(s)
    rm, rlo, rhi = mean_ci(g)
    return GradeReport(
        agent=agent.name, rules=rules.name, games=games, seed=seed,
        mean=m, ci=(lo, hi), sd=float(s.std(ddof=1)) if s.size > 1 else 0.0,
        median=float(np.median(s)), p90=float(np.percentile(s, 90)),
        upper_bonus_rate=float(np.concatenate(ubonus).mean()) if rules.upper_bonus else None,
        yahtzee_rate=float(np.concatenate(yrate).mean()),
        regret_mean=rm, regret_ci=(rlo, rhi),
        regret_by_decision={k: float(v / games) for k, v in zip(DECISIONS, by_decision)},
        regret_by_box={BOX_LABELS[b]: float(by_box[b] / games) for b in range(13)},
        scores=s, regrets=g,
    )


def grade_game(agent, game, games: int = 1000, seed: int = 0, **options) -> GradeReport:
    """:func:`grade` for a :class:`~yamblab.games.yahtzee.game.YahtzeeGame` (the signature of
    :func:`yamblab.oracle.registry.grade_game`)."""
    return grade(agent, game.rules, games=games, seed=seed, **options)
