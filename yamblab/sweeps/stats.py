"""The statistics of a sweep's table: each arm's losses per training seed and evaluation game
(:class:`ArmResult`), the 95% interval of a crossed seeds × games design, the paired difference
of each arm from the baseline with its minimum detectable effect, and the training seeds and
games a target half-width needs (:func:`summarise` makes the table's rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats


@dataclass
class ArmResult:
    """Evaluation regrets of one arm: float64 (seeds, games) points per game, one row per
    training seed (in seed order), one column per evaluation game (the same dice for every arm).

    Attributes:
        arm: the arm's name.
        per_seed_game: the main mode's (seeds, games) array.
        seeds: the training seeds, one per row.
        mode: the decision mode ``per_seed_game`` was played in (``"none"``, ``"one_step"``,
            ``"full_turn"``; None where unknown).
        modes: further modes' (seeds, games) arrays, by mode; their games are the first games
            of the same dice (a mode may be graded on more or fewer games than the main one).
    """

    arm: str
    per_seed_game: np.ndarray
    seeds: list[int] = field(default_factory=list)
    mode: str | None = None
    modes: dict[str, np.ndarray] = field(default_factory=dict)

    def graded(self) -> list[str | None]:
        """The modes this arm was graded on: its main mode first."""
        return [self.mode, *(m for m in self.modes if m != self.mode)]

    def table(self, mode: str | None = None) -> np.ndarray:
        """The (seeds, games) float64 array of ``mode`` (default: the main mode).

        Raises:
            KeyError: the arm was not graded on ``mode``.
        """
        x = self.per_seed_game if mode is None or mode == self.mode else self.modes[mode]
        return np.atleast_2d(np.asarray(x, dtype=np.float64))


#: the paired interval's target half-width (points per game): a difference of this size between
#: two training ideas is what the ablation should resolve
TARGET_HALF_WIDTH = 0.5


def minimum_detectable_effect(half_width: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true paired difference a two-sided test at level ``alpha`` detects with
    probability ``power``, from the half-width of the difference's ``1 - alpha`` interval.

    The standard power formula for a normal (z) test of a mean difference gives
    ``MDE = (z_{1-alpha/2} + z_{power}) * SE`` (Bloom, "Minimum detectable effects", Evaluation
    Review 19(5), 1995; Cohen, *Statistical Power Analysis for the Behavioral Sciences*, 1988,
    ch. 2), and the interval's half-width is ``z_{1-alpha/2} * SE``, so
    ``MDE = (z_{1-alpha/2} + z_{power}) / z_{1-alpha/2} * half_width``: about 1.43 × the
    half-width at 5% and 80%. With a bootstrap or Student-t interval the half-width stands in
    for ``z * SE`` (the normal approximation).

    Args:
        half_width: half the width of the paired difference's interval (points per game, >= 0).
        alpha: the test's two-sided level (0 < alpha < 1).
        power: the probability of detecting a true difference of the MDE (0 < power < 1).

    Returns:
        the MDE in the units of ``half_width`` (points per game).
    """
    za = float(stats.norm.ppf(1.0 - alpha / 2.0))
    zb = float(stats.norm.ppf(power))
    return (za + zb) / za * float(half_width)


def variance_components(d: np.ndarray) -> dict[str, float] | None:
    """Variance components of a (seeds, games) array of paired differences (points per game).

    The model is the two-way crossed one of a sweep's design, every training seed graded on the
    same evaluation games: ``d[s, g] = mu + a_s + b_g + e_sg``, with ``a_s`` the training seed's
    effect (its network is better or worse than the baseline's of the same seed), ``b_g`` the
    game's (dice on which the arm is always better or worse) and ``e_sg`` the rest. The
    method-of-moments (ANOVA) estimates, truncated at 0 (Searle, Casella and McCulloch,
    *Variance Components*, 1992, ch. 4):
    ``seed = (MS_seed - MS_e) / G``, ``game = (MS_game - MS_e) / S``, ``resid = MS_e``.

    Returns:
        ``{"seed", "game", "resid"}`` (variances, points² per game²), or None with fewer than 2
        seeds or 2 games (the seed-to-seed spread is then not estimable).
    """
    x = np.atleast_2d(np.asarray(d, dtype=np.float64))
    n_s, n_g = x.shape
    if n_s < 2 or n_g < 2:
        return None
    ms_seed, ms_game, ms_e = _mean_squares(x)
    return {"seed": max(0.0, (ms_seed - ms_e) / n_g), "game": max(0.0, (ms_game - ms_e) / n_s), "resid": ms_e}


