"""Search and training configuration (pydantic v2, unknown fields refused, ranges checked).

Every training trick of the YoloYamb post is a field here, so a sweep can switch it off: KL-regularised
policy targets, the EMA player (updated after every optimiser step), Dirichlet exploration
noise, the entropy bonus, auxiliary losses, phasic policy gradient, bot games tapering to
zero, and (off by default, never on silently) distillation of oracle values.
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


class TrainConfig(BaseModel):
    """The AlphaZero-style training step and its self-play.

    Attributes:
        kl_targets: policy target ``softmax(log prior + Q/T)`` (Grill et al. 2020; the YoloYamb
            post's fix) instead of ``softmax(Q/T)``.
        temperature: ``T`` of the policy targets, points.
        play_temperature: self-play samples moves from the (noisy) target; 0 plays its argmax.
        entropy_coef: weight of the entropy bonus (subtracted from the loss).
        value_coef, aux_coef: weights of the value and auxiliary losses.
        dirichlet_fraction, dirichlet_alpha: exploration noise mixed into the prior during
            self-play only (YoloYamb: 15 %); evaluation is always noise-free.
        ema_decay: the playing network is ``ema ← decay · ema + (1 − decay) · net`` after
            every optimiser step (YoloYamb lost weeks to once per iteration). Full-turn search
            plays, and computes the bootstrapped value targets, with it: a slower average is a
            slower target network (as in DQN), which stops bootstrapped overestimation from
            feeding on itself (docs/training.md).
        ema_warmup: the decay of the n-th update is ``min(ema_decay, (1 + n) / (10 + n))``
            (TensorFlow's ``ExponentialMovingAverage`` schedule), so a slow average does not hold
            the random initial weights for thousands of steps. Off by default.
        lr, weight_decay, grad_clip: AdamW and gradient-norm clipping.
        lr_schedule: ``"constant"`` (default) keeps ``lr``; ``"cosine"`` anneals it from
            ``lr`` to ``lr × lr_final`` along half a cosine over the run (Loshchilov & Hutter
            2017, SGDR, without restarts): ``lr(p) = lr × (f + (1 − f)(1 + cos πp) / 2)`` at
            progress ``p ∈ [0, 1]``, the larger of the share of ``runtime.time_budget_minutes``
            spent and the share of ``runtime.iterations`` done (see :meth:`lr_at`).
        lr_final: ``f`` above, the last learning rate as a fraction of ``lr``.
        replay_ratio: optimiser samples per new self-play position: each iteration the
            learner takes ``ceil(replay_ratio × new positions / batch_size)`` optimiser steps
            on batches drawn uniformly from the replay buffer, so its cost per iteration is set
            by the data it gets, not by the buffer's size (YoloYamb made ``epochs`` passes over
            the whole buffer instead: with a buffer of B positions and N new ones per
            iteration that is a replay ratio of ``epochs × B / N``).
        games_per_iteration: self-play games per iteration (seed: 200).
        batch_size: positions per optimiser step.
        boundary_samples: also train the value head on boundary positions (start of each
            turn, no dice), which full-turn search queries.
        phasic: phasic policy gradient (Hilton et al. 2021): in the policy phase the value
            loss does not reach the shared trunk; every ``phasic_every`` iterations an
            auxiliary phase of ``phasic_aux_epochs`` passes over the iteration's replay
            samples trains the trunk on the value
            loss with a behavioural-cloning term (weight ``phasic_clone_coef``) that keeps
            the policy where it was.
        bot: the baseline bot (a registered agent name) whose games are mixed in;
            ``bot_share`` of the games at iteration 0, tapering linearly to 0 at
            ``bot_taper_iterations``. Bot positions get a one-hot target on the bot's move.
        value_target_mix: λ of the value target ``(1 − λ) · outcome + λ · search value``.
            0 (default) trains on the points the game actually scored; above 0 mixes in the
            network's own search value (at a turn's start: the exact expectation over the
            turn's dice of its points plus the network's value of where it ends; with dice:
            the best Q), a bootstrapped target with far less dice noise. Self-play only: the
            oracle is not involved.
        value_target_mix_final: None (default): λ stays :attr:`value_target_mix` all run. A
            value: λ moves from :attr:`value_target_mix` at the start of the run to this at its
            end along the learning rate's half cosine and clock (see :meth:`value_target_mix_at`),
            whatever :attr:`lr_schedule` is. Outcome-anchored targets (λ < 1) reach the early
            turns at once where one-turn bootstrapped values creep back a turn at a time, but
            carry the dice's noise: on the ``jamb_nn`` card λ = 0.7 led λ = 1 by 80-106 points
            in the first 15 minutes and fell behind it later (docs/yamb.md). Needs search.
        successor_samples: per turn start, this many of the turn's other possible successor
            boundary states (chosen at random) are also trained on, with the bootstrapped
            target of :attr:`value_target_mix` (their full-turn search value with the playing
            network's values one turn further). Full-turn search asks the value of every
            successor, most of which self-play never visits; without these samples their
            values are extrapolations. On a Yamb card a sample's value is the exact expectation
            over the next turn's first roll of turn-perfect play, the option of announcing
            included (:func:`yamblab.search.yamb_search.turn_start_values`). 0 (default): off.
            Needs full-turn search.
        random_state_samples: per turn start, this many boundary states drawn at random from
            all reachable states one box further on (Yahtzee only; not just the turn's own
            successors) are also trained on with the same bootstrapped target: the values of
            states play never visits stay one-turn backups instead of extrapolations, which
            measured runs overestimated first. 0 (default): off. Needs full-turn search and
            the boundary head.
        policy_share: None (default): the learner's samples are drawn uniformly from the
            replay buffer. A share in (0, 1]: that share of them is drawn among the positions
            with a decision to make (dice on the table: the policy's targets) and the rest
            among the value-only ones (boundary states and the off-path samples above). With
            32 random states and 8 successors a turn, about 7 % of a Yahtzee game's positions
            carry a policy target, so uniform batches give the policy head 7 % of the
            optimiser's samples; a share keeps its part of the learner's work fixed whatever
            the value samples add.
        policy_share_final: None (default): the share stays :attr:`policy_share` all run. A
            share in (0, 1] (needs :attr:`policy_share`, the share at the start): the share
            moves from :attr:`policy_share` to this at the run's end along the learning rate's
            half cosine and clock (see :meth:`policy_share_at`), whatever :attr:`lr_schedule`
            is. A rising share gives the transformer's policy more of the learner's work late in
            a run, when the value side has little left to learn, without the early iterations
            a fixed large share costs (docs/training.md, "The policy head's share of the learner").
        decision_batch_size: None (default): every optimiser step takes ``batch_size`` of the
            drawn positions as they come, so each step runs the transformer on the few with
            dice among them and the boundary head on the rest. A size (needs
            ``model.boundary_head``): the drawn positions are split by kind: those without
            dice train the boundary head alone in steps of ``batch_size`` (the transformer
            does not run), those with dice (the decisions) train the transformer in steps of
            this many. A step's cost is mostly the transformer's fixed cost, so the same
            samples take far fewer transformer steps and far less learner time (measured by
            ``benchmarks/learner_split.py``); the time saved can go to the policy
            (``policy_share``). Both kinds count as optimiser steps and update the EMA.
        distill_oracle: value targets from the exact oracle instead of the game's outcome.
            Off by default: the oracle grades, it does not teach.
        seed: random seed of the learner and self-play.
        init_from: None (default): a new run's network starts from random weights. The path of
            a checkpoint of the same game: it starts from that run's playing network instead
            (its EMA weights, into the network and its EMA), with a new optimiser, schedule and
            replay buffer; a wider ``model.boundary_hidden`` than that run's widens the boundary
            head without changing its values (:func:`~yamblab.model.checkpoint.transfer_weights`).
            Read when the run starts; a resumed run carries on from its own checkpoint.
    """

    model_config = ConfigDict(extra="forbid")

    kl_targets: bool = True
    temperature: float = Field(2.0, gt=0.0, le=1000.0)
    play_temperature: float = Field(1.0, ge=0.0, le=100.0)
    entropy_coef: float = Field(0.003, ge=0.0, le=10.0)
    value_coef: float = Field(1.0, ge=0.0, le=100.0)
    aux_coef: float = Field(0.1, ge=0.0, le=100.0)
    dirichlet_fraction: float = Field(0.15, ge=0.0, le=1.0)
    dirichlet_alpha: float = Field(0.3, gt=0.0, le=100.0)
    ema_decay: float = Field(0.99, ge=0.0, lt=1.0)
    ema_warmup: bool = False
    lr: float = Field(1e-3, gt=0.0, le=1.0)
    lr_schedule: Literal["constant", "cosine"] = "constant"
    lr_final: float = Field(0.1, ge=0.0, le=1.0)
    weight_decay: float = Field(0.01, ge=0.0, le=1.0)
    grad_clip: float = Field(1.0, gt=0.0, le=1e6)
    replay_ratio: float = Field(4.0, gt=0.0, le=1000.0)
    games_per_iteration: int = Field(64, ge=1, le=1_000_000)
    batch_size: int = Field(256, ge=1, le=1 << 20)
    boundary_samples: bool = True
    phasic: bool = False
    phasic_every: int = Field(4, ge=1, le=10_000)
    phasic_aux_epochs: int = Field(2, ge=1, le=100)
    phasic_clone_coef: float = Field(1.0, ge=0.0, le=100.0)
    bot: str = "greedy"
    bot_share: float = Field(0.0, ge=0.0, le=1.0)
    bot_taper_iterations: int = Field(10, ge=1, le=1_000_000)
    value_target_mix: float = Field(0.0, ge=0.0, le=1.0)
    value_target_mix_final: float | None = Field(None, ge=0.0, le=1.0)
    successor_samples: int = Field(0, ge=0, le=44)
    random_state_samples: int = Field(0, ge=0, le=256)
    policy_share: float | None = Field(None, gt=0.0, le=1.0)
    policy_share_final: float | None = Field(None, gt=0.0, le=1.0)
    decision_batch_size: int | None = Field(None, ge=1, le=1 << 20)
    distill_oracle: bool = False
    seed: int = Field(0, ge=0, lt=2**63)
    init_from: str | None = Field(None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data):
        if isinstance(data, dict) and "epochs" in data:
            raise ValueError("train.epochs (passes over the whole replay buffer) was replaced by "
                             "train.replay_ratio: optimiser samples per new self-play position "
                             "(epochs × buffer positions / new positions per iteration gives the same load)")
        return data

    @model_validator(mode="after")
    def _check_split(self) -> "TrainConfig":
        if self.decision_batch_size is not None and self.phasic:
            raise ValueError("train.decision_batch_size splits the learner's steps by kind; phasic policy "
                             "gradient has its own phases: use one of the two")
        if self.policy_share_final is not None and self.policy_share is None:
            raise ValueError("train.policy_share_final is the share of decisions at the run's end and needs "
                             "train.policy_share, the share at its start (uniform draws give a Yahtzee "
                             "full-turn config about 0.07)")
        return self

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
        the learning rate's half cosine (:meth:`lr_at`) from s0 = ``policy_share`` to sf."""
        return _annealed(self.policy_share, self.policy_share_final, progress)

    def bot_share_at(self, iteration: int) -> float:
        """Share of bot games at ``iteration`` (0-based): linear taper to 0."""
        return max(0.0, self.bot_share * (1.0 - iteration / self.bot_taper_iterations))
