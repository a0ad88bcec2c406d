"""Self-play for any game of :mod:`yamblab.games.protocol`: many games at once, one batched
forward pass per step.

:class:`SelfPlay` holds a copy of the playing (EMA) network; :meth:`SelfPlay.set_weights`
loads new weights only when their version changes; :meth:`SelfPlay.play_games` plays seeded
games and returns a :class:`~yamblab.learners.samples.SampleBatch` of every decision (plus the
boundary positions at the start of every turn), with search policy targets and the points each
game actually scored from each position on.
"""

from __future__ import annotations

import time
from dataclasses import fields

import numpy as np
import torch

from yamblab.games.encoding import N_ACTIONS, EncodedBatch
from yamblab.games.protocol import Game, step_shared
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.samples import SampleBatch
from yamblab.model.config import ModelConfig
from yamblab.model.network import YambNet
from yamblab.search.registry import make_search
from yamblab.search.valuation import NetworkValuation
from yamblab.search.targets import add_dirichlet_noise, policy_targets


def _bot_moves(bot, game, batch, live: np.ndarray, bl: np.ndarray, act: np.ndarray, target: np.ndarray):
    """The bot's moves in its games (rows ``bl`` of the live games ``live``) written into
    ``act``; returns the policy targets with a one-hot on each bot move there."""
    bot_act = np.asarray(bot.act(batch), np.int64)
    if not bl.any():
        return target
    bot_shared = game.to_shared(bot_act[live[bl]])
    act[live[bl]] = bot_shared
    onehot = np.zeros((int(bl.sum()), N_ACTIONS), np.float32)
    onehot[np.arange(onehot.shape[0]), bot_shared] = 1.0
    target = target.copy()
    target[bl] = onehot
    return target


def _turn_start_backup(search, q: np.ndarray, start: np.ndarray, at_start: np.ndarray) -> np.ndarray:
    """The search value of the turn starts ``start`` (rows ``at_start`` of ``q``): Yahtzee's full
    turn, exact over the first roll; else the first roll's best Q, a one-roll sample of it."""
    tv = _turn_values(search)
    if tv is not None:
        return tv[start].copy()
    qm = np.where(np.isfinite(q), q, -np.inf).max(axis=1)
    return qm[at_start].copy()


def _turn_values(search):
    """Values of the current turns' starts computed by a full-turn search (None if none)."""
    full = getattr(search, "turn", search)
    return getattr(full, "turn_value", None)


def rows(enc: EncodedBatch, idx) -> EncodedBatch:
    """The positions ``idx`` of an encoded batch."""
    return EncodedBatch(**{f.name: getattr(enc, f.name)[idx] for f in fields(enc)})


