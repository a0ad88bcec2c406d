"""A sweep's trials: the one expansion of a grid spec into (arm, seed) trials with their configs
and digests, and the typed result a finished trial sends back to the driver."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from yamblab.sweeps.spec import SweepConfig
from yamblab.training.config import RunConfig, apply_overrides


@dataclass(frozen=True)
class GridTrial:
    """One (arm, training seed) of a grid: its run config and its identity (the digest a
    resumed sweep compares)."""

    arm: str
    seed: int
    cfg: RunConfig
    digest: str

    @property
    def key(self) -> str:
        return f"{self.arm}/seed{self.seed}"


def arm_config(spec: SweepConfig, base: RunConfig, overrides: dict, seed: int | None = None) -> RunConfig:
    """``base`` with the sweep's overrides, then ``overrides`` (an arm's, or a tuning trial's
    sampled values), then the training seed."""
    extra = {} if seed is None else {"train.seed": seed}
    return apply_overrides(base, {**spec.overrides, **overrides, **extra}, source=f"sweep {spec.name}")


def grid_trials(spec: SweepConfig, base: RunConfig, digest: Callable[[RunConfig], str]
                ) -> dict[tuple[str, int], GridTrial]:
    """Every trial of a grid spec, ``(arm, seed) -> GridTrial``, arms in the spec's order."""
    out = {}
    for arm, ov in spec.arm_overrides().items():
        for seed in spec.seeds:
            cfg = arm_config(spec, base, ov, seed)
            out[(arm, seed)] = GridTrial(arm, seed, cfg, digest(cfg))
    return out


def rounded(xs) -> list[float]:
    """Per-game losses as a study keeps them (6 decimals)."""
    return [round(float(x), 6) for x in xs]


@dataclass
class TrialResult:
    """What a finished trial sends to the driver.

    Attributes:
        per_game_regret: the last evaluation's per-game loss in the main mode.
        loss: what that loss is (``"regret"``, or points below a bot).
        modes: every other graded mode's per-game losses, ``{mode: [...]}``.
        scores: the last evaluation's scores.
        metrics: the run's summary (the last iteration's metrics, what it reached, the
            machine's speed).
        files: plots and config, ``{name: bytes}`` (the resumable checkpoint stays in the
            trial's folder).
        network: the trained network, ``{"model_config", "ema"}``.
        late_evals: evaluations that finished after their iteration, with ``eval.iteration``.
    """

    per_game_regret: list[float]
    loss: str
    modes: dict[str, list[float]] = field(default_factory=dict)
    scores: list[float] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    network: dict | None = None
    late_evals: list[dict] = field(default_factory=list)

    def by_mode(self, main: str) -> dict[str, list[float]]:
        """Per-game losses by decision mode, the main mode's first: another mode's replaces the
        main one only where it graded more games (``runtime.eval_modes`` naming the main mode)."""
        out = {main: rounded(self.per_game_regret)}
        for mode, losses in self.modes.items():
            got = rounded(losses)
            if mode != main or len(got) > len(out[main]):
                out[mode] = got
        return out

    def reached(self) -> dict[str, float]:
        """What the run reached (``summary.*``) and the machine's speed (``machine.*``), finite."""
        return {k: float(v) for k, v in self.metrics.items()
                if k.startswith(("summary.", "machine.")) and math.isfinite(float(v))}

    def write_files(self, folder: Path) -> list[Path]:
        """Write :attr:`files` into ``folder``; returns their paths."""
        out = []
        for name, data in self.files.items():
            (folder / name).write_bytes(data)
            out.append(folder / name)
        return out
