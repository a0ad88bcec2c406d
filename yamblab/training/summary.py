"""What a finished training run reached, in one summary: its last regrets (the exact full-turn
regret, the sampled one, the policy head alone's) and the minutes and self-play positions it took
to first reach each regret threshold, printed by ``yamblab train`` and logged to its MLflow run.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from yamblab.training.config import EXACT_MODE

#: regret thresholds (points per game) whose first crossing a summary times
THRESHOLDS = (5.0, 2.0, 1.0, 0.5, 0.2)
#: a relapse: after first reaching ``RELAPSE_FROM`` points a game, an evaluation above
#: ``RELAPSE_ABOVE``
RELAPSE_FROM, RELAPSE_ABOVE = 2.0, 3.0
#: the evaluation mode of the policy head alone (no search)
POLICY_MODE = "none"


def load_run_evals(paths: list[Path]) -> dict[str, list[dict]]:
    """Each run's evaluations (:attr:`TrainingRun.evals`), read from its folder's checkpoint.

    Args:
        paths: run folders (each with a ``checkpoint.pt``), or folders of run folders (a
            sweep's ``runs/sweeps/NAME``: every run in it).

    Returns:
        run folder name -> its evaluations, oldest first.

    Raises:
        FileNotFoundError: a path with no checkpoint in it or in a folder under it.
        DamagedFileError: a checkpoint that is truncated or corrupt.
    """
    from yamblab.model.checkpoint import load_checkpoint

    runs = {}
    for p in map(Path, paths):
        found = [p / "checkpoint.pt"] if (p / "checkpoint.pt").exists() else sorted(p.glob("*/checkpoint.pt"))
        if not found:
            raise FileNotFoundError(f"{p}: no checkpoint.pt in it or in a folder under it")
        for ckpt in found:
            runs[ckpt.parent.name] = json.loads(load_checkpoint(ckpt)["evals"])
    return runs


def run_label(folder: str) -> str:
    """A run folder's name without the 12-hex-digit config digest a sweep gives its trials'
    folders (``ARM-seedS-0123456789ab`` -> ``ARM-seedS``); any other name as it is."""
    return re.sub(r"-[0-9a-f]{12}$", "", folder)


def _key(threshold: float) -> str:
    return f"{threshold:g}".replace(".", "_")


def _mean(per_game) -> float:
    a = np.asarray(per_game, np.float64)
    return float(a.mean()) if a.size else math.nan


def regret_series(evals: list[dict]) -> tuple[str, list[tuple[float, int, float]]]:
    """The run's headline regret at each evaluation: the exact full-turn regret where the run
    computes it, else the main mode's regret on the evaluation games.

    Args:
        evals: the run's evaluations (:attr:`TrainingRun.evals`), each with ``minutes``,
            ``positions``, ``loss``, ``per_game_regret`` and ``modes``.

    Returns:
        ``(name, [(minutes, self-play positions, regret points/game), …])``; an empty list for
        a run graded against a bot instead of an oracle (no regret).
    """
    if not evals:
        return "regret", []
    if _whole_game_exact(evals[-1]):
        return "exact_regret", [(float(e["minutes"]), int(e["positions"]),
                                 _mean(e["modes"][EXACT_MODE]["per_game_regret"]))
                                for e in evals if EXACT_MODE in (e.get("modes") or {})]
    if evals[-1].get("loss", "regret") != "regret":
        return "regret", []
    return "regret", [(float(e["minutes"]), int(e["positions"]), _mean(e["per_game_regret"])) for e in evals]


def _whole_game_exact(ev: dict) -> bool:
    """Whether an evaluation holds the exact full-turn regret of a whole game (Yahtzee's), not of
    a Yamb card's endgame."""
    mode = (ev.get("modes") or {}).get(EXACT_MODE)
    return mode is not None and mode.get("loss", EXACT_MODE) == EXACT_MODE


def run_summary(evals: list[dict]) -> dict[str, float]:
    """The summary of a run's evaluations (every value a float, ready for MLflow).

    Keys (each present only when it applies): ``summary.exact_regret`` (exact full-turn regret
    at the last evaluation, points/game; on a Yamb card ``summary.endgame_regret``, its
    endgame's, with no thresholds), ``summary.regret`` (the main mode's regret on the evaluation games),
    ``summary.policy_regret`` (the policy head alone), ``summary.minutes`` and
    ``summary.positions`` (where the last evaluation stood), for each threshold ``t`` of
    :data:`THRESHOLDS` the headline regret first reached, ``summary.minutes_to_T`` and
    ``summary.positions_to_T`` (``T`` as ``1``, ``0_5``…), and once the headline first reached
    :data:`RELAPSE_FROM`, ``summary.worst_after_2`` (the largest regret of any later
    evaluation) and ``summary.relapsed`` (1.0 if that exceeds :data:`RELAPSE_ABOVE`, else 0.0).
    """
    if not evals:
        return {}
    last = evals[-1]
    out = {"summary.minutes": float(last["minutes"]), "summary.positions": float(last["positions"])}
    modes = last.get("modes") or {}
    if EXACT_MODE in modes:
        key = "summary.exact_regret" if _whole_game_exact(last) else "summary.endgame_regret"
        out[key] = _mean(modes[EXACT_MODE]["per_game_regret"])
    if last.get("loss", "regret") == "regret":
        out["summary.regret"] = _mean(last["per_game_regret"])
    if POLICY_MODE in modes and modes[POLICY_MODE].get("loss", "regret") == "regret":
        out["summary.policy_regret"] = _mean(modes[POLICY_MODE]["per_game_regret"])
    _, series = regret_series(evals)
    for t in THRESHOLDS:
        hit = next(((m, p) for m, p, r in series if r <= t), None)
        if hit is not None:
            out[f"summary.minutes_to_{_key(t)}"] = hit[0]
            out[f"summary.positions_to_{_key(t)}"] = float(hit[1])
    first = next((i for i, (_, _, r) in enumerate(series) if r <= RELAPSE_FROM), None)
    if first is not None:
        worst = max(r for _, _, r in series[first:])
        out[f"summary.worst_after_{_key(RELAPSE_FROM)}"] = worst
        out["summary.relapsed"] = float(worst > RELAPSE_ABOVE)
    return out


def format_summary(summary: dict[str, float]) -> str:
    """The summary as the lines ``yamblab train`` prints at its end ("" when it has no regret)."""
    lines = []
    names = (("summary.exact_regret", "exact full-turn regret"), ("summary.regret", "regret"),
             ("summary.policy_regret", "policy head alone"),
             ("summary.endgame_regret", "full-turn search's exact regret over the endgame"))
    got = [f"{words} {summary[k]:.2f}" for k, words in names if k in summary]
    if got:
        lines.append("regret (points/game, last evaluation): " + "; ".join(got))
    reached = [f"≤{t:g} at {summary[f'summary.minutes_to_{_key(t)}']:.1f} min "
               f"({summary[f'summary.positions_to_{_key(t)}']:,.0f} positions)"
               for t in THRESHOLDS if f"summary.minutes_to_{_key(t)}" in summary]
    if reached:
        lines.append("first reached: " + ", ".join(reached))
    worst = summary.get(f"summary.worst_after_{_key(RELAPSE_FROM)}")
    if worst is not None:
        verdict = "a relapse" if summary.get("summary.relapsed") else "no relapse"
        lines.append(f"after first reaching {RELAPSE_FROM:g}: worst evaluation {worst:.2f} ({verdict}: "
                     f"above {RELAPSE_ABOVE:g} counts as one)")
    return "\n".join(lines)


__all__ = ["THRESHOLDS", "RELAPSE_FROM", "RELAPSE_ABOVE", "regret_series", "run_summary", "format_summary"]
