"""The validated schema of sweep specs (``experiments/*.yaml``, pydantic), read from YAML.

A sweep spec names its base run config (:class:`~yamblab.training.config.RunConfig`) and either
arms / factors (an ablation grid, optionally branched from one trained base) or parameter ranges
(a TPE tuning study); see :class:`SweepConfig`. :func:`load_sweep` reads it with its base and
checks every trial's config up front: unknown keys, wrong types and out-of-range values are
refused before any work starts, with the file and the key named.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yamblab.errors import ConfigError
from yamblab.training.config import EXACT_MODE, SOLVER_MODES, RunConfig, apply_overrides, load_run_config, solver_graded
from yamblab.training.resources import resolve_resources
from yamblab.training.configio import SetOptions, deep_update, read_yaml, validate

#: What an arm can be judged on: a decision mode's played games, a solver-graded loss, or the
#: exact full-turn regret.
JudgeMode = Literal[("none", "one_step", "full_turn", *SOLVER_MODES, EXACT_MODE)]


class ParamRange(BaseModel):
    """A tuning range: ``low``..``high`` (optionally log-scale or integer), or ``choices``."""

    model_config = ConfigDict(extra="forbid")

    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: list[Any] | None = None

    @model_validator(mode="after")
    def _check(self) -> "ParamRange":
        if self.choices is not None:
            if not self.choices:
                raise ValueError("choices must not be empty")
            if self.low is not None or self.high is not None or self.log or self.integer:
                raise ValueError("give choices, or a range (low, high, log, integer), not both")
            bad = [c for c in self.choices if c is not None and not isinstance(c, (bool, int, float, str))]
            if bad:
                raise ValueError(f"choices must be single values (numbers, strings, true/false, null), "
                                 f"not {bad[0]!r}")
            return self
        if self.low is None or self.high is None:
            raise ValueError("give low and high, or choices")
        if not self.low < self.high:
            raise ValueError(f"low {self.low} must be below high {self.high}")
        if self.log and self.low <= 0:
            raise ValueError("a log-scale range needs low > 0")
        if self.integer and not (float(self.low).is_integer() and float(self.high).is_integer()):
            raise ValueError(f"an integer range needs whole-number ends, not {self.low}..{self.high}")
        return self

    def probes(self) -> list[tuple[str, Any]]:
        """Values to check before any trial runs, each with its place in the spec: every choice;
        or both ends of a range and, for a real-valued one, a fractional value inside it (an
        integer setting would refuse what the sampler draws between the ends)."""
        if self.choices is not None:
            return [(f"choices[{i}]", c) for i, c in enumerate(self.choices)]
        if self.integer:
            return [("low", int(self.low)), ("high", int(self.high))]
        inside = self.low + 0.3819660112501051 * (self.high - self.low)
        if self.log:
            inside = self.low * (self.high / self.low) ** 0.3819660112501051
        return [("low", self.low), ("high", self.high), ("a value inside the range", inside)]


class BranchSpec(BaseModel):
    """Where a branched sweep's trials start: one trained base that every arm and seed continues.

    Give exactly one of:

    * ``iterations``: train the baseline arm's config (the sweep's ``overrides``, the baseline
      arm's, then this block's ``overrides``) for this many iterations, once;
    * ``minutes``: the same, for this many minutes of wall time;
    * ``checkpoint``: an existing run's ``checkpoint.pt`` of the same game and network.

    A trained base is cached by the digest of its config under ``RUN_DIR/bases/`` and reused by
    every sweep (and every rerun) with the same base; it is logged as its own MLflow run. Each
    trial then starts from the base's weights, EMA network, optimiser state and replay buffer,
    with its arm's switches and its own training seed (self-play dice, replay sampling), for
    the sweep's ``runtime.iterations`` more iterations.

    Attributes:
        iterations, minutes, checkpoint: the base, as above (a relative checkpoint path is
            looked up beside the spec first, then in the working directory).
        seed: the base run's training seed (``train.seed``).
        cpus: the CPUs the base run may use (default: the sweep's, ``parallel × trial_cpus``).
        overrides: dotted-key overrides of the base run only (e.g. its actors' CPUs).
        evaluate: ``"changed"`` (default): a trial whose network is the base's takes the base's
            last evaluation as its first (the same network on the same positions and dice: the
            same figures, bit for bit), and only a trial whose network changes at the branch (a
            switched head) evaluates its own; ``"always"``: every trial evaluates its own network
            at the branch point (a check of that equality, at the cost of one evaluation each).
    """

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = Field(None, ge=1, le=1_000_000)
    minutes: float | None = Field(None, gt=0.0, le=100_000.0)
    checkpoint: str | None = None
    seed: int = Field(0, ge=0, lt=2**63)
    cpus: float | None = Field(None, gt=0.0, le=4096)
    overrides: dict[str, Any] = Field(default_factory=dict)
    evaluate: Literal["changed", "always"] = "changed"

    @model_validator(mode="after")
    def _check(self) -> "BranchSpec":
        given = [k for k in ("iterations", "minutes", "checkpoint") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("branch_from needs exactly one of iterations, minutes or checkpoint"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.checkpoint is not None and (self.overrides or self.cpus is not None or self.seed != 0):
            raise ValueError("branch_from.overrides, seed and cpus configure a base the sweep trains; a "
                             "checkpoint is already trained")
        from yamblab.training.configio import flatten

        for key in flatten(deep_update({}, self.overrides)):
            if key in ("runtime.iterations", "runtime.time_budget_minutes", "train.seed", "name") or \
                    key.split(".")[0] in ("model", "size", "game", "rules", "preset", "columns"):
                raise ValueError(f"branch_from.overrides.{key}: the base's length is branch_from.iterations "
                                 "or minutes, its seed branch_from.seed, and its network and game are the arms' "
                                 "(set them in the base config or `overrides`)")
        return self


class SweepConfig(BaseModel):
    """An ablation grid or a tuning study.

    Attributes:
        name: the study's name (its Optuna study and MLflow parent run).
        kind: ``"grid"`` (arms × seeds) or ``"tpe"`` (a tuning study).
        base: the run config every trial starts from (relative to the sweep file).
        overrides: dotted-key overrides applied to every trial.
        arms: named arms, each a dict of dotted-key overrides (grid).
        factors: alternatively, values per dotted key; their product makes the arms (grid).
        baseline_arm: the arm the others are compared with (default: the first).
        seeds: training seeds of every arm (``train.seed``).
        params: ranges to tune (tpe); n_trials: trials in all; pruning: median pruning on the
            evaluator's regret; sampler_seed: TPE's seed.
        parallel: trials at once; trial_cpus: CPUs each trial declares.
        storage: Optuna storage: a journal file path (default ``.yamblab/sweeps/NAME.journal``)
            or a database URL (``postgresql://…``).
        tracking_uri, experiment: MLflow store and experiment.
        judge: grid only: what each named arm is judged on, e.g. ``{no-kl-targets:
            policy_regret}`` or a list (``[policy_regret, argmax_regret]``: a row each), so a
            training idea is compared with the baseline where it acts: a
            decision mode's played games (``none``: the policy head alone, ``one_step``,
            ``full_turn``), a solver-graded loss of :data:`SOLVER_MODES` (needs
            ``runtime.solver_eval``), or :data:`EXACT_MODE` (full-turn search's exact regret: on
            Yahtzee the whole game's, on a Yamb card its endgame's).
            An arm not named is judged on its main mode (``runtime.eval_depth``). A played mode
            other than the main one must be graded at every evaluation (``runtime.eval_modes``);
            the baseline is compared on everything its arms are judged on. Checked against the
            trials' configs by :meth:`judge_modes`.
        target_half_width: the paired 95% half-width (in each mode's units per game) the
            ablation should reach: the table says which differences reach it and, from their
            own spread, the training seeds and games that would.
        branch_from: grid only: start every trial from one trained base (:class:`BranchSpec`)
            instead of from scratch; ``runtime.iterations`` then counts the iterations after
            the branch point.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=200)
    kind: Literal["grid", "tpe"] = "grid"
    base: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    arms: dict[str, dict[str, Any]] | None = None
    factors: dict[str, list[Any]] | None = None
    baseline_arm: str | None = None
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0], min_length=1)
    params: dict[str, ParamRange] = Field(default_factory=dict)
    n_trials: int = Field(8, ge=1, le=100_000)
    pruning: bool = True
    sampler_seed: int = Field(0, ge=0, lt=2**32)     # numpy's seeds (Optuna's TPE)
    parallel: int = Field(2, ge=1, le=4096)
    trial_cpus: float = Field(1.0, gt=0.0, le=256)
    storage: str | None = None
    tracking_uri: str | None = None
    experiment: str = "yamblab"
    judge: dict[str, list[JudgeMode]] = Field(default_factory=dict)
    target_half_width: float = Field(0.5, gt=0.0, le=1e6)
    branch_from: BranchSpec | None = None

    @field_validator("judge", mode="before")
    @classmethod
    def _one_mode_is_a_list(cls, v: Any) -> Any:
        """``{arm: mode}`` means ``{arm: [mode]}``."""
        if isinstance(v, dict):
            return {k: ([m] if isinstance(m, str) else m) for k, m in v.items()}
        return v

    @model_validator(mode="after")
    def _check(self) -> "SweepConfig":
        if self.judge and self.kind != "grid":
            raise ValueError("judge: a tpe sweep has no arms to judge (judge is for a grid sweep's arms)")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: each training seed once (got {self.seeds})")
        if "/" in self.name or "\\" in self.name or self.name.startswith("."):
            raise ValueError(f"name {self.name!r}: the study's name names files (its journal, its runs' "
                             "folders): no '/', no '\\', not starting with '.'")
        if self.branch_from is not None and self.kind != "grid":
            raise ValueError("branch_from: a tpe sweep's trials start from scratch (branch_from is for a grid)")
        if self.kind == "grid":
            if not self.arms and not self.factors:
                raise ValueError("a grid sweep needs `arms` or `factors`")
            if self.arms and self.factors:
                raise ValueError("give `arms` or `factors`, not both")
            from yamblab.training.configio import flatten

            for where, ov in [("overrides", self.overrides), *((f"arms.{a}", o) for a, o in (self.arms or {}).items()),
                              ("factors", dict.fromkeys(self.factors or {}))]:
                if "train.seed" in flatten(deep_update({}, ov)):
                    raise ValueError(f"{where}: train.seed is set by `seeds` in a grid sweep (each arm runs "
                                     "every seed); list the seeds there")
            if self.baseline_arm is not None and self.baseline_arm not in self.arm_overrides():
                raise ValueError(f"baseline_arm {self.baseline_arm!r} is not one of the arms "
                                 f"({', '.join(self.arm_overrides())})")
            arms = self.arm_overrides()
            for arm in self.judge:
                if arm not in arms:
                    raise ValueError(f"judge.{arm}: no arm is called {arm!r} (the arms: {', '.join(arms)})")
            baseline = self.baseline_arm or next(iter(arms))
            for arm, modes in self.judge.items():
                if not modes or (not isinstance(modes, str) and len(set(modes)) != len(modes)):
                    raise ValueError(f"judge.{arm}: a list of modes must name each mode once, at least one")
            if baseline in self.judge:
                raise ValueError(f"judge.{baseline}: {baseline!r} is the baseline arm, which is compared on "
                                 "every mode its arms are judged on; name the arms compared with it")
        elif not self.params:
            raise ValueError("a tpe sweep needs `params` to tune")
        return self

    def arm_overrides(self) -> dict[str, dict[str, Any]]:
        """Arm name -> its overrides (factors expand to their product, named key=value,…)."""
        if self.arms:
            return dict(self.arms)
        keys = list(self.factors or {})
        out = {}
        for values in itertools.product(*(self.factors[k] for k in keys)):
            name = ",".join(f"{k.split('.')[-1]}={v}" for k, v in zip(keys, values))
            out[name] = dict(zip(keys, values))
        return out

    def judge_modes(self, base: RunConfig) -> dict[str, list[str]]:
        """What each arm of a grid is judged on, checked against its config.

        Args:
            base: the run config every trial starts from (``overrides`` are applied here, again).

        Returns:
            arm name -> its modes (a played mode ``"none"``, ``"one_step"``, ``"full_turn"``, a
            solver-graded loss or ``"full_turn_exact"``), the first the arm's main verdict, for
            every arm in the spec's order: the ``judge`` entry, else the arm's main mode (its
            resolved ``eval_depth``); the baseline arm maps to its own main mode. ``{}`` for a
            tpe sweep.

        Raises:
            ConfigError: an arm judged on a mode that the arm's or the baseline's trials do not
                grade (neither their main mode nor in their ``runtime.eval_modes``), naming the
                arm and the mode.
        """
        if self.kind != "grid":
            return {}
        arms = self.arm_overrides()
        baseline = self.baseline_arm or next(iter(arms))
        cfgs = {a: apply_overrides(base, {**self.overrides, **ov}, source=f"sweep {self.name}: arms.{a}")
                for a, ov in arms.items()}

        def graded(cfg: RunConfig) -> list[str]:
            return [cfg.eval_depth, *(m for m in cfg.runtime.eval_modes if m != cfg.eval_depth),
                    *solver_graded(cfg)]

        out = {}
        for arm, cfg in cfgs.items():
            modes = self.judge.get(arm, [cfg.eval_depth])
            modes = [modes] if isinstance(modes, str) else list(modes)     # a copy made without validation
            for mode, who in ((m, w) for m in modes for w in dict.fromkeys([arm, baseline])):
                have = graded(cfgs[who])
                if mode not in have:
                    where = f"judge.{arm}" if arm in self.judge else f"arms.{arm}"
                    whose = "its trials" if who == arm else f"the trials of the baseline arm {who!r}"
                    raise ConfigError(
                        f"sweep {self.name}: {where}: arm {arm!r} is judged on mode {mode!r}, which "
                        f"{whose} do not grade (main mode runtime.eval_depth: {have[0]!r}; "
                        f"also graded: {', '.join(have[1:]) or 'nothing'}); {_how_to_grade(mode)}, "
                        f"or judge the arm on one of {', '.join(repr(h) for h in have)}")
            out[arm] = modes
        return out

    def storage_url(self) -> str:
        """The Optuna storage: ``journal:PATH`` for a local journal file, else the URL."""
        if self.storage and "://" in self.storage:
            return self.storage
        path = self.storage or str(Path(".yamblab") / "sweeps" / f"{self.name}.journal")
        return f"journal:{path}"


