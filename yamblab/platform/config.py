"""The validated schema of training runs and sweeps (pydantic), read from YAML.

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

A sweep spec (``experiments/*.yaml``) names its base run config and either arms / factors
(an ablation grid) or parameter ranges (a TPE tuning study); see :class:`SweepConfig`.
Unknown keys, wrong types and out-of-range values are refused before any work starts, with
the file and the key named.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yamblab.errors import ConfigError, YamblabError
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.model.config import PRESETS, ModelConfig
from yamblab.platform.configio import deep_update, read_yaml, validate

#: The fixed evaluation dice: every run and every arm is evaluated on these games.
EVAL_SEED = 20_261_130

_Cpus = Annotated[float, Field(gt=0.0, le=256)]

#: The per-game losses of the solver-graded decision set (``runtime.solver_eval``) that a sweep
#: can judge an arm on, each summed over a game's positions of the set (lower is better):
#: the policy head's exact expected regret (points), its argmax's regret (points), the decisions
#: where its argmax is not an optimal action, its cross-entropy against the optimal actions
#: (nats), and the value head's mean squared error (points²) against the oracle's values.
SOLVER_MODES = ("policy_regret", "argmax_regret", "disagreements", "cross_entropy", "value_sq_error")
#: The exact regret of full-turn search on the boundary head (Yahtzee): the backward pass with
#: the network's choices, one number per network with no dice noise at all.
EXACT_MODE = "full_turn_exact"
#: What an arm can be judged on: a decision mode's played games, a solver-graded loss, or the
#: exact full-turn regret.
JudgeMode = Literal["none", "one_step", "full_turn", "policy_regret", "argmax_regret", "disagreements",
                    "cross_entropy", "value_sq_error", "full_turn_exact"]


class RuntimeConfig(BaseModel):
    """How a run is executed on the Ray cluster.

    Attributes:
        iterations: training iterations (collect a batch of self-play games, train on it).
        workers: self-play worker actors, or ``"auto"``.
        worker_cpus, learner_cpus, eval_cpus: CPUs each actor declares (torch threads are set
            to match: the rounded CPUs, at least one), or ``"auto"``: chosen from the CPUs the
            run may use and whether the cluster has a GPU (see :func:`resolve_resources`; the
            choice is printed when a run starts and logged with it).
        learner_gpus: GPUs the learner asks for: ``"auto"`` takes one when the cluster has one.
        learner_threads: the learner's torch threads; ``"auto"``: its rounded CPUs (at least
            one). More threads than CPUs lets a CPU learner use the cores that self-play leaves
            idle while it waits for weights (Ray does not pin actors to cores).
        replay_positions: size budget of the replay buffer, in positions.
        max_in_flight: self-play tasks each worker gets per iteration's batch of games.
        max_policy_lag: how many iterations' batches of games play ahead of the learner, so
            that self-play and learning overlap. 0: serial (play with the newest weights, then
            train). 1 (default): the next batch plays, with the weights published before this
            iteration's training, while the learner trains; its games are then at most one
            weight version behind the learner when they are trained on. In-flight games are
            bounded by ``max_policy_lag × games_per_iteration``.
        checkpoint_minutes: write the run's checkpoint at the end of the first iteration after
            this many minutes since the last one (and after the last iteration); 0 writes one
            after every iteration. A killed run resumes from the last checkpoint.
        eval_every: evaluate every N iterations (and after the last). With a policy lag above
            0, evaluations run on the evaluator actor while training goes on (the serial loop
            waits for them), one at a time: one that falls due while the evaluator is still
            busy starts at the first iteration after it is free; each is logged at the iteration whose weights it graded, with the
            self-play positions, optimiser steps and minutes behind them.
        eval_games: noise-free evaluation games per evaluation, on dice seed ``eval_seed``.
        eval_seed: dice seed of the evaluation games (the same for every run and arm).
        eval_depth: how the evaluated agent plays: ``"search"`` (the run's search depth), or
            ``"none"`` (the policy head alone: what the policy-side ablations change),
            ``"one_step"``, ``"full_turn"``.
        eval_modes: further decision modes graded at every evaluation, each on its own number
            of games (the first games of the same fixed dice): ``{none: 500, one_step: 200}``
            grades the policy head alone on 500 games and one-step search on 200 beside the
            main mode (``eval_depth``), so the policy-side training ideas are judged where they
            act. Logged as ``eval.<mode>.regret_mean`` (or ``eval.<mode>.vs_baseline_mean``).
        snapshots: also keep the network of every evaluation, as
            ``RUN/snapshots/iteration-NNNNNN.pt`` (the evaluated weights, loadable by
            ``yamblab grade --checkpoint``), so that a mode too costly to grade during the run
            (one-step search on a CPU) can be graded afterwards at the same iterations
            (``benchmarks/mode_curve.py``). Off by default (a few MB each).
        solver_eval: also grade the policy and value heads at every evaluation on the fixed
            decision set of the game (:mod:`yamblab.search.decision_set`: the positions the
            oracle's own play visits on ``solver_games`` games, each with the oracle's exact value
            of every legal action): no games are played, so the figures carry no dice noise.
            Logged as ``eval.solver.KIND.*`` (first_keep, second_keep, box, all: expected and
            argmax regret, agreement with the oracle's best action, cross-entropy against it,
            the value head's RMSE and bias) and, per game of the set, as the modes
            :data:`SOLVER_MODES` a sweep can judge an arm on. Yahtzee and single Yamb columns
            only (a full Yamb card has no oracle).
        solver_games: games of oracle play the decision set is drawn from (600 give about
            22,000 Yahtzee positions).
        time_budget_minutes: stop after the iteration that crosses this wall time.
        run_dir: folder for checkpoints and run state.
        actors: where the run's roles (self-play worker, replay buffer, learner, evaluator,
            oracle service) live: ``"ray"`` (default), each a Ray actor of its own, so that
            self-play, learning and evaluation overlap on several CPUs; ``"in_process"``, plain
            objects in the driver's process, one after another (the serial loop only:
            ``max_policy_lag: 0``, one worker). A one-CPU sweep trial gains nothing from
            actors, and in process it saves starting five Python processes (about 8 s on a
            2-core machine: ``benchmarks/trial_backend.py``). Both give the same numbers.
        exact_eval: grade the exact full-turn regret at every evaluation where it applies
            (:attr:`RunConfig.exact_evaluated`: about 3 s with the tiny network); false leaves
            it out (a sweep's arms that are not judged on it).
    """

    model_config = ConfigDict(extra="forbid")

    iterations: int = Field(10, ge=1, le=1_000_000)
    workers: Annotated[int, Field(ge=1, le=4096)] | Literal["auto"] = "auto"
    worker_cpus: _Cpus | Literal["auto"] = "auto"
    learner_cpus: _Cpus | Literal["auto"] = "auto"
    eval_cpus: _Cpus | Literal["auto"] = "auto"
    learner_gpus: Literal["auto"] | float = "auto"
    learner_threads: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = "auto"
    replay_positions: int = Field(200_000, ge=1, le=1_000_000_000)
    max_in_flight: int = Field(2, ge=1, le=64)
    max_policy_lag: int = Field(1, ge=0, le=16)
    checkpoint_minutes: float = Field(0.0, ge=0.0, le=10_000.0)
    eval_every: int = Field(1, ge=1, le=1_000_000)
    eval_games: int = Field(200, ge=1, le=10_000_000)
    eval_seed: int = Field(EVAL_SEED, ge=0, lt=2**63)
    eval_depth: Literal["search", "none", "one_step", "full_turn"] = "search"
    eval_modes: dict[Literal["none", "one_step", "full_turn"], Annotated[int, Field(ge=1, le=10_000_000)]] = {}
    snapshots: bool = False
    solver_eval: bool = False
    solver_games: int = Field(600, ge=1, le=1_000_000)
    time_budget_minutes: float | None = Field(None, gt=0.0)
    run_dir: str = "runs"
    actors: Literal["ray", "in_process"] = "ray"
    exact_eval: bool = True

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


class Resources(BaseModel):
    """The actors' resources of a run, resolved from :class:`RuntimeConfig` (no ``"auto"`` left).

    Attributes:
        workers, worker_cpus, learner_cpus, eval_cpus: as in :class:`RuntimeConfig`.
        learner_gpu: whether the learner takes a GPU.
        learner_threads: the learner's torch threads.
        cpus: the CPUs the run may use (the cluster's, or a sweep trial's).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int
    worker_cpus: float
    learner_cpus: float
    eval_cpus: float
    learner_gpu: bool
    learner_threads: int = 1
    cpus: float

    @property
    def total(self) -> float:
        """CPUs the actors declare in all."""
        return self.workers * self.worker_cpus + self.learner_cpus + self.eval_cpus

    @staticmethod
    def threads(cpus: float) -> int:
        """Torch threads of an actor that declares ``cpus``: rounded, at least one."""
        return max(1, int(round(cpus)))

    def describe(self) -> str:
        """One line for the start of a run."""
        return (f"{self.workers} self-play worker{'s' if self.workers != 1 else ''} x {self.worker_cpus:g} CPU "
                f"({self.threads(self.worker_cpus)} torch thread{'s' if self.threads(self.worker_cpus) != 1 else ''} each), "
                f"learner {self.learner_cpus:g} CPU ({self.learner_threads} thread"
                f"{'s' if self.learner_threads != 1 else ''}{', GPU' if self.learner_gpu else ''}), "
                f"evaluator {self.eval_cpus:g} CPU; {self.total:g} of {self.cpus:g} CPUs declared")


def learner_gpus(rt: RuntimeConfig, gpu: bool) -> float:
    """The GPUs the learner actor asks Ray for: ``runtime.learner_gpus``, ``"auto"`` being one
    when the cluster has a GPU (``gpu``)."""
    if rt.learner_gpus == "auto":
        return 1.0 if gpu else 0.0
    return float(rt.learner_gpus)


def resolve_resources(rt: RuntimeConfig, cpus: float, gpu: bool) -> Resources:
    """Fill in the ``"auto"`` resources of ``rt`` for a run that may use ``cpus`` CPUs.

    The rule (explicit values are kept; ``"auto"`` ones share what is left):

    * evaluator: a quarter CPU on up to 4 CPUs (it runs now and then), else 1;
    * learner: with a GPU, 1 CPU to feed it; without, half the CPUs up to 4, less the
      evaluator's share (2 CPUs: 0.75, one torch thread; 8 CPUs: 3);
    * self-play workers: the rest, one worker per whole CPU (a single worker when less than
      two are left: 2 CPUs give one worker of 1 CPU).

    Raises:
        ConfigError: the explicit values leave no CPU for the workers, or declare more than
            ``cpus``.
    """
    cpus = float(cpus)
    small = cpus <= 4
    ev = float(rt.eval_cpus) if rt.eval_cpus != "auto" else (0.25 if small else 1.0)
    if rt.learner_cpus != "auto":
        lr = float(rt.learner_cpus)
    elif gpu:
        lr = 1.0 if cpus >= 3 else max(0.25, (cpus - ev) / 2)
    else:
        lr = max(0.25, min(4.0, cpus / 2) - ev)
    rest = cpus - ev - lr
    if rt.workers != "auto" and rt.worker_cpus != "auto":
        workers, wc = int(rt.workers), float(rt.worker_cpus)
    elif rest <= 1e-9:
        raise ConfigError(
            f"runtime: the learner ({lr:g} CPU) and evaluator ({ev:g} CPU) leave no CPU for self-play "
            f"workers out of {cpus:g}; set runtime.workers and runtime.worker_cpus, or lower learner_cpus / eval_cpus")
    elif rt.workers != "auto":
        workers = int(rt.workers)
        wc = rest / workers
    elif rt.worker_cpus != "auto":
        wc = float(rt.worker_cpus)
        workers = max(1, int((rest + 1e-9) // wc))
    else:
        workers = max(1, int((rest + 1e-9) // 1)) if rest >= 2 else 1
        wc = rest / workers
    threads = Resources.threads(lr) if rt.learner_threads == "auto" else int(rt.learner_threads)
    res = Resources(workers=workers, worker_cpus=round(wc, 4), learner_cpus=lr, eval_cpus=ev, learner_threads=threads,
                    learner_gpu=gpu if rt.learner_gpus == "auto" else float(rt.learner_gpus) > 0, cpus=cpus)
    if res.total > cpus + 1e-6:
        raise ConfigError(
            f"runtime declares {res.total:g} CPUs ({res.workers} workers x {res.worker_cpus:g} + learner "
            f"{res.learner_cpus:g} + evaluator {res.eval_cpus:g}) but the run may use {cpus:g}")
    return res


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
    game: Literal["yahtzee", "yamb"] = "yahtzee"
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

    @model_validator(mode="after")
    def _check_game(self) -> "RunConfig":
        from yamblab.games.protocol import make_game

        if self.game == "yahtzee":
            if self.preset is not None or self.columns is not None:
                raise ValueError("`preset` and `columns` are Yamb options (game: yamb); Yahtzee takes `rules`")
            if self.model.boundary_head and self.model.boundary_features == "card_middle":
                raise ValueError("model.boundary_features: 'card_middle' reads Yamb's middle term; "
                                 "use 'yahtzee' or 'card' for Yahtzee")
        else:
            if self.rules is not None:
                raise ValueError("`rules` is a Yahtzee option; Yamb takes `preset` (and `columns`)")
            if self.train.distill_oracle:
                raise ValueError("train.distill_oracle needs Yahtzee's oracle table; Yamb has none")
            if self.model.boundary_head and self.model.boundary_features == "yahtzee":
                raise ValueError("model.boundary_features: 'yahtzee' reads a Yahtzee card; "
                                 "use 'card' or 'card_middle' for Yamb")
        try:
            game = make_game(self.game, None if self.game == "yamb" else self.rules, self.preset, self.columns)
        except YamblabError as exc:
            raise ValueError(str(exc)) from None
        if self.runtime.solver_eval and self.game == "yamb" and game.oracle_column is None:
            raise ValueError("runtime.solver_eval: a full Yamb card has no exact oracle, so its evaluation stays "
                             "the paired comparison with the heuristic bot on the same dice; the decision set "
                             "needs Yahtzee or a single down, up or free column (columns: [free])")
        if self.game == "yamb" and self.train.successor_samples and game.rules.announce_column >= 0:
            raise ValueError("train.successor_samples values a Yamb card without the option to announce: "
                             "use it on cards with no announce column (e.g. columns: [free]), or set it to 0")
        if self.game == "yahtzee" and self.rules != game.rules.name:
            self.rules = game.rules.name      # the canonical name ("forced" when none was given)
        if self.train.bot_share > 0:
            from yamblab.agents.base import agent_names

            no_oracle = self.train.bot == "oracle" and game.name == "yamb" and not game.oracle_column
            if self.train.bot not in agent_names(game) or self.train.bot == "search" or no_oracle:
                raise ValueError(f"train.bot {self.train.bot!r} is not a {self.game} bot; choose one of "
                                 f"{', '.join(n for n in agent_names(game) if n != 'search')}")
        return self

    @property
    def game_obj(self):
        """The :class:`~yamblab.games.protocol.Game` of this run."""
        from yamblab.games.protocol import make_game

        if self.game == "yamb":
            return make_game("yamb", None, self.preset, self.columns)
        return make_game("yahtzee", self.rules)

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
        """Whether evaluations give the exact full-turn regret (:data:`EXACT_MODE`): the
        evaluated agent is full-turn search on Yahtzee's boundary head, a valuation of boundary
        states whose exact score the backward pass gives (no sampling), and
        ``runtime.exact_eval`` is on."""
        return (self.runtime.exact_eval and self.game == "yahtzee" and self.eval_depth == "full_turn"
                and self.model.boundary_head)

    def to_yaml(self) -> str:
        """The whole config as YAML (what is logged with the run)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def load_run_config(path: str | Path, overrides: dict | None = None) -> RunConfig:
    """Read and validate a run config file, with optional dotted-key overrides.

    Raises:
        ConfigError: naming the file and each bad key.
    """
    data = read_yaml(path)
    if overrides:
        data = deep_update(data, overrides)
    return validate(RunConfig, data, str(path))


def apply_overrides(base: RunConfig, overrides: dict, source: str = "overrides") -> RunConfig:
    """A copy of ``base`` with dotted-key ``overrides`` (``{"train.lr": 3e-4}``), validated.

    Raises:
        ConfigError: an unknown key or a bad value, naming ``source``.
    """
    return validate(RunConfig, deep_update(base.model_dump(mode="json"), overrides), source)


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
        from yamblab.platform.configio import flatten

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
            ``runtime.solver_eval``), or :data:`EXACT_MODE` (Yahtzee's exact full-turn regret).
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
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    params: dict[str, ParamRange] = Field(default_factory=dict)
    n_trials: int = Field(8, ge=1, le=100_000)
    pruning: bool = True
    sampler_seed: int = 0
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
            from yamblab.platform.configio import flatten

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


def solver_graded(cfg: RunConfig) -> list[str]:
    """The solver-graded losses and exact figures a run's evaluations give beside its played
    modes: :data:`SOLVER_MODES` with ``runtime.solver_eval`` (which validation allows only on a
    game with an exact oracle: Yahtzee, a single Yamb column), and :data:`EXACT_MODE` where
    :attr:`RunConfig.exact_evaluated`."""
    return [*(SOLVER_MODES if cfg.runtime.solver_eval else ()), *((EXACT_MODE,) if cfg.exact_evaluated else ())]


def _how_to_grade(mode: str) -> str:
    if mode in SOLVER_MODES:
        return ("set runtime.solver_eval: true in `overrides` (Yahtzee or a single Yamb column: a full "
                "Yamb card has no exact oracle)")
    if mode == EXACT_MODE:
        return ("the exact full-turn regret needs Yahtzee, runtime.eval_depth full_turn (or search.depth "
                "full_turn), model.boundary_head: true and runtime.exact_eval: true")
    return f"add runtime.eval_modes.{mode}: GAMES to `overrides`"


def _override_spec(data: dict, overrides: dict) -> dict:
    """A spec with dotted-key overrides of its own keys. A key into one of the spec's mappings of
    run-config keys (``overrides.runtime.iterations``, ``arms.ARM.train.lr``,
    ``branch_from.overrides.runtime.eval_every``) sets that mapping's dotted key, as the file
    writes it, so that it replaces the file's value instead of racing it."""
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
    return out


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
    path = Path(path)
    data = read_yaml(path)
    if overrides:
        data = _override_spec(data, overrides)
    spec = validate(SweepConfig, data, f"{path} (with --set)" if overrides else str(path))
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
    base = load_run_config(base_path)

    def fits(cfg: RunConfig, where: str) -> None:
        try:
            resolve_resources(cfg.runtime, spec.trial_cpus, gpu=False)
        except ConfigError as exc:
            raise ConfigError(f"{where}: a trial's actors do not fit its trial_cpus ({spec.trial_cpus:g}): {exc}; "
                              "lower runtime.*_cpus in `overrides` or raise trial_cpus") from None

    spec.judge_modes(base)          # each arm's judged mode is graded by its trials and the baseline's
    base = apply_overrides(base, spec.overrides, source=f"{path}: overrides")
    trials = [(base, f"{path}: overrides")]
    if spec.kind == "grid":
        for arm, ov in spec.arm_overrides().items():
            for seed in spec.seeds:
                trials.append((apply_overrides(base, {**ov, "train.seed": seed}, source=f"{path}: arms.{arm}"),
                               f"{path}: arms.{arm}"))
    else:
        for key, rng in spec.params.items():
            for place, probe in rng.probes():
                where = f"{path}: params.{key} ({place} = {probe!r})"
                trials.append((apply_overrides(base, {key: probe}, source=where), where))
    for cfg, where in trials:
        fits(cfg, where)
    return spec, base
