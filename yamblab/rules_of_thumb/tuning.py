"""Tuning a rule of thumb for exact expected score (the Best Values post's coordinate
descent, and Optuna).

The objective is noise-free: the exact expected score of the turn-perfect agent of the rule
(:func:`yamblab.oracle.yahtzee.policy_eval.expected_score`, one backward pass, seconds on two cores).
:func:`coordinate_descent` is the Best Values post's method: one parameter at a time, try a step up and
down, keep any improvement, halve the step after a pass without one. :func:`optuna_search`
runs an Optuna sampler (TPE, or CMA-ES through the ``cmaes`` package) in a box
around a starting rule. Both call ``on_trial(trial_number, score, rule)`` after every
evaluation (for progress bars and MLflow logging).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules
from yamblab.oracle.yahtzee.policy_eval import expected_score
from yamblab.rules_of_thumb.valuations import RuleOfThumb

__all__ = ["TuneResult", "coordinate_descent", "optuna_search", "exact_score"]


def exact_score(rule: RuleOfThumb, rules: YahtzeeRules = OFFICIAL) -> float:
    """Exact expected score of the turn-perfect agent of ``rule``, points (one backward pass:
    about 4 s of CPU under official rules, see docs/valuations.md)."""
    return expected_score(rule.table(rules), rules)


@dataclass
class TuneResult:
    """Outcome of a tuning run: the best rule, its exact score, and every trial's score."""

    best: RuleOfThumb
    best_score: float
    scores: list[float] = field(default_factory=list)


def coordinate_descent(start: RuleOfThumb, rules: YahtzeeRules = OFFICIAL, step: float = 2.0,
                       min_step: float = 0.25, max_evals: int = 400,
                       on_trial: Callable | None = None,
                       score: Callable[[RuleOfThumb], float] | None = None) -> TuneResult:
    """The Best Values post's coordinate descent on the exact expected score.

    For each parameter in turn (:meth:`RuleOfThumb.vector` order) try ``x ± step·scale``
    (scale 0.05 for the ramp midpoint, 1 otherwise), keep the better move and keep moving
    that way while it improves; after a full pass with no improvement halve the step; stop
    below ``min_step`` or after ``max_evals`` evaluations.

    Args:
        start: the starting rule.
        step, min_step: first and last step size, points.
        max_evals: the most exact evaluations.
        on_trial: called as ``on_trial(n, score, rule)`` after each evaluation.
        score: the objective (default: :func:`exact_score` under ``rules``).

    Returns:
        :class:`TuneResult`.
    """
    objective = score or (lambda rule: exact_score(rule, rules))
    names = start.param_names()
    scale = np.array([0.05 if n == "ramp_mid" else 1.0 for n in names])
    x = start.vector()
    scores: list[float] = []

    def f(v):
        rule = start.with_vector(v)
        s = objective(rule)
        scores.append(s)
        if on_trial is not None:
            on_trial(len(scores) - 1, s, rule)
        return s

    best = f(x)
    while step >= min_step and len(scores) < max_evals:
        improved = False
        for i in range(x.size):
            for sign in (1.0, -1.0):
                moved = False
                while len(scores) < max_evals:
                    y = x.copy()
                    y[i] += sign * step * scale[i]
                    s = f(y)
                    if s > best + 1e-9:
                        x, best, moved, improved = y, s, True, True
                    else:
                        break
                if moved:
                    break
            if len(scores) >= max_evals:
                break
        if not improved:
            step /= 2
    return TuneResult(start.with_vector(x), best, scores)


def optuna_search(start: RuleOfThumb, rules: YahtzeeRules = OFFICIAL, trials: int = 100,
                  radius: float = 4.0, sampler: str = "tpe", seed: int = 0,
                  on_trial: Callable | None = None,
                  score: Callable[[RuleOfThumb], float] | None = None) -> TuneResult:
    """An Optuna study on the exact expected score, in a box of ±``radius`` around ``start``.

    Each parameter is searched in ``[x0 − radius·scale, x0 + radius·scale]`` (scale 0.05 for
    the ramp midpoint, 1 otherwise); the starting rule is enqueued as the first trial, so the
    best is never worse than the start. The objective is noise-free, so each trial is one
    evaluation.

    Args:
        start: the starting rule; rules: the variant; trials: number of trials.
        radius: half-width of the search box, points.
        sampler: ``"tpe"`` (Optuna's multivariate TPE) or ``"cmaes"`` (needs the ``cmaes``
            package, started at ``start`` with sigma ``radius / 3``).
        seed: the sampler's seed.
        on_trial: called as ``on_trial(n, score, rule)`` after each trial.
        score: the objective (default: :func:`exact_score` under ``rules``).

    Returns:
        :class:`TuneResult` (``scores`` in trial order).

    Raises:
        ValueError: an unknown sampler, or ``cmaes`` without its package.
    """
    objective_fn = score or (lambda rule: exact_score(rule, rules))
    import optuna

    names = start.param_names()
    x0 = start.vector()
    scale = np.array([0.05 if n == "ramp_mid" else 1.0 for n in names])
    if sampler == "tpe":
        samp = optuna.samplers.TPESampler(seed=seed, multivariate=True)
    elif sampler == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise ValueError("the cmaes sampler needs the 'cmaes' package (pip install cmaes); "
                             "or use --method tpe") from None
        # Optuna's defaults start the search at the centre of the box, which is ``start``, with a
        # step of a sixth of the box (radius / 3); its x0 and sigma0 are deprecated since 4.9
        samp = optuna.samplers.CmaEsSampler(seed=seed)
    else:
        raise ValueError(f"unknown sampler {sampler!r}; choose tpe or cmaes")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=samp)
    study.enqueue_trial(dict(zip(names, map(float, x0))))
    scores: list[float] = []

    def objective(trial):
        v = [trial.suggest_float(n, float(x0[i] - radius * scale[i]), float(x0[i] + radius * scale[i]))
             for i, n in enumerate(names)]
        rule = start.with_vector(v)
        s = objective_fn(rule)
        scores.append(s)
        if on_trial is not None:
            on_trial(trial.number, s, rule)
        return s

    study.optimize(objective, n_trials=trials)
    best = start.with_vector([study.best_params[n] for n in names])
    return TuneResult(best, float(study.best_value), scores)