def _how_to_grade(mode: str) -> str:
    if mode in SOLVER_MODES:
        return ("set runtime.solver_eval: true in `overrides` (Yahtzee, a single Yamb column, or a Yamb "
                "card's endgame)")
    if mode == EXACT_MODE:
        return ("the exact full-turn regret needs runtime.eval_depth full_turn (or search.depth full_turn) and "
                "runtime.exact_eval: true, with model.boundary_head: true on Yahtzee, or runtime.solver_eval: "
                "true on a Yamb card (its endgame)")
    return f"add runtime.eval_modes.{mode}: GAMES to `overrides`"


def _override_spec(data: dict, overrides: dict, placed: dict[str, list[str]] | None = None) -> dict:
    """A spec with dotted-key overrides of its own keys. A key into one of the spec's mappings of
    run-config keys (``overrides.runtime.iterations``, ``arms.ARM.train.lr``,
    ``branch_from.overrides.runtime.eval_every``) sets that mapping's dotted key, as the file
    writes it, so that it replaces the file's value instead of racing it; ``placed`` (when
    given) gets that mapping's place (``overrides``, ``arms.ARM``) -> the keys set in it."""
    out = deep_update(data, {})
    for key, value in overrides.items():
        parts = str(key).split(".")
        n = next((len(h) for h in (["overrides"], ["branch_from", "overrides"], ["arms", None])
                  if len(parts) > len(h) and all(x is None or x == p for x, p in zip(h, parts))), 0)
        node = out
        for p in parts[:n]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):      # a malformed spec: validation names it
                n = 0
                break
        if n == 0:
            out = deep_update(out, {key: value})
            continue
        rest = ".".join(parts[n:])
        for k in [k for k in node if k == rest or k.startswith(rest + ".") or rest.startswith(k + ".")]:
            del node[k]           # the file's own spelling of the same run-config key
        node[rest] = value
        if placed is not None:
            placed.setdefault(".".join(parts[:n]), []).append(rest)
    return out