def sample_actions(dist: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """One action per row of ``dist`` (n, A): argmax if ``temperature`` is 0, else a sample
    from ``dist ** (1 / temperature)`` renormalised. Rows without mass give action 0."""
    if temperature == 0:
        return np.argmax(dist, axis=1)
    p = np.power(np.maximum(dist.astype(np.float64), 0.0), 1.0 / temperature)
    s = p.sum(axis=1, keepdims=True)
    p = p / np.where(s > 0, s, 1.0)
    c = np.cumsum(p, axis=1)
    u = rng.random((dist.shape[0], 1)) * c[:, -1:]
    return np.minimum((c <= u).sum(axis=1), dist.shape[1] - 1)


class SelfPlay:
    """A self-play worker for any game.

    Args:
        model_cfg, train_cfg, search_cfg: configuration.
        game: the :class:`~yamblab.games.protocol.Game` (or a Yahtzee rules object).
        device: torch device of the playing network (its forward passes and search leaves).
        oracle_table: needed only when ``train_cfg.distill_oracle`` is on (Yahtzee).
        bf16: inference under bf16 autocast on a CUDA device (``runtime.bf16``).
    """

    def __init__(self, model_cfg: ModelConfig, train_cfg: TrainConfig, search_cfg: SearchConfig,
                 game: Game, device: str = "cpu", oracle_table=None, bf16: bool = False):
        from yamblab.games.protocol import as_game

        self.cfg = train_cfg
        self.search_cfg = search_cfg
        self.game = as_game(game)
        self.rules = self.game.rules
        self.device = torch.device(device)
        self.net = YambNet(model_cfg).to(self.device).eval()
        self.net.inference_bf16 = bool(bf16)
        for p in self.net.parameters():
            p.requires_grad_(False)
        self.version = -1
        self.oracle_table = oracle_table
        if train_cfg.distill_oracle and oracle_table is None:
            from yamblab.oracle.registry import oracle_table as load

            self.oracle_table = load(self.game)
        self._bot = None

    def set_weights(self, state_dict: dict, version: int) -> bool:
        """Load the playing network's weights if ``version`` is new; True if it loaded.

        Raises:
            RuntimeError: weights that do not fit the network (strict loading).
        """
        if version == self.version:
            return False
        self.net.load_state_dict(state_dict, strict=True)
        self.version = int(version)
        return True

    def _bot_agent(self):
        if self._bot is None:
            from yamblab.agents.base import make_agent

            self._bot = make_agent(self.cfg.bot, self.game)
        return self._bot

    @torch.no_grad()
    def play_games(self, n: int, seed: int, first_game: int = 0, n_bot: int = 0,
                   noise: bool = True, value_target_mix: float | None = None) -> tuple[SampleBatch, dict]:
        """Play ``n`` games (dice seed ``seed``, game numbers ``first_game`` …).

        Args:
            n_bot: the first ``n_bot`` games are played by the baseline bot; their positions
                get a one-hot policy target on the bot's move.
            noise: Dirichlet noise in the prior (training); False for noise-free play.
            value_target_mix: λ of these games' value targets (the runtime's schedule,
                :meth:`~yamblab.learners.config.TrainConfig.value_target_mix_at`); None: the
                config's ``value_target_mix``.

        Returns:
            ``(samples, stats)``: stats has ``score_mean`` (network games), ``bot_score_mean``,
            ``positions``, ``leaf_positions`` (network leaves valued) and ``seconds``.
        """
        t0 = time.perf_counter()
        cfg = self.cfg
        game = self.game
        rng = np.random.default_rng([int(seed) & (2**63 - 1), int(first_game), 0x5E1F])
        batch = game.new_batch(n, seed=seed, first_game=first_game)
        valuation = NetworkValuation(self.net, self.search_cfg.leaf_chunk)
        search = make_search(self.search_cfg.depth, game, valuation)
        is_bot = np.arange(n) < n_bot
        bot = self._bot_agent() if n_bot else None
        if bot is not None:
            bot.reset(batch)
        parts, owners, totals_at, backups, extra = [], [], [], [], []
        while not batch.done.all():
            live = np.flatnonzero(~batch.done)
            enc_all = game.encode(batch)
            enc = rows(enc_all, live)
            turn_entry = None
            at_start = game.turn_start(batch)[live]
            if cfg.boundary_samples:
                start = live[at_start]
                if start.size:
                    b_enc = game.encode_boundary(batch, start)
                    parts.append((b_enc, np.zeros((start.size, N_ACTIONS), np.float32), False))
                    owners.append(start)
                    totals_at.append(batch.total[start].astype(np.float64))
                    backups.append(("turn", start))
                    turn_entry = len(backups) - 1
            prior, _ = self.net.predict(enc, self.search_cfg.leaf_chunk)
            q = None
            if search is None:
                target = play = prior * enc.legal
            else:
                q = search.q(batch)[live]
                if cfg.boundary_samples and turn_entry is not None:
                    backups[turn_entry] = ("q", _turn_start_backup(search, q, backups[turn_entry][1], at_start))
                extra.extend(self._off_path_samples(search, batch, live[at_start], rng))
                target, play = self._targets(q, prior, enc.legal, noise, rng)
            temp = cfg.play_temperature if noise else 0.0
            act = np.zeros(n, np.int64)
            act[live] = sample_actions(play, temp, rng)
            if bot is not None:
                target = _bot_moves(bot, game, batch, live, is_bot[live], act, target)
            parts.append((enc, target, True))
            owners.append(live)
            totals_at.append(batch.total[live].astype(np.float64))
            backups.append(("none", None) if q is None else ("q", np.where(np.isfinite(q), q, -np.inf).max(axis=1)))
            step_shared(game, batch, act)
        final = batch.total.astype(np.float64)
        lam = cfg.value_target_mix if value_target_mix is None else float(value_target_mix)
        samples = self._samples(parts, owners, totals_at, final, game.bonus_reached(batch), extra,
                                (backups, lam) if lam > 0 and search is not None else None)
        net_games = ~is_bot
        stats = {
            "score_mean": float(final[net_games].mean()) if net_games.any() else float("nan"),
            "bot_score_mean": float(final[is_bot].mean()) if is_bot.any() else float("nan"),
            "positions": len(samples),
            "leaf_positions": valuation.positions_evaluated,
            "seconds": time.perf_counter() - t0,
        }
        return samples, stats

    def _samples(self, parts, owners, totals_at, final, bonus, extra, mix) -> SampleBatch:
        """The games' positions as training samples: value targets the points still to come
        (mixed with search values when ``mix`` is ``(backups, λ)``), the off-path samples after
        them, and (named, off by default) the oracle's values instead."""
        owner = np.concatenate(owners)
        value_target = final[owner] - np.concatenate(totals_at)
        if mix is not None:
            value_target = self._mix_search_values(value_target, mix[0], owners, mix[1])
        samples = SampleBatch.from_parts(
            EncodedBatch(**{f.name: np.concatenate([getattr(p[0], f.name) for p in parts])
                            for f in fields(EncodedBatch)}),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([np.full(len(p[0]), p[2]) for p in parts]),
            value_target, bonus[owner])
        if extra:
            e_enc = EncodedBatch(**{f.name: np.concatenate([getattr(e[0], f.name) for e in extra])
                                    for f in fields(EncodedBatch)})
            e_own = np.concatenate([e[2] for e in extra])
            samples = SampleBatch.concat([samples, SampleBatch.from_parts(
                e_enc, np.zeros((len(e_own), N_ACTIONS), np.float32), np.zeros(len(e_own), bool),
                np.concatenate([e[1] for e in extra]), bonus[e_own])])
        if self.cfg.distill_oracle:        # Yahtzee only (the run config refuses it elsewhere)
            samples.value_target[:] = self._oracle_values(samples)
        return samples

    def _off_path_samples(self, search, batch, start: np.ndarray, rng) -> list:
        """Bootstrapped value samples off the games' path at the turn starts ``start`` (full-turn
        search only): the turn's own successors, then (Yahtzee) random cards of the next layer."""
        cfg, out = self.cfg, []
        if not start.size or self.search_cfg.depth != "full_turn":
            return out
        for k, sample in ((cfg.successor_samples, search.successor_samples),
                          (cfg.random_state_samples, getattr(search, "random_state_samples", None))):
            got = sample(batch, start, k, rng) if k and sample is not None else None
            if got is not None:
                out.append(got)
        return out

    def _targets(self, q: np.ndarray, prior: np.ndarray, legal: np.ndarray, noise: bool, rng):
        """``(target, play)``: the policy target from search's ``q`` and the distribution self-play
        samples from (the target, with Dirichlet noise in the prior when ``noise``)."""
        cfg = self.cfg
        target = play = policy_targets(q, prior, cfg.temperature, cfg.kl_targets)
        if noise and cfg.dirichlet_fraction > 0:
            noisy = add_dirichlet_noise(prior, legal, cfg.dirichlet_fraction, cfg.dirichlet_alpha, rng)
            if cfg.kl_targets:
                play = policy_targets(q, noisy, cfg.temperature, True)
            else:
                play = add_dirichlet_noise(target, legal, cfg.dirichlet_fraction, cfg.dirichlet_alpha, rng)
        return target, play

    @staticmethod
    def _mix_search_values(outcome, backups, owners, lam: float) -> np.ndarray:
        """``(1 - λ) · outcome + λ · search value`` with λ = ``lam`` (float64 points, one per
        position).

        The search value of a turn's start is the exact expectation over the turn's dice of its
        points plus the network's own value of where the turn ends (a one-turn bootstrapped,
        TD-style target from the network's own search: no oracle); of a position with dice, the
        best action's Q. Positions whose search value is unknown keep the outcome.
        """
        vals = []
        for (kind, data), owner in zip(backups, owners):
            if kind == "q":
                vals.append(np.asarray(data, np.float64))
            else:
                vals.append(np.full(len(owner), np.nan))
        v = np.concatenate(vals) if vals else np.zeros(0)
        ok = np.isfinite(v)
        out = outcome.copy()
        out[ok] = (1.0 - lam) * outcome[ok] + lam * v[ok]
        return out

    def _oracle_values(self, samples: SampleBatch) -> np.ndarray:
        """Oracle points still to come of each sample (the named, off-by-default distillation)."""
        from yamblab.search.registry import exact_position_values

        enc = EncodedBatch(columns=samples.columns, column_type=samples.column_type,
                           column_features=samples.column_features, dice=samples.dice,
                           state=samples.state, legal=samples.legal)
        return exact_position_values(self.game, enc, self.oracle_table)