def _mean_squares(x: np.ndarray) -> tuple[float, float, float]:
    """The two-way ANOVA mean squares (seeds, games, residual) of a (S >= 2, G >= 2) array."""
    n_s, n_g = x.shape
    m = x.mean()
    rows, cols = x.mean(axis=1), x.mean(axis=0)
    ms_s = n_g * float(np.sum((rows - m) ** 2)) / (n_s - 1)
    ms_g = n_s * float(np.sum((cols - m) ** 2)) / (n_g - 1)
    ms_e = float(np.sum((x - rows[:, None] - cols[None, :] + m) ** 2)) / ((n_s - 1) * (n_g - 1))
    return ms_s, ms_g, ms_e


def seeds_needed(vc: dict[str, float], games: int, target: float = TARGET_HALF_WIDTH) -> int | None:
    """Training seeds a paired difference needs for a 95% half-width of ``target`` at ``games``
    evaluation games, from its :func:`variance_components` (normal approximation).

    The mean of S seeds on G shared games has variance ``seed/S + game/G + resid/(S G)``;
    solving ``1.96 * sqrt(var) <= target`` for S gives
    ``S >= (seed + resid/G) / ((target/1.96)² - game/G)``.

    Returns:
        the smallest such S (at least 1), or None when no number of seeds reaches ``target``
        at ``games`` games (the game term alone is too wide: more games are needed).
    """
    z = float(stats.norm.ppf(0.975))
    room = (target / z) ** 2 - vc["game"] / games
    if room <= 0:
        return None
    return max(1, math.ceil((vc["seed"] + vc["resid"] / games) / room - 1e-12))


def design_for_target(vc: dict[str, float], games: int, target: float = TARGET_HALF_WIDTH) -> tuple[int, int]:
    """(training seeds, evaluation games) that reach a 95% half-width of ``target``.

    At the current ``games`` when some number of seeds reaches it (:func:`seeds_needed`);
    otherwise at the games where the game term ``game/G`` takes half of the allowed variance
    (``G = 2 * 1.96² * game / target²``), with the seeds that then reach it.
    """
    need = seeds_needed(vc, games, target)
    if need is not None:
        return need, games
    z = float(stats.norm.ppf(0.975))
    g = max(games + 1, math.ceil(2.0 * z * z * vc["game"] / target ** 2))
    return seeds_needed(vc, g, target), g