def is_run_config(data: dict) -> bool:
    """Whether a YAML mapping that is no valid sweep spec is a run config instead: it has keys
    only a run config has (``game``, ``model``, ``train``, ``runtime`` …) and none only a sweep
    spec has."""
    ours, theirs = set(SweepConfig.model_fields), set(RunConfig.model_fields)
    return bool(data.keys() & (theirs - ours)) and not data.keys() & (ours - theirs)


def is_sweep_spec(data: dict) -> bool:
    """Whether a YAML mapping that is no valid run config is a sweep spec instead: it has keys
    only a sweep spec has (``base``, ``arms``, ``kind`` …) and none only a run config has."""
    ours, theirs = set(RunConfig.model_fields), set(SweepConfig.model_fields)
    return bool(data.keys() & (theirs - ours)) and not data.keys() & (ours - theirs)


def load_run_config_file(path: str | Path, overrides: dict | None = None) -> RunConfig:
    """:func:`~yamblab.training.config.load_run_config`, telling a sweep spec given in its place
    apart by what it is (``yamblab train -c experiments/…``).

    Raises:
        ConfigError: the file's problems, or that it is a sweep spec and how to run it.
    """
    import shlex

    from yamblab.training.config import load_run_config

    try:
        return load_run_config(path, overrides)
    except ConfigError:
        try:
            spec = is_sweep_spec(read_yaml(path))
        except ConfigError:
            spec = False
        if spec:
            raise ConfigError(f"{path} is a sweep spec; yamblab train takes a run config (configs/...), or run "
                              f"it with yamblab sweep {shlex.quote(str(path))}") from None
        raise


