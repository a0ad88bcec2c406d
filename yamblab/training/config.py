"""The validated schema of training runs (pydantic), read from YAML.

A run config (``configs/*.yaml``)::

    name: yahtzee-tiny
    game: yahtzee                 # or yamb
    rules: forced                 # Yahtzee: joker rule [,no-upper-bonus][,no-yahtzee-bonus]
    # preset: croatian            # Yamb: the rule preset; columns: [free] plays only those columns
    size: tiny                    # network size preset; `model:` overrides single fields
    model: {hold_correction: true}
    search: {depth: full_turn}
    train: {kl_targets: true, entropy_coef: 0.003, lr: 0.001, games_per_iteration: 64}
    runtime: {iterations: 10, workers: 1, eval_every: 2, eval_games: 200}
    tracking: {experiment: yamblab}

Unknown keys, wrong types and out-of-range values are refused before any work starts, with
the file and the key named. (A sweep spec's schema is :mod:`yamblab.sweeps.spec`.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yamblab.errors import ConfigError, YamblabError
from yamblab.learners.config import SearchConfig, TrainConfig, drop_retired, setting
from yamblab.model.config import PRESETS, ModelConfig
from yamblab.search.decision_set import SOLVER_LOSSES
from yamblab.search.registry import DEPTHS, Depth
from yamblab.training.configio import deep_update, read_yaml, typed_keys, validate, with_new_sections

#: The fixed evaluation dice: every run and every arm is evaluated on these games.
EVAL_SEED = 20_261_130

_Cpus = Annotated[float, Field(gt=0.0, le=256)]
_Gpus = Annotated[float, Field(ge=0.0, le=64, allow_inf_nan=False)]
_GpuShare = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]

#: The per-game losses of the solver-graded decision set (``runtime.solver_eval``) that a sweep
#: can judge an arm on: the names of :data:`~yamblab.search.decision_set.SOLVER_LOSSES` (the
#: policy head's exact expected and argmax regret, its disagreements with the oracle, its
#: cross-entropy against the optimal actions, the value head's squared error).
SOLVER_MODES = tuple(SOLVER_LOSSES)
#: The exact regret of full-turn search: on Yahtzee's boundary head the backward pass with the
#: network's choices, one number per network with no dice noise at all; on a Yamb card its
#: regret over the endgames of the decision set's games, one number per game.
EXACT_MODE = "full_turn_exact"


class EarlyEvaluations(BaseModel):
    """Denser evaluations at the start of a run (``runtime.eval_early``), where the thresholds
    of :data:`yamblab.training.summary.THRESHOLDS` are crossed and ``eval_every``'s grid would
    place each first crossing up to a whole interval late.

    Attributes:
        every: evaluate every this many iterations (fewer than ``runtime.eval_every``) while
            the iteration is at most :attr:`until`. These extra evaluations grade the main mode
            (``eval_depth``) and, where it applies, the exact regret, but not ``eval_modes``
            nor the solver-graded decision set: they measure when the run gets somewhere, at a
            fraction of a full evaluation's cost (about 3 s of the evaluator's CPU for
            Yahtzee's tiny network, against 6 s with the policy head's 500 games).
            Evaluations on ``eval_every``'s grid stay whole.
        until: the last iteration (counted like ``eval_every``'s) with the denser grid.
    """

    model_config = ConfigDict(extra="forbid")

    every: int = Field(ge=1, le=1_000_000)
    until: int = Field(ge=1, le=1_000_000)


#: runtime settings that were removed (see :data:`yamblab.learners.config.RETIRED`)
RETIRED_RUNTIME = {"max_in_flight": (2, "self-play jobs per worker were made fixed (TASKS_PER_WORKER)")}


#: the blocks of :class:`RuntimeConfig`, in the order ``--help-config`` prints them
RUNTIME_BLOCKS = {
    "length": "how long a run goes, and where it keeps its state",
    "roles": "where the self-play workers, learner and evaluator run, on what CPUs and GPUs",
    "loop": "how self-play and learning overlap, the replay buffer, checkpoints",
    "evaluation": "what is graded, how often, on which dice",
}


class RuntimeConfig(BaseModel):
    """How a run is executed: its length, its roles' resources on the Ray cluster (or in this
    process), the loop's overlap and its evaluations. Each setting carries one line of help
    (``yamblab train --help-config``); docs/training.md says why the defaults."""

    model_config = ConfigDict(extra="forbid")

    # -- length
    iterations: int = setting("length", 10, "training iterations (a batch of self-play games, then "
                              "learning on it)", ge=1, le=1_000_000)
    time_budget_minutes: float | None = setting("length", None, "stop after the iteration that crosses "
                                                "this wall time", gt=0.0, le=100_000.0)
    run_dir: str = setting("length", "runs", "folder for the run folders (checkpoints, config, plots)")
    # -- roles
    actors: Literal["ray", "in_process"] = setting(
        "roles", "ray", "ray: each role a Ray actor, overlapping; in_process: plain objects in this process, "
        "one after another (serial loop, one worker)")
    workers: Annotated[int, Field(ge=1, le=4096)] | Literal["auto"] = setting(
        "roles", "auto", "self-play workers; auto: split from the CPUs the run may use")
    worker_cpus: _Cpus | Literal["auto"] = setting("roles", "auto", "CPUs each worker declares (its torch "
                                                   "threads follow); auto: chosen with the others")
    learner_cpus: _Cpus | Literal["auto"] = setting("roles", "auto", "CPUs the learner declares; auto: chosen "
                                                    "with the others")
    eval_cpus: _Cpus | Literal["auto"] = setting("roles", "auto", "CPUs the evaluator declares; auto: chosen "
                                                 "with the others")
    learner_threads: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = setting(
        "roles", "auto", "the learner's torch threads (more than its CPUs uses cores self-play leaves idle); "
        "auto: its rounded CPUs")
    learner_gpus: _Gpus | Literal["auto"] = setting(
        "roles", "auto", "GPUs the learner asks Ray for; auto: one when the cluster has one (a role uses a "
        "GPU only when Ray assigned it one)")
    worker_gpus: _GpuShare | Literal["auto"] = setting(
        "roles", 0.0, "each worker's share of a GPU for its leaf evaluations; auto: what the learner and "
        "evaluator leave of one GPU, split")
    eval_gpus: _GpuShare = setting("roles", 0.0, "the evaluator's share of a GPU")
    bf16: bool = setting("roles", True, "bf16 autocast on a CUDA device for learning and inference (value "
                         "heads in float32); no effect on a CPU")
    learner_compile: bool = setting("roles", False, "torch.compile the transformer's part of each learner "
                                    "step (needs a C++ compiler on a CPU; agrees with eager to float rounding)")
    # -- loop
    max_policy_lag: int = setting("loop", 1, "iterations' batches of games played ahead of the learner "
                                  "(0: the serial loop)", ge=0, le=16)
    replay_positions: int = setting("loop", 200_000, "the replay buffer's size, in positions",
                                    ge=1, le=1_000_000_000)
    checkpoint_minutes: float = setting("loop", 0.0, "write a checkpoint after the first iteration this "
                                        "many minutes after the last (0: every iteration)", ge=0.0, le=10_000.0)
    # -- evaluation
    eval_every: int = setting("evaluation", 1, "evaluate every N iterations and after the last (beside "
                              "the loop, one at a time)", ge=1, le=1_000_000)
    eval_early: EarlyEvaluations | None = setting(
        "evaluation", None, "{every, until}: also every `every` iterations up to `until`, the main mode and "
        "exact regret only")
    eval_games: int = setting("evaluation", 200, "noise-free evaluation games, on dice seed eval_seed",
                              ge=1, le=10_000_000)
    eval_seed: int = setting("evaluation", EVAL_SEED, "dice seed of the evaluation games (the same for every "
                             "run and arm)", ge=0, lt=2**63)
    eval_depth: Literal[("search", *DEPTHS)] = setting(
        "evaluation", "search", "how the evaluated agent plays: search (the run's depth), none (the policy "
        "head alone), one_step, full_turn")
    eval_modes: dict[Depth, Annotated[int, Field(ge=1, le=10_000_000)]] = setting(
        "evaluation", {}, "further modes graded at each evaluation, each on its own number of the same "
        "games ({none: 500})")
    exact_eval: bool = setting("evaluation", True, "grade full-turn search's exact regret at each evaluation "
                               "where it applies (Yahtzee's boundary head; a Yamb card's endgame, with "
                               "solver_eval)")
    solver_eval: bool = setting("evaluation", False, "also grade the heads on the solver-graded decision "
                                "set (no games played: no dice noise; Yahtzee, a single Yamb column, a Yamb "
                                "card's endgame)")
    solver_games: int = setting("evaluation", 600, "games the decision set is drawn from (oracle play; a "
                                "Yamb card's endgame: the heuristic bot's openings)",
                                ge=1, le=1_000_000)
    snapshots: bool = setting("evaluation", False, "keep each evaluated network as "
                              "RUN/snapshots/iteration-NNNNNN.pt, to grade other modes afterwards")

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data):
        return drop_retired(data, RETIRED_RUNTIME, "runtime")

    @model_validator(mode="after")
    def _check_eval_early(self) -> "RuntimeConfig":
        if self.eval_early is not None and self.eval_early.every >= self.eval_every:
            raise ValueError(f"runtime.eval_early.every ({self.eval_early.every}) must be fewer iterations than "
                             f"runtime.eval_every ({self.eval_every}): the early evaluations are the denser ones")
        return self

    @model_validator(mode="after")
    def _check_gpus(self) -> "RuntimeConfig":
        g = self.learner_gpus
        if g != "auto" and g > 1 and g != int(g):
            raise ValueError(f"runtime.learner_gpus: {g:g} GPUs; Ray shares one GPU (a fraction up to 1) or gives "
                             "whole ones: use a fraction below 1 or a whole number")
        return self

    @model_validator(mode="after")
    def _check_actors(self) -> "RuntimeConfig":
        if self.actors == "in_process":
            if self.max_policy_lag != 0:
                raise ValueError("runtime.actors: 'in_process' runs the serial loop only; set "
                                 "runtime.max_policy_lag: 0 (or use actors: ray)")
            if self.workers not in ("auto", 1):
                raise ValueError("runtime.actors: 'in_process' has one self-play worker; set "
                                 "runtime.workers: 1 (or use actors: ray)")
        return self

    def evaluation_due(self, iteration: int, since: int = 0) -> str | None:
        """Whether an evaluation falls due after ``iteration`` (of the run's ``iterations``):
        ``"full"`` on ``eval_every``'s grid and after the last iteration, ``"early"`` on
        :attr:`eval_early`'s denser grid (the main mode and the exact regret only), else None.
        The grids count from ``since`` (a branched run's branch point; 0 otherwise)."""
        k = iteration - since
        if k % self.eval_every == 0 or iteration >= self.iterations:
            return "full"
        early = self.eval_early
        if early is not None and k <= early.until and k % early.every == 0:
            return "early"
        return None


class TrackingConfig(BaseModel):
    """Where MLflow records go (the driver is the only writer)."""

    model_config = ConfigDict(extra="forbid")

    uri: str | None = None
    experiment: str = "yamblab"


class RunConfig(BaseModel):
    """One training run: game, rules, network, search, training and runtime.

    Attributes:
        game: ``"yahtzee"`` or ``"yamb"``.
        rules: Yahtzee's rule variant (a joker rule, optionally ``,no-upper-bonus`` and/or
            ``,no-yahtzee-bonus``; default ``forced``); refused for Yamb.
        preset: Yamb's rule preset (:data:`yamblab.games.yamb.rules.PRESETS`; default
            ``croatian``); refused for Yahtzee.
        columns: Yamb only: play only these columns of the preset (``[free]``, ``[down]``,
            ``[up]``: a single-column game with an exact oracle, graded decision by decision).
        size: the network's size preset (:data:`yamblab.model.config.PRESETS`); ``model``
            overrides single fields.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = "run"
    game: str = "yahtzee"
    rules: str | None = None
    preset: str | None = None
    columns: list[str] | None = None
    size: str = "tiny"
    model: ModelConfig = Field(default_factory=ModelConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if isinstance(data, dict):
            size = data.get("size", "tiny")
            if not isinstance(size, str) or size not in PRESETS:
                raise ValueError(f"size: unknown network size {size!r}; choose one of {', '.join(PRESETS)}")
            if isinstance(data.get("preset"), str) and data["preset"] in PRESETS:
                raise ValueError(f"preset: {data['preset']!r} is a network size: write `size: "
                                 f"{data['preset']}` (`preset` names a Yamb rule preset)")
            overrides = data.get("model") or {}
            if isinstance(overrides, dict):
                data = {**data, "model": {**PRESETS[size], **overrides}}
        return data

    @field_validator("game")
    @classmethod
    def _known_game(cls, v: str) -> str:
        from yamblab.games.protocol import game_entry

        game_entry(v)       # an unknown name refused, naming the games
        return v

    @model_validator(mode="after")
    def _check_game(self) -> "RunConfig":
        from yamblab.games.protocol import make_game

        try:
            game = make_game(self.game, self.rules, self.preset, self.columns)
        except YamblabError as exc:
            raise ValueError(str(exc)) from None
        if self.game == "yahtzee":
            if self.model.boundary_head and self.model.boundary_features == "card_middle":
                raise ValueError("model.boundary_features: 'card_middle' reads Yamb's middle term; "
                                 "use 'yahtzee' or 'card' for Yahtzee")
        else:
            if self.train.distill_oracle:
                raise ValueError("train.distill_oracle needs Yahtzee's oracle table; Yamb has none")
            if self.train.random_state_samples:
                raise ValueError("train.random_state_samples draws from every reachable Yahtzee card; "
                                 "a Yamb card has too many to list: set it to 0 (train.successor_samples "
                                 "samples a Yamb turn's own successors)")
            if self.model.boundary_head and self.model.boundary_features == "yahtzee":
                raise ValueError("model.boundary_features: 'yahtzee' reads a Yahtzee card; "
                                 "use 'card' or 'card_middle' for Yamb")
        if self.runtime.solver_eval and not game.solved:
            from yamblab.search.registry import has_endgame

            if not has_endgame(game):
                raise ValueError("runtime.solver_eval: this Yamb card has no exact oracle, so its evaluation stays "
                                 "the paired comparison with the heuristic bot on the same dice; the decision set "
                                 "needs Yahtzee, a single down, up or free column (columns: [free]) or a card "
                                 "graded on its endgame")
        if self.train.random_state_samples and (self.search.depth != "full_turn" or not self.model.boundary_head):
            raise ValueError("train.random_state_samples trains the boundary head on full-turn search values: "
                             "it needs search.depth full_turn and model.boundary_head true (or set it to 0)")
        if self.search.depth == "none" and (self.train.value_target_mix > 0 or self.train.value_target_mix_final):
            raise ValueError("train.value_target_mix mixes the network's own search values into the value targets: "
                             "search.depth none searches nothing, so the targets would stay the outcomes; use "
                             "search.depth one_step or full_turn, or set train.value_target_mix (and "
                             "train.value_target_mix_final) to 0")
        if self.train.decision_batch_size is not None and not self.model.boundary_head:
            raise ValueError("train.decision_batch_size splits the learner's steps into boundary-head steps and "
                             "transformer steps: it needs model.boundary_head true (or leave it unset)")
        if self.game == "yahtzee" and self.rules != game.rules.name:
            self.rules = game.rules.name      # the canonical name ("forced" when none was given)
        if self.train.bot_share > 0:
            from yamblab.agents.base import agent_names

            no_oracle = self.train.bot == "oracle" and not game.solved
            if self.train.bot not in agent_names(game) or self.train.bot == "search" or no_oracle:
                raise ValueError(f"train.bot {self.train.bot!r} is not a {self.game} bot; choose one of "
                                 f"{', '.join(n for n in agent_names(game) if n != 'search')}")
        return self

    @property
    def game_obj(self):
        """The :class:`~yamblab.games.protocol.Game` of this run."""
        from yamblab.games.protocol import make_game

        return make_game(self.game, self.rules, self.preset, self.columns)

    @property
    def rules_obj(self):
        """The rules object of this run's game."""
        return self.game_obj.rules

    @property
    def model_preset(self) -> str:
        return self.size

    @property
    def eval_depth(self) -> str:
        """The search depth the evaluator plays with."""
        d = self.runtime.eval_depth
        return self.search.depth if d == "search" else d

    @property
    def exact_evaluated(self) -> bool:
        """Whether evaluations give the exact full-turn regret (:data:`EXACT_MODE`), with
        ``runtime.exact_eval`` on and full-turn search the evaluated agent: on Yahtzee with the
        boundary head, a valuation of boundary states whose exact score the backward pass gives
        (no sampling); on a Yamb card with ``runtime.solver_eval``, the search's exact regret
        over the endgames of the decision set's games (their openings played by the heuristic
        bot)."""
        from yamblab.oracle.registry import has_table
        from yamblab.search.registry import has_endgame

        if not (self.runtime.exact_eval and self.eval_depth == "full_turn"):
            return False
        game = self.game_obj
        if has_table(game):
            return self.model.boundary_head
        return self.runtime.solver_eval and has_endgame(game)

    def to_yaml(self) -> str:
        """The whole config as YAML (what is logged with the run)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def load_run_config(path: str | Path, overrides: dict | None = None) -> RunConfig:
    """Read and validate a run config file, with optional dotted-key overrides.

    Args:
        overrides: ``{"train.lr": 3e-4}``; the command line's ``--set`` options
            (:class:`~yamblab.training.configio.SetOptions`) are named as typed when they are
            wrong (``--set train.lrr: unknown key (did you mean train.lr?)``).

    Raises:
        ConfigError: naming the file (or the ``--set`` option) and each bad key; or saying that
            the file is a sweep spec, in one line.
    """
    data = read_yaml(path)
    return validate(RunConfig, deep_update(data, overrides) if overrides else data, str(path),
                    with_new_sections(typed_keys(overrides), data))


def apply_overrides(base: RunConfig, overrides: dict, source: str = "overrides",
                    typed: dict[str, tuple[str, str]] | None = None) -> RunConfig:
    """A copy of ``base`` with dotted-key ``overrides`` (``{"train.lr": 3e-4}``), validated.

    A new ``size`` takes the new preset's network shape: the model fields that still hold the
    old preset's values give way to the new preset's (fields set otherwise, and ``model.*``
    keys among ``overrides``, are kept).

    Raises:
        ConfigError: an unknown key (with the nearest valid one) or a bad value, naming
            ``source``, or the key as typed for the command line's ``--set`` options
            (:class:`~yamblab.training.configio.SetOptions`) and the keys of ``typed``
            (:func:`~yamblab.training.configio.validate`: a sweep spec's settings from ``--set``).
    """
    data = base.model_dump(mode="json")
    size = overrides.get("size")
    if isinstance(size, str) and size != base.size:
        old = PRESETS.get(base.size, {})
        data["model"] = {k: v for k, v in data["model"].items() if not (k in old and v == old[k])}
    return validate(RunConfig, deep_update(data, overrides), source,
                    with_new_sections(typed if typed is not None else typed_keys(overrides), data))


def solver_graded(cfg: RunConfig) -> list[str]:
    """The solver-graded losses and exact figures a run's evaluations give beside its played
    modes: :data:`SOLVER_MODES` with ``runtime.solver_eval`` (which validation allows only on a
    game with an exact oracle: Yahtzee, a single Yamb column, a Yamb card's endgame), and :data:`EXACT_MODE` where
    :attr:`RunConfig.exact_evaluated`."""
    return [*(SOLVER_MODES if cfg.runtime.solver_eval else ()), *((EXACT_MODE,) if cfg.exact_evaluated else ())]


#: what a resumed run may change (``yamblab train --resume``): how long it runs, how often it is
#: graded and checkpointed, and the machine it runs on. Anything else (the game, the network,
#: training, search, what an evaluation grades) would make one run of two; ``runtime.eval_early``
#: counts with its fields.
RESUME_MAY_CHANGE = (
    "runtime.iterations", "runtime.time_budget_minutes", "runtime.eval_every", "runtime.eval_early",
    "runtime.checkpoint_minutes", "runtime.snapshots",
    "runtime.workers", "runtime.worker_cpus", "runtime.learner_cpus", "runtime.eval_cpus",
    "runtime.learner_gpus", "runtime.worker_gpus", "runtime.eval_gpus", "runtime.learner_threads",
    "runtime.learner_compile", "runtime.bf16", "runtime.actors", "runtime.run_dir", "tracking.uri",
)


def resume_changes(recorded: RunConfig, asked: RunConfig, source: str) -> list[str]:
    """What ``asked`` changes of a run recorded as ``recorded``, as lines ``KEY: OLD -> NEW``,
    when every change is one :data:`RESUME_MAY_CHANGE` allows.

    Raises:
        ConfigError: naming ``source`` (the run's checkpoint) and every other setting changed,
            with both values.
    """
    from yamblab.training.configio import flatten

    old, new = flatten(recorded.model_dump(mode="json")), flatten(asked.model_dump(mode="json"))
    changed = [k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]

    def allowed(key: str) -> bool:
        return any(key == a or key.startswith(a + ".") for a in RESUME_MAY_CHANGE)

    refused = [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in changed if not allowed(k)]
    if refused:
        raise ConfigError(f"{source}: a resumed run keeps its settings; asked to change {'; '.join(refused)}. A resume "
                          "may change only how long the run goes, its evaluation and checkpoint cadence and the "
                          "machine's resources (docs/training.md); start a new run for the rest (train.init_from "
                          "starts one from this network)")
    return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed]
