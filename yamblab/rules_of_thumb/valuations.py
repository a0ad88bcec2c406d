"""Rules of thumb: named valuation formulas of boundary states (the study of
"The Best Values Aren't the Averages", reproduced).

A **valuation** is any function of the boundary state (filled boxes, upper subtotal capped at
63, Yahtzee box) worth "points still to come"; the turn-perfect agent of a valuation plays every
keep and box exactly against it (:mod:`yamblab.oracle.yahtzee.policy_eval`). A :class:`RuleOfThumb`
is a formula of the Best Values post's family, a pydantic model with its parameters:

    W(s) = Σ_{open boxes b} v_b(stage)  +  bonus(s)  +  y · [Yahtzee box holds 50]

* ``v_b``: the value of an open box (one set of 13, or one per stage of the game, the stage
  being the number of boxes filled, 0 … 12, grouped into ``len(box_values)`` equal bins).
* ``bonus``: the upper bonus still to come. With the *margin* ``m = upper + 3 · Σ open upper
  faces − 63`` (on track when three of each open upper face still reach 63):
  ``"step"``: ``size · [m ≥ 0]``; ``"ramp"``: ``size · clip(mid + m / slope, 0, 1)`` (half of
  ``size`` when exactly on track, all of it ``slope · (1 − mid)`` points ahead); ``"none"``: 0.
  Once the bonus is earned (upper ≥ 63) it is in the past: the term is 0.
* ``y``: a flag for a Yahtzee scored (standing in for later 100-point bonuses).

The full card is worth 0 (nothing is still to come). The post's named rules are
:func:`named_rule` (``average``, ``average-step``, ``average-ramp``, ``tuned-ramp``); the
least-squares fits of :func:`fit_additive` are rules of the same family.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from yamblab.errors import ConfigError, UnknownVariantError
from yamblab.games.yahtzee.rules import BOX_NAMES, OFFICIAL, YahtzeeRules

TABLE_SHAPE = (4096, 3, 64)

__all__ = ["RuleOfThumb", "named_rule", "RULE_NAMES", "TUNED", "split_stages", "optimal_box_means", "fit_additive",
           "load_rule"]


@lru_cache(maxsize=1)
def _grids():
    """Per-entry arrays of the table layout: open-box indicators, stage, margin, flags."""
    m = np.arange(4096)[:, None, None]
    ys = np.arange(3)[None, :, None]
    u = np.arange(64)[None, None, :]
    shape = TABLE_SHAPE
    open_ = np.zeros(shape + (13,), dtype=np.float64)
    for c in range(11):
        open_[..., c] = np.broadcast_to(((m >> c) & 1) == 0, shape)
    open_[..., 12] = np.broadcast_to(((m >> 11) & 1) == 0, shape)
    open_[..., 11] = np.broadcast_to(ys == 0, shape)
    filled = np.array([bin(x).count("1") for x in range(4096)])[:, None, None] + (ys > 0)
    stage = np.broadcast_to(filled, shape)
    open_upper = sum(3 * (f + 1) * (((m >> f) & 1) == 0) for f in range(6))
    margin = np.broadcast_to(u + open_upper - 63, shape).astype(np.float64)
    earned = np.broadcast_to(u >= 63, shape)
    fifty = np.broadcast_to(ys == 2, shape)
    full = stage == 13
    for a in (open_, margin):
        a.setflags(write=False)
    return open_, stage, margin, earned, fifty, full


class RuleOfThumb(BaseModel):
    """A valuation formula of the Best Values post's family (see the module note).

    Attributes:
        name: a short name for reports.
        box_values: points of each open box, in card order: a list of 13 numbers, or a list
            of K such lists, one per stage bin (stages 0 … 12 boxes filled, K equal bins).
        bonus: ``"none"``, ``"step"`` or ``"ramp"``.
        bonus_size: points of the bonus term when on track (step) or well ahead (ramp); one
            number, or one per stage bin.
        ramp_slope: points of margin over which the ramp rises from 0 to ``bonus_size``.
        ramp_mid: fraction of ``bonus_size`` when exactly on track (margin 0).
        yahtzee_flag: points added once the Yahtzee box holds 50; one number or one per bin.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "rule"
    box_values: list[float] | list[list[float]]
    bonus: Literal["none", "step", "ramp"] = "none"
    bonus_size: float | list[float] = 35.0
    ramp_slope: float = Field(12.0, gt=0)
    ramp_mid: float = 0.5
    yahtzee_flag: float | list[float] = 0.0

    @field_validator("box_values")
    @classmethod
    def _thirteen(cls, v):
        rows = v if v and isinstance(v[0], list) else [v]
        if not 1 <= len(rows) <= 13 or any(len(r) != 13 for r in rows):
            raise ValueError("box_values must be 13 numbers, or 1..13 lists of 13 (one per stage bin)")
        return v

    @property
    def bins(self) -> int:
        """Number of stage bins K."""
        return len(self.box_values) if isinstance(self.box_values[0], list) else 1

    def _per_bin(self, x) -> np.ndarray:
        a = np.atleast_1d(np.asarray(x, dtype=np.float64))
        if a.size == 1:
            return np.repeat(a, self.bins)
        if a.size != self.bins:
            raise ValueError(f"{a.size} per-stage values for {self.bins} stage bins")
        return a

    def stage_bin(self, stage: np.ndarray) -> np.ndarray:
        """int (…): the stage bin of each stage (0 … 12 boxes filled; 13 maps to the last)."""
        return np.minimum(np.minimum(stage, 12) * self.bins // 13, self.bins - 1)

    @property
    def n_params(self) -> int:
        """Number of free numbers of the formula (box values, bonus terms, flags)."""
        return int(self.vector().size)

    def table(self, rules: YahtzeeRules = OFFICIAL) -> np.ndarray:
        """The valuation as a table: float64 (4096, 3, 64), points still to come.

        Without an upper bonus in ``rules`` the bonus term is 0 (the table has one lane).
        """
        open_, stage, margin, earned, fifty, full = _grids()
        rows = np.array(self.box_values if self.bins > 1 else [self.box_values], dtype=np.float64)
        k = self.stage_bin(stage)
        W = np.einsum("msuc,msuc->msu", open_, rows[k])
        if rules.upper_bonus and self.bonus != "none":
            size = self._per_bin(self.bonus_size)[k]
            if self.bonus == "step":
                b = size * (margin >= 0)
            else:
                b = size * np.clip(self.ramp_mid + margin / self.ramp_slope, 0.0, 1.0)
            W += np.where(earned, 0.0, b)
        W += self._per_bin(self.yahtzee_flag)[k] * fifty
        W[full] = 0.0
        if not rules.upper_bonus:
            W[:] = W[:, :, :1]
        return np.ascontiguousarray(W)

    def vector(self) -> np.ndarray:
        """The free parameters as float64 (n,): box values (flattened), bonus size(s), ramp
        slope and midpoint (ramp only), Yahtzee flag(s)."""
        v = list(np.ravel(self.box_values))
        if self.bonus != "none":
            v += list(np.atleast_1d(self.bonus_size))
        if self.bonus == "ramp":
            v += [self.ramp_slope, self.ramp_mid]
        v += list(np.atleast_1d(self.yahtzee_flag))
        return np.array(v, dtype=np.float64)

    def param_names(self) -> list[str]:
        """Names of the entries of :meth:`vector`."""
        def each(name, x):
            n = np.size(x)
            return [name] if n == 1 else [f"{name}.s{k}" for k in range(n)]
        if self.bins > 1:
            names = [f"{b}.s{k}" for k in range(self.bins) for b in BOX_NAMES]
        else:
            names = list(BOX_NAMES)
        if self.bonus != "none":
            names += each("bonus_size", self.bonus_size)
        if self.bonus == "ramp":
            names += ["ramp_slope", "ramp_mid"]
        return names + each("yahtzee_flag", self.yahtzee_flag)

    def with_vector(self, x, name: str | None = None) -> "RuleOfThumb":
        """A copy with the free parameters of :meth:`vector` replaced by ``x``."""
        x = [float(t) for t in x]
        i = int(np.size(self.box_values))
        flat = x[:i]
        upd: dict = {"name": name or self.name,
                     "box_values": flat if self.bins == 1 else [flat[j:j + 13] for j in range(0, i, 13)]}

        def take(cur):
            nonlocal i
            n = int(np.size(cur))
            out = x[i] if n == 1 and not isinstance(cur, list) else x[i:i + n]
            i += n
            return out
        if self.bonus != "none":
            upd["bonus_size"] = take(self.bonus_size)
        if self.bonus == "ramp":
            upd["ramp_slope"] = max(x[i], 1e-3)
            upd["ramp_mid"] = x[i + 1]
            i += 2
        upd["yahtzee_flag"] = take(self.yahtzee_flag)
        return self.model_copy(update=upd)


@lru_cache(maxsize=8)
def _optimal_box_means(rules_key: str) -> tuple[float, ...]:
    from yamblab.rules_of_thumb.occupancy import forward_occupancy
    from yamblab.oracle.yahtzee.table import OracleTable

    rules = YahtzeeRules.parse(rules_key) if rules_key != OFFICIAL.key else OFFICIAL
    V = OracleTable.get(rules).values
    return tuple(float(x) for x in forward_occupancy(V, rules).box_means)


def optimal_box_means(rules: YahtzeeRules = OFFICIAL) -> np.ndarray:
    """float64 (13,): each box's expected points under optimal play, exactly (forward pass).

    Official rules: Ones 1.88 … Chance 22.01 (the Best Values post's "average values").
    """
    return np.array(_optimal_box_means(rules.key if rules != OFFICIAL else OFFICIAL.key))


RULE_NAMES = ("zero", "average", "average-step", "average-ramp")

#: Rules tuned for exact expected score (official rules) by ``yamblab valuation tune``.
#: ``tuned-ramp`` starts from the values the Best Values post quotes (Ones 6.4, Twos 6.8, Large Straight 21,
#: Chance 30, a 36-point ramp of slope 13, 46 for a Yahtzee scored; the other boxes at their
#: means) and is tuned by coordinate descent on its 17 parameters (steps of 2 points down to
#: 0.25, then of 1 point down to 0.125): exact score 251.8267, upper bonus 62.0%. Adding the
#: same number to every box value adds a constant to each stage, which changes no decision, so
#: only 16 of the 17 are free (the post's Ones 6.4 reads as 8.4 here). ``staged-ramp`` is the
#: richer formula: the same family with its box values, bonus size and Yahtzee flag per third
#: of the game (stages 0-4, 5-8, 9-12 boxes filled; slope and midpoint shared), 47 parameters,
#: tuned by coordinate descent from ``tuned-ramp`` (78 evaluations): exact score 252.3425.
TUNED: dict[str, dict] = {
    "tuned-ramp": dict(box_values=[8.40, 8.80, 10.57, 11.66, 13.69, 15.69, 23.66, 17.09, 18.59, 30.46, 23.00, 14.87, 32.00],
                       bonus="ramp", bonus_size=36.00, ramp_slope=13.00, ramp_mid=0.5125, yahtzee_flag=48.75),
    "staged-ramp": dict(box_values=[[8.4, 8.8, 10.57, 11.66, 13.69, 16.69, 23.66, 19.09, 18.59, 33.46, 26.0, 16.87, 32.0],
                                    [8.4, 8.8, 10.57, 11.66, 12.69, 14.69, 24.66, 18.09, 18.59, 30.46, 23.0, 15.87, 31.0],
                                    [10.4, 10.8, 12.57, 12.66, 13.69, 15.69, 24.66, 17.09, 18.59, 30.46, 23.0, 14.87, 32.0]],
                        bonus="ramp", bonus_size=[36.0, 36.0, 36.0], ramp_slope=13.0, ramp_mid=0.5125,
                        yahtzee_flag=[48.75, 48.75, 48.75]),
}


def split_stages(rule: RuleOfThumb, stages: int) -> RuleOfThumb:
    """The same valuation with its box values, bonus size and flag repeated over ``stages`` bins
    (a starting point for tuning a richer formula: each bin can then move on its own)."""
    k_old = rule.stage_bin(np.arange(13))
    centre = [int(np.flatnonzero(np.minimum(np.arange(13) * stages // 13, stages - 1) == k)[0]) for k in range(stages)]
    rows = np.array(rule.box_values if rule.bins > 1 else [rule.box_values])
    sizes = rule._per_bin(rule.bonus_size)
    flags = rule._per_bin(rule.yahtzee_flag)
    pick = [int(k_old[c]) for c in centre]
    return rule.model_copy(update={
        "name": f"{rule.name}-{stages}stages", "box_values": [list(map(float, rows[i])) for i in pick],
        "bonus_size": [float(sizes[i]) for i in pick], "yahtzee_flag": [float(flags[i]) for i in pick]})


def named_rule(name: str, rules: YahtzeeRules = OFFICIAL) -> RuleOfThumb:
    """The Best Values post's hand-built rules of thumb by name.

    ``zero`` (greedy), ``average`` (each open box worth its mean score under optimal play,
    to two decimals), ``average-step`` (+ 35 when on track), ``average-ramp`` (+ a 35-point
    ramp of slope 12 and 9 points for a Yahtzee scored), and the tuned rules of :data:`TUNED`.

    Raises:
        UnknownVariantError: an unknown name.
    """
    if name == "zero":
        return RuleOfThumb(name="zero", box_values=[0.0] * 13)
    if name in TUNED:
        return RuleOfThumb(name=name, **TUNED[name])
    if name not in RULE_NAMES:
        raise UnknownVariantError(f"unknown rule of thumb {name!r}; choose one of "
                                  f"{', '.join(RULE_NAMES + tuple(TUNED))}")
    # the post uses the means as it prints them, to two decimals (235.00 and 232.32 need it;
    # the unrounded means give 235.17 and 232.44)
    means = [round(float(x), 2) for x in optimal_box_means(rules)]
    if name == "average":
        return RuleOfThumb(name=name, box_values=means)
    if name == "average-step":
        return RuleOfThumb(name=name, box_values=means, bonus="step", bonus_size=35.0)
    return RuleOfThumb(name=name, box_values=means, bonus="ramp", bonus_size=35.0, ramp_slope=12.0,
                       ramp_mid=0.5, yahtzee_flag=9.0)


def fit_additive(target: np.ndarray, weights: np.ndarray, stages: int = 1,
                 name: str | None = None) -> tuple[RuleOfThumb, float]:
    """Least-squares fit of a ramp rule to a table of values (the Best Values post's "fitted" rules).

    Minimises ``Σ_s w_s (f(s) − target_s)²`` over the states with ``w_s > 0`` and at least one
    open box, where ``f`` is linear in its parameters: 13 open-box values, the size of the
    35-point-style ramp (slope 12, midpoint 1/2), the Yahtzee flag and a constant, one such set
    per stage bin (``stages=13``: each number of filled boxes). The constant of a stage is the
    same for every state a turn can end in, so it never changes a decision and the returned
    rule drops it. Solved by :func:`scipy.linalg.lstsq` stage by stage.

    Args:
        target: float64 (4096, 3, 64) values to predict (the oracle table; NaN is skipped).
        weights: float64 (4096, 3, 64) non-negative weights (the post's reading: the
            probability that optimal play visits each state).
        stages: number of stage bins, 1 … 13.

    Returns:
        ``(rule, rms)``: the fitted :class:`RuleOfThumb` (bonus ``"ramp"``) and the weighted
        RMS error of the fit, points.
    """
    from scipy.linalg import lstsq

    open_, stage, margin, earned, fifty, full = _grids()
    target = np.asarray(target, dtype=np.float64)
    ramp = np.where(earned, 0.0, np.clip(0.5 + margin / 12.0, 0.0, 1.0))
    use = (weights > 0) & (stage < 13) & np.isfinite(target)
    total = float(weights[use].sum())
    bins = np.minimum(np.minimum(stage, 12) * stages // 13, stages - 1)
    boxes, sizes, flags, sq = [], [], [], 0.0
    for k in range(stages):
        sel = use & (bins == k)
        X = np.concatenate([open_[sel], ramp[sel][:, None], fifty[sel][:, None],
                            np.ones((int(sel.sum()), 1))], axis=1)
        y = target[sel]
        w = np.sqrt(weights[sel] / total)
        coef, *_ = lstsq(X * w[:, None], y * w)
        sq += float(np.sum((w * (X @ coef - y)) ** 2))
        boxes.append([float(c) for c in coef[:13]])
        sizes.append(float(coef[13]))
        flags.append(float(coef[14]))
    one = stages == 1
    rule = RuleOfThumb(name=name or f"fit-{stages}", box_values=boxes[0] if one else boxes, bonus="ramp",
                       bonus_size=sizes[0] if one else sizes, ramp_slope=12.0, ramp_mid=0.5,
                       yahtzee_flag=flags[0] if one else flags)
    return rule, float(np.sqrt(sq))


def load_rule(path: str | Path) -> RuleOfThumb:
    """Read a :class:`RuleOfThumb` from a JSON or YAML file.

    Raises:
        ConfigError: the file cannot be read or does not describe a rule.
    """
    import yaml
    from pydantic import ValidationError

    p = Path(path)
    try:
        text = p.read_text()
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        return RuleOfThumb.model_validate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read rule file {p}: {exc.strerror or exc}") from None
    except (ValueError, yaml.YAMLError) as exc:
        msg = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()) \
            if isinstance(exc, ValidationError) else str(exc).splitlines()[0]
        raise ConfigError(f"{p}: not a rule of thumb ({msg})") from None