def load_sweep(path: str | Path, storage: str | None = None,
               overrides: dict | None = None) -> tuple[SweepConfig, RunConfig]:
    """Read a sweep spec and its base run config, and check every trial's config up front.

    Args:
        path: the spec (YAML).
        storage: the Optuna storage, instead of the spec's.
        overrides: dotted-key overrides of the spec itself (``{"seeds": [4, 5, 6, 7],
            "branch_from.seed": 1, "name": "ablation-small-b"}``: the command line's ``--set``).

    Raises:
        ConfigError: a bad key anywhere, naming the file (and the arm) where it is.
    """
    import shlex

    path = Path(path)
    data = read_yaml(path)
    # where the command line's --set options went: the spec's own keys, and the run settings of
    # its `overrides`, arms and branch_from.overrides (named as typed when they are wrong)
    placed: dict[str, list[str]] = {}
    typed = isinstance(overrides, SetOptions)
    spec_data = _override_spec(data, overrides, placed) if overrides else data
    origin = overrides.origin if typed else None

    def typed_in(place: str) -> dict[str, tuple[str, str]] | None:
        return {k: (origin, place + ".") for k in placed.get(place, ())} if typed else None

    try:
        spec = validate(SweepConfig, spec_data, f"{path} (with --set)" if overrides else str(path),
                        {str(k): (origin, "") for k in overrides} if typed else None)
    except ConfigError:
        if is_run_config(data):
            raise ConfigError(f"{path} is a run config; yamblab sweep takes a sweep spec (experiments/...), or run "
                              f"it with yamblab train -c {shlex.quote(str(path))}") from None
        raise
    if storage:
        spec = spec.model_copy(update={"storage": storage})
    if spec.branch_from is not None and spec.branch_from.checkpoint is not None:
        ck = Path(spec.branch_from.checkpoint).expanduser()
        if not ck.is_absolute() and (path.parent / ck).exists():     # like `base`: beside the spec first
            spec = spec.model_copy(update={"branch_from": spec.branch_from.model_copy(
                update={"checkpoint": str(path.parent / ck)})})
    base_path = Path(spec.base)
    if not base_path.is_absolute():
        cand = path.parent / base_path
        base_path = cand if cand.exists() else base_path
    try:
        base = load_run_config(base_path)
    except ConfigError:
        if base_path.is_file() and is_sweep_spec(read_yaml(base_path)):
            raise ConfigError(f"{path}: base: {base_path} is a sweep spec; `base` names the run config every "
                              "trial starts from (configs/...)") from None
        raise

    def fits(cfg: RunConfig, where: str) -> None:
        try:
            resolve_resources(cfg.runtime, spec.trial_cpus, gpu=False, trial=True)
        except ConfigError as exc:
            raise ConfigError(f"{where}: a trial's actors do not fit its trial_cpus ({spec.trial_cpus:g}): {exc}; "
                              "lower runtime.*_cpus in `overrides` or raise trial_cpus") from None

    # every run setting first, each named where it is written (`overrides`, an arm, a --set
    # option), with the nearest valid key for an unknown one
    plain = apply_overrides(base, spec.overrides, source=f"{path}: overrides", typed=typed_in("overrides"))
    trials = [(plain, f"{path}: overrides")]
    if spec.kind == "grid":
        for arm, ov in spec.arm_overrides().items():
            for seed in spec.seeds:
                trials.append((apply_overrides(plain, {**ov, "train.seed": seed}, source=f"{path}: arms.{arm}",
                                               typed=typed_in(f"arms.{arm}")), f"{path}: arms.{arm}"))
    else:
        for key, rng in spec.params.items():
            for place, probe in rng.probes():
                where = f"{path}: params.{key} ({place} = {probe!r})"
                trials.append((apply_overrides(plain, {key: probe}, source=where), where))
    spec.judge_modes(base)          # each arm's judged mode is graded by its trials and the baseline's
    for cfg, where in trials:
        fits(cfg, where)
    return spec, plain
