"""Entry points for the command line: grade a Yamb agent, build a column oracle.

``yamblab grade --game yamb --preset P --agent A`` calls :func:`grade_yamb`;
``yamblab oracle build --game yamb --preset P --column down|up|free`` calls
:func:`build_column_oracle`.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from yamblab.errors import UnknownVariantError
from yamblab.games.yamb.rules import get_preset
from yamblab.games.yamb.engine import YambBatch

__all__ = ["grade_yamb", "build_column_oracle", "play_games", "column_regret"]

CHUNK = 500


def play_games(agent: str, preset: str, games: int, seed: int, rules=None) -> np.ndarray:
    """Final scores (points) of ``games`` seeded games: int64 (games,).

    Game ``i`` is game number ``i`` of dice seed ``seed`` (the same dice for every agent).

    Raises:
        UnknownVariantError: an unknown preset or agent.
        ValueError: ``games`` < 1.
    """
    from yamblab.agents.yamb_bots import make_agent, play

    rules = get_preset(preset) if rules is None else rules
    if int(games) < 1:
        raise ValueError(f"games={games}: grade at least one game")
    out = []
    for start in range(0, int(games), CHUNK):
        n = min(CHUNK, int(games) - start)
        agent_obj = make_agent(agent, rules, seed=seed + start)
        out.append(play(agent_obj, YambBatch(n, rules, seed=seed, first_game=start)).total.astype(np.int64))
    return np.concatenate(out)


def column_regret(agent: str, preset: str, games: int, seed: int, column: str = "down") -> dict:
    """Grade ``agent`` on the single-column game of ``column`` against the exact oracle.

    Returns:
        dict: ``column``, ``games``, ``oracle_value`` (optimal expected points),
        ``agent_mean`` (its mean score there), ``mean_regret`` (expected points lost per game,
        the sum of its decisions' regrets; far less noisy than scores) and
        ``regret_ci95`` (low, high).
    """
    from yamblab.agents.yamb_bots import make_agent
    from yamblab.oracle.yamb_column import ColumnOracle, decision_regrets

    oracle = ColumnOracle(get_preset(preset), column)
    batch = YambBatch(int(games), oracle.rules, seed=seed)
    ag = make_agent(agent, oracle.rules, seed=seed)
    regret = np.zeros(batch.n)
    while not batch.done.all():
        a = ag.act(batch)
        regret += decision_regrets(oracle, batch, a)
        batch.step(a)
    lo, hi = _ci(regret)
    return {"column": column, "games": int(games), "oracle_value": oracle.value,
            "agent_mean": float(batch.total.mean()), "mean_regret": float(regret.mean()),
            "regret_ci95": (lo, hi)}


def _ci(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    return float(lo), float(hi)


def grade_yamb(agent: str, preset: str, games: int = 2000, seed: int = 0,
               regret_games: int | None = 200) -> dict:
    """Play ``games`` seeded games of ``preset`` with ``agent`` and summarise the scores.

    Args:
        agent: ``random``, ``greedy`` or ``heuristic``.
        preset: a Yamb preset name (:data:`yamblab.games.yamb.rules.PRESETS`).
        games: number of games (game ``i`` uses the dice of game ``i`` of ``seed``).
        seed: the dice seed.
        regret_games: games of the single down-column game graded decision by decision
            against the exact column oracle (0 or None to skip).

    Returns:
        dict of points: ``agent``, ``preset``, ``games``, ``seed``, ``mean``, ``ci95``
        (low, high; Student t via scipy.stats), ``sd``, ``median``, ``p90``, ``min``, ``max``,
        and ``column_regret`` (see :func:`column_regret`) when ``regret_games``.

    Raises:
        UnknownVariantError: an unknown agent or preset (the message names the known ones).
        ValueError: ``games`` < 1.
    """
    scores = play_games(agent, preset, games, seed).astype(np.float64)
    lo, hi = _ci(scores)
    out = {"agent": agent, "preset": get_preset(preset).name, "games": int(games), "seed": int(seed),
           "mean": float(scores.mean()), "ci95": (lo, hi),
           "sd": float(scores.std(ddof=1)) if len(scores) > 1 else 0.0,
           "median": float(np.median(scores)), "p90": float(np.percentile(scores, 90)),
           "min": float(scores.min()), "max": float(scores.max())}
    if regret_games:
        out["column_regret"] = column_regret(agent, preset, int(regret_games), seed, "down")
    return out


def build_column_oracle(preset: str, column: str = "down") -> float:
    """Solve the single-column game of one column exactly; its value in points.

    ``down`` and ``up`` use :class:`~yamblab.oracle.yamb_column.ColumnOracle` (seconds);
    ``free`` uses :class:`~yamblab.oracle.yamb_free.FreeColumnOracle` on every core (about a
    minute of one core for croatian, ~150 MB; see that module for each preset's size).

    Raises:
        UnknownVariantError: an unknown preset, or a column other than ``down``/``up``/``free``.
    """
    from yamblab.oracle.yamb_column import ColumnOracle

    rules = get_preset(preset)
    if str(column).strip().lower() == "free":
        from yamblab.oracle.yamb_free import FreeColumnOracle

        return FreeColumnOracle(rules).value
    return ColumnOracle(rules, column).value
