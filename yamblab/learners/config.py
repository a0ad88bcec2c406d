"""Search and training configuration (pydantic v2, unknown fields refused, ranges checked).

Every training trick of the YoloYamb post is a field here, so a sweep can switch it off: KL-regularised
policy targets, the EMA player (updated after every optimiser step), Dirichlet exploration
noise, the entropy bonus, auxiliary losses, bot games tapering to zero, and (off by default,
never on silently) distillation of oracle values.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yamblab.search.registry import Depth


def half_cosine(progress: float) -> float:
    """The weight ``(1 + cos πp) / 2`` of a half-cosine schedule (Loshchilov & Hutter 2017, SGDR,
    without restarts): 1 at progress ``p = 0``, falling to 0 at ``p = 1``; ``progress`` outside
    [0, 1] is clipped. A schedule from ``start`` to ``end`` is ``end + (start − end) × weight``
    (:meth:`TrainConfig.lr_at`, :meth:`TrainConfig.value_target_mix_at`,
    :meth:`TrainConfig.policy_share_at`)."""
    p = min(1.0, max(0.0, float(progress)))
    return 0.5 * (1.0 + math.cos(math.pi * p))


def _annealed(start, final, progress: float):
    """A setting with an optional end value: ``start`` all run when ``final`` is None, else
    ``final + (start − final) × half_cosine(progress)``."""
    if final is None:
        return start
    return final + (start - final) * half_cosine(progress)


class SearchConfig(BaseModel):
    """How moves are valued during self-play and evaluation.

    Attributes:
        depth: ``"none"`` (policy alone), ``"one_step"`` (YoloYamb's) or ``"full_turn"``.
        leaf_chunk: positions per forward pass when valuing leaves.
    """

    model_config = ConfigDict(extra="forbid")

    depth: Depth = "full_turn"
    leaf_chunk: int = Field(16384, ge=1, le=1 << 22)


def setting(block: str, default, help: str, **bounds):
    """A config setting: its default, its one line of help and the block it belongs to
    (``yamblab train --help-config`` prints them by block), with pydantic's bounds."""
    return Field(default, description=help, json_schema_extra={"block": block}, **bounds)



#: the blocks of :class:`TrainConfig`, in the order ``--help-config`` prints them
BLOCKS = {
    "optimiser": "AdamW, its schedule, the batch and the EMA player",
    "targets": "what the heads learn: policy and value targets, loss weights",
    "exploration": "how self-play departs from the search's best move",
    "value samples": "positions trained on beside the games' own",
    "replay": "how much is played and drawn from the replay buffer",
    "bots": "baseline-bot games mixed into self-play",
    "start": "the seed and the network a run starts from",
}

#: settings that were removed, with the value every config recorded before held (their old
#: default): a recorded config, checkpoint or study that holds it still loads (the key is
#: dropped); any other value is refused with the reason (None: refused whatever it holds)
RETIRED = {
    "phasic": (False, "phasic policy gradient was removed: no config or study turned it on"),
    "phasic_every": (4, "phasic policy gradient was removed"),
    "phasic_aux_epochs": (2, "phasic policy gradient was removed"),
    "phasic_clone_coef": (1.0, "phasic policy gradient was removed"),
    "epochs": (None, "train.epochs (passes over the whole replay buffer) was replaced by train.replay_ratio: "
                     "optimiser samples per new self-play position (epochs × buffer positions / new positions "
                     "per iteration gives the same load)"),
}


def settings_by_block(model=None, blocks: dict | None = None) -> dict[str, list[tuple[str, object, str]]]:
    """A config model's settings (default :class:`TrainConfig`'s) as ``{block: [(name, default,
    help), ...]}``, in the order of ``blocks`` (default :data:`BLOCKS`)."""
    model, blocks = model or TrainConfig, blocks or BLOCKS
    out: dict[str, list] = {b: [] for b in blocks}
    for name, f in model.model_fields.items():
        out[f.json_schema_extra["block"]].append((name, f.default, f.description))
    return out


def drop_retired(data, retired: dict, prefix: str):
    """``data`` (a config section as read) without the retired keys that hold their old value.

    Raises:
        ValueError: a retired key set to anything else, with the reason.
    """
    if not isinstance(data, dict) or not retired.keys() & data.keys():
        return data
    out = dict(data)
    for key in retired.keys() & data.keys():
        old, why = retired[key]
        if old is None or out[key] != old:
            raise ValueError(why if old is None else f"{prefix}.{key}: {why} (only {old!r}, its old default, "
                                                     f"is still read; remove the key)")
        del out[key]
    return out


class TrainConfig(BaseModel):
    """The AlphaZero-style training step and its self-play: every training idea of the YoloYamb
    post a setting a sweep can switch off. Each setting carries one line of help
    (``yamblab train --help-config``); docs/training.md says why each idea and what it did."""

    model_config = ConfigDict(extra="forbid")

    # -- optimiser
    lr: float = setting("optimiser", 1e-3, "AdamW learning rate", gt=0.0, le=1.0)
    lr_schedule: Literal["constant", "cosine"] = setting(
        "optimiser", "constant", "constant, or cosine: half a cosine from lr to lr × lr_final over the run's clock")
    lr_final: float = setting("optimiser", 0.1, "the cosine schedule's last rate, a fraction of lr", ge=0.0, le=1.0)
    weight_decay: float = setting("optimiser", 0.01, "AdamW weight decay", ge=0.0, le=1.0)
    grad_clip: float = setting("optimiser", 1.0, "gradient-norm clipping", gt=0.0, le=1e6)
    batch_size: int = setting("optimiser", 256, "positions per optimiser step", ge=1, le=1 << 20)
    decision_batch_size: int | None = setting(
        "optimiser", None, "split steps by kind: boundary positions in batch_size steps of the boundary head alone, "
        "decisions in steps of this many (needs model.boundary_head)", ge=1, le=1 << 20)
    ema_decay: float = setting("optimiser", 0.99, "the playing network's EMA decay, after every optimiser step "
                           "(a slower average is a slower target network)", ge=0.0, lt=1.0)
    ema_warmup: bool = setting("optimiser", False, "EMA decay min(ema_decay, (1 + n) / (10 + n)) at its n-th update")
    # -- targets
    kl_targets: bool = setting("targets", True, "policy target softmax(log prior + Q/T) (Grill et al. 2020) "
                           "instead of softmax(Q/T)")
    temperature: float = setting("targets", 2.0, "T of the policy targets, points", gt=0.0, le=1000.0)
    entropy_coef: float = setting("targets", 0.003, "weight of the entropy bonus", ge=0.0, le=10.0)
    value_coef: float = setting("targets", 1.0, "weight of the value loss", ge=0.0, le=100.0)
    aux_coef: float = setting("targets", 0.1, "weight of the auxiliary losses", ge=0.0, le=100.0)
    value_target_mix: float = setting(
        "targets", 0.0, "λ of the value target (1 − λ) · outcome + λ · search value (bootstrapped)", ge=0.0, le=1.0)
    value_target_mix_final: float | None = setting(
        "targets", None, "λ at the run's end, reached along the learning rate's half cosine (None: λ stays)",
        ge=0.0, le=1.0)
    distill_oracle: bool = setting("targets", False, "value targets from the exact oracle (Yahtzee; the oracle "
                               "grades, it does not teach, unless this is on)")
    # -- exploration
    play_temperature: float = setting("exploration", 1.0, "self-play samples moves from the noisy target at "
                                  "this temperature; 0 plays its argmax", ge=0.0, le=100.0)
    dirichlet_fraction: float = setting("exploration", 0.15, "share of Dirichlet noise in the self-play prior "
                                    "(evaluation is noise-free)", ge=0.0, le=1.0)
    dirichlet_alpha: float = setting("exploration", 0.3, "the Dirichlet noise's alpha", gt=0.0, le=100.0)
    # -- value samples
    boundary_samples: bool = setting("value samples", True, "train the value head on each turn's start (no dice), "
                                 "which full-turn search asks")
    successor_samples: int = setting("value samples", 0, "per turn start, this many of the turn's other successor "
                                 "cards with bootstrapped targets (needs full-turn search)", ge=0, le=44)
    random_state_samples: int = setting("value samples", 0, "per turn start, this many random reachable cards one "
                                    "box on (Yahtzee; needs full-turn search and the boundary head)", ge=0, le=256)
    # -- replay
    games_per_iteration: int = setting("replay", 64, "self-play games per iteration", ge=1, le=1_000_000)
    replay_ratio: float = setting("replay", 4.0, "optimiser samples per new self-play position", gt=0.0, le=1000.0)
    policy_share: float | None = setting("replay", None, "share of each draw taken among positions with a decision "
                                     "(None: uniform draws)", gt=0.0, le=1.0)
    decisions_per_batch: int | None = setting("replay", None, "instead of policy_share: this many positions with a "
                                          "decision in every batch (the share follows batch_size)", ge=1, le=1 << 20)
    policy_share_final: float | None = setting("replay", None, "the share at the run's end, along the learning "
                                           "rate's half cosine (needs policy_share)", gt=0.0, le=1.0)
    # -- bots
    bot: str = setting("bots", "greedy", "the baseline bot (a registered agent) whose games are mixed in; its moves "
                   "are one-hot policy targets")
    bot_share: float = setting("bots", 0.0, "share of bot games at iteration 0", ge=0.0, le=1.0)
    bot_taper_iterations: int = setting("bots", 10, "iterations over which the bot share tapers linearly to 0",
                                    ge=1, le=1_000_000)
    # -- start
    seed: int = setting("start", 0, "random seed of the learner and self-play", ge=0, lt=2**63)
    init_from: str | None = setting("start", None, "a checkpoint of the same game whose playing network a new run "
                                "starts from (new optimiser, schedule and buffer)", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data):
        return drop_retired(data, RETIRED, "train")

    @model_validator(mode="after")
    def _check_split(self) -> "TrainConfig":
        if self.decisions_per_batch is not None:
            if self.policy_share is not None:
                raise ValueError("train.decisions_per_batch and train.policy_share both set the decisions in "
                                 "each draw; give one (set the other to null)")
            if self.decisions_per_batch > self.batch_size:
                raise ValueError(f"train.decisions_per_batch ({self.decisions_per_batch}) is more than "
                                 f"train.batch_size ({self.batch_size})")
        if self.policy_share_final is not None and self.start_share is None:
            raise ValueError("train.policy_share_final is the share of decisions at the run's end and needs "
                             "train.policy_share or train.decisions_per_batch, the share at its start (uniform "
                             "draws give a Yahtzee full-turn config about 0.07)")
        return self

    @property
    def start_share(self) -> float | None:
        """The share of decisions in each draw at the run's start: :attr:`policy_share`, or
        :attr:`decisions_per_batch` / :attr:`batch_size`; None: uniform draws."""
        if self.decisions_per_batch is not None:
            return self.decisions_per_batch / self.batch_size
        return self.policy_share

    def steps_for(self, new_positions: int) -> int:
        """Optimiser steps that ``new_positions`` new self-play positions pay for:
        ``ceil(replay_ratio × new_positions / batch_size)`` (at least 1 when there are any)."""
        if new_positions <= 0:
            return 0
        return max(1, math.ceil(self.replay_ratio * new_positions / self.batch_size))

    def samples_for(self, new_positions: int) -> int:
        """Positions the runtime draws from the replay buffer for one learner call after
        ``new_positions`` new self-play positions: :meth:`steps_for` × ``batch_size`` (0 when
        there are none)."""
        return self.steps_for(new_positions) * self.batch_size

    def lr_at(self, progress: float) -> float:
        """The learning rate at ``progress`` (0 at the start of the run, 1 at its end; values
        outside are clipped), per :attr:`lr_schedule`."""
        if self.lr_schedule == "constant":
            return self.lr
        return self.lr * (self.lr_final + (1.0 - self.lr_final) * half_cosine(progress))

    def value_target_mix_at(self, progress: float) -> float:
        """λ of the value targets at ``progress`` (0 at the start of the run, 1 at its end; values
        outside are clipped): :attr:`value_target_mix` throughout without
        :attr:`value_target_mix_final`, else ``λf + (λ0 − λf)(1 + cos πp) / 2``, the learning
        rate's half cosine (:meth:`lr_at`) from λ0 = ``value_target_mix`` to λf."""
        return _annealed(self.value_target_mix, self.value_target_mix_final, progress)

    def policy_share_at(self, progress: float) -> float | None:
        """The share of decisions in the learner's draw at ``progress`` (0 at the start of the
        run, 1 at its end; values outside are clipped): :attr:`policy_share` throughout (None:
        uniform draws) without :attr:`policy_share_final`, else ``sf + (s0 − sf)(1 + cos πp) / 2``,
        the learning rate's half cosine (:meth:`lr_at`) from s0 = :attr:`start_share` to sf."""
        return _annealed(self.start_share, self.policy_share_final, progress)

    def bot_share_at(self, iteration: int) -> float:
        """Share of bot games at ``iteration`` (0-based): linear taper to 0."""
        return max(0.0, self.bot_share * (1.0 - iteration / self.bot_taper_iterations))