def _interval(samples: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean of a (seeds, games) array.

    One seed: Student t over the games. Several seeds: the crossed two-way random-effects
    model of :func:`variance_components` (every seed graded on the same games), whose mean has
    the unbiased variance estimate ``(MS_seed + MS_game - MS_e) / (S G)``, with Satterthwaite's
    degrees of freedom (Satterthwaite, Biometrics Bulletin 2(6), 1946; Searle, Casella and
    McCulloch, *Variance Components*, 1992, sec. 4.7), so that the spread between training
    seeds counts with the few degrees of freedom that S seeds give it. (A bootstrap over two
    seeds is far too narrow: two runs of the main job with other seeds gave non-overlapping
    intervals.)
    """
    x = np.atleast_2d(np.asarray(samples, dtype=np.float64))
    n_s, n_g = x.shape
    m = float(x.mean())
    if n_s == 1 or n_g == 1:
        v = x.ravel()
        if v.size < 2 or v.std() == 0:
            return m, m
        half = float(stats.t.ppf(0.975, v.size - 1) * stats.sem(v))
        return m - half, m + half
    ms_s, ms_g, ms_e = _mean_squares(x)
    # the unbiased estimate when the games add to the seeds' spread; never less than the seeds'
    # own t interval (MS_seed / (S G), S - 1 degrees of freedom: the seeds are the units)
    num = ms_s + ms_g - ms_e
    if num > ms_s:
        parts = [(ms_s, n_s - 1), (ms_g, n_g - 1), (ms_e, (n_s - 1) * (n_g - 1))]
        df = num ** 2 / sum(v * v / d for v, d in parts)
    else:
        num, df = ms_s, n_s - 1
    if num <= 0.0:
        return m, m
    df = float(max(df, 1.0))
    half = float(stats.t.ppf(0.975, df) * math.sqrt(num / (n_s * n_g)))
    return m - half, m + half


def _paired(a: ArmResult, b: ArmResult, mode: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The two arms' arrays on ``mode``, paired by training seed and evaluation game: the seeds
    both have (rows in seed order) and the first games both have (the same dice). None when
    either was not graded on ``mode`` or they share no seed."""
    try:
        x, y = a.table(mode), b.table(mode)
    except KeyError:
        return None
    if a.seeds and b.seeds and len(a.seeds) == len(x) and len(b.seeds) == len(y):
        common = [s for s in a.seeds if s in b.seeds]
        if not common:
            return None
        x = x[[a.seeds.index(s) for s in common]]
        y = y[[b.seeds.index(s) for s in common]]
    elif x.shape[0] != y.shape[0]:
        return None
    n = min(x.shape[1], y.shape[1])
    return x[:, :n], y[:, :n]


def summarise(arms: dict[str, ArmResult], baseline: str,
              judge: dict[str, str | list[str]] | None = None, target: float = TARGET_HALF_WIDTH) -> list[dict]:
    """Per arm: mean regret per game with 95% CI, and the paired difference from the baseline
    on the decision mode the arm is judged on, with its minimum detectable effect.

    The difference of arm A from baseline B is paired by evaluation game (same dice) and by
    training seed: ``regret_A(s, g) - regret_B(s, g)``, both played in A's mode. Its 95%
    interval is a Student t over the games with one seed, and with several the crossed
    seeds × games random-effects interval of :func:`_interval` (Satterthwaite's degrees of
    freedom); the arm "matters" when the interval excludes 0.
    Its MDE (:func:`minimum_detectable_effect`) is the smallest true difference that interval's
    test would detect with 80% power.

    Args:
        arms: arm name -> its results (the baseline among them), in table order.
        baseline: the arm the others are compared with.
        judge: arm -> the mode it is judged on, or a list of modes (a row for each; default:
            the arm's main mode, ``ArmResult.mode``).
        target: the paired half-width (points per game) the seeds and games planned for each
            difference should reach (``seeds_needed``, ``games_needed``).

    Returns:
        one row (a dict) per compared arm, and one for the baseline on each mode its arms are
        judged on (where the baseline stands in the order): ``arm``, ``mode``, ``seeds``,
        ``games``, ``regret``, ``ci_low``, ``ci_high``, ``seed_means``, ``key`` (the MLflow
        metric prefix: the arm's name, with ``.MODE`` for the baseline off its main mode) and,
        where paired: ``diff``, ``diff_low``, ``diff_high``, ``half_width``, ``mde``,
        ``matters``, and with two seeds or more the difference's spread between training seeds,
        between games and the rest (``sd_seed``, ``sd_game``, ``sd_resid``, points per game:
        :func:`variance_components`) and the seeds that would reach the ±0.5 target at the same
        games, or at more games where those cannot (``seeds_needed``, ``games_needed``:
        :func:`design_for_target`); ``note`` says why an
        arm has no comparison.
    """
    judge = {a: (list(m) if isinstance(m, (list, tuple)) else [m]) for a, m in (judge or {}).items()}
    base = arms.get(baseline)

    def stats_row(name: str, x: np.ndarray, mode: str | None, n_seeds: int) -> dict:
        lo, hi = _interval(x)
        return {"arm": name, "mode": mode, "seeds": n_seeds, "games": int(x.shape[1]), "regret": float(x.mean()),
                "ci_low": lo, "ci_high": hi, "seed_means": [float(v) for v in x.mean(axis=1)], "key": _safe(name)}

    used = list(dict.fromkeys(m for n, r in arms.items() if n != baseline for m in judge.get(n, [r.mode])))
    rows = []
    for name, res in arms.items():
        if name == baseline:
            for mode in used or [res.mode]:
                try:
                    x = res.table(mode)
                except KeyError:
                    continue
                row = stats_row(name, x, mode, len(res.seeds))
                if mode is not None and mode != res.mode:
                    row["key"] = f"{_safe(name)}.{mode}"
                rows.append(row)
            continue
        for k, mode in enumerate(judge.get(name, [res.mode])):
            row = _compared_row(stats_row, name, res, base, baseline, mode, target)
            if k > 0:
                row["key"] = f"{_safe(name)}.{mode}"
            rows.append(row)
    return rows


def _compared_row(stats_row, name: str, res: ArmResult, base: ArmResult | None, baseline: str, mode,
                  target: float = 0.5) -> dict:
    """One compared arm's row of :func:`summarise` on ``mode`` (``stats_row`` makes its
    per-arm figures; the paired ones are added here)."""
    try:
        row = stats_row(name, res.table(mode), mode, len(res.seeds))
    except KeyError:
        row = stats_row(name, res.table(), res.mode, len(res.seeds))
        row["note"] = f"not graded on {mode}"
        return row
    pair = _paired(res, base, mode) if base is not None else None
    if pair is None:
        if base is not None:
            row["note"] = f"{baseline} not graded on {mode}" if mode not in base.graded() else "no paired seeds"
        return row
    d = pair[0] - pair[1]
    dlo, dhi = _interval(d)
    half = (dhi - dlo) / 2.0
    row.update(diff=float(d.mean()), diff_low=dlo, diff_high=dhi, half_width=half,
               mde=minimum_detectable_effect(half), matters=bool(dlo > 0 or dhi < 0))
    vc = variance_components(d)
    if vc is not None:
        n_seeds, n_games = design_for_target(vc, d.shape[1], target)
        row.update(sd_seed=math.sqrt(vc["seed"]), sd_game=math.sqrt(vc["game"]),
                   sd_resid=math.sqrt(vc["resid"]), seeds_needed=n_seeds, games_needed=n_games)
    return row


def _safe(name: str) -> str:
    """A file- and metric-safe form of an arm name (factor arms contain ``=`` and ``,``)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("_") or "arm"
