"""In-process training: self-play, replay buffer, learner and evaluation, without Ray.

:func:`train_local` is the whole AlphaZero loop in one process, for tests, laptops and
debugging; the Ray runtime runs the same pieces (:class:`~yamblab.learners.selfplay.SelfPlay`,
:class:`~yamblab.learners.learner.Learner`) as actors.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Callable

from yamblab.games.yahtzee.rules import OFFICIAL, YahtzeeRules
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.learner import Learner
from yamblab.learners.samples import SampleBatch
from yamblab.learners.selfplay import SelfPlay
from yamblab.model.config import ModelConfig


@dataclass
class LocalRun:
    """The result of :func:`train_local`: the metrics history and the final learner."""

    history: list[dict] = field(default_factory=list)
    learner: Learner | None = None


def evaluate(net, rules: YahtzeeRules, games: int, seed: int, table, depths=("none", "full_turn"),
             probes: bool = True) -> dict[str, float]:
    """Noise-free evaluation: oracle regret per game of each depth, and the probe pass rate.

    Returns:
        ``{"<depth>/regret": points per game, "<depth>/score": mean score,
        "<depth>/probes": pass rate}`` for each depth.
    """
    from yamblab.agents.search_agent import network_agent
    from yamblab.learners.probes import run_probes
    from yamblab.oracle.grading import grade

    out: dict[str, float] = {}
    for depth in depths:
        agent = network_agent(net, rules, depth)
        rep = grade(agent, rules, games=games, seed=seed, table=table)
        out[f"{depth}/regret"] = rep.regret_mean
        out[f"{depth}/score"] = rep.mean
        if probes:
            out[f"{depth}/probes"] = run_probes(network_agent(net, rules, depth), rules, table).pass_rate
    return out


def train_local(model_cfg: ModelConfig, train_cfg: TrainConfig, search_cfg: SearchConfig | None = None,
                rules: YahtzeeRules = OFFICIAL, iterations: int = 10, eval_games: int = 100,
                eval_seed: int = 2**40 + 7, eval_every: int = 1, eval_depths=("none", "full_turn"),
                table=None, checkpoint_path=None, callback: Callable[[dict], None] | None = None,
                progress: bool = False) -> LocalRun:
    """Train a network by self-play in this process.

    Each iteration: the EMA network plays ``games_per_iteration`` games (a tapering share
    by the bot), the samples enter a replay buffer of the last ``buffer_iterations``
    iterations, the learner trains ``epochs`` passes over the buffer, and (every
    ``eval_every`` iterations) the EMA network is graded noise-free on ``eval_games`` fixed
    games of dice seed ``eval_seed``.

    Args:
        table: the oracle table for grading (default: :meth:`OracleTable.get`).
        checkpoint_path: save an atomic checkpoint there after every iteration.
        callback: called with each iteration's metrics dict.

    Returns:
        :class:`LocalRun`; its ``history`` holds one metrics dict per row: row 0 is the evaluation before training (``iteration``
        0), then one per iteration with self-play, training, health and evaluation metrics.
    """
    from yamblab.learners.checkpoint import save_checkpoint
    from yamblab.oracle.table import OracleTable

    search_cfg = search_cfg or SearchConfig()
    table = table or OracleTable.get(rules)
    learner = Learner(model_cfg, train_cfg)
    worker = SelfPlay(model_cfg, train_cfg, search_cfg, rules, device=train_cfg.device)
    buffer: collections.deque[SampleBatch] = collections.deque(maxlen=train_cfg.buffer_iterations)
    history = []
    row = {"iteration": 0}
    if eval_games:
        row.update(evaluate(learner.ema.model, rules, eval_games, eval_seed, table, eval_depths))
    history.append(row)
    if callback:
        callback(row)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=iterations, desc="training", unit="it")
    for it in range(iterations):
        t0 = time.perf_counter()
        version, weights = learner.get_weights()
        worker.set_weights(weights, version)
        n = train_cfg.games_per_iteration
        n_bot = int(round(train_cfg.bot_share_at(it) * n))
        samples, sp = worker.play_games(n, seed=train_cfg.seed, first_game=it * n, n_bot=n_bot)
        buffer.append(samples)
        metrics = learner.train_iteration(SampleBatch.concat(list(buffer)))
        row = {"iteration": it + 1, "bot_games": n_bot, **{f"selfplay/{k}": v for k, v in sp.items()},
               **{f"train/{k}": v for k, v in metrics.items()}}
        if eval_games and ((it + 1) % eval_every == 0 or it + 1 == iterations):
            row.update(evaluate(learner.ema.model, rules, eval_games, eval_seed, table, eval_depths))
        if checkpoint_path is not None:
            save_checkpoint(checkpoint_path, learner.state_dict())
        row["seconds"] = time.perf_counter() - t0
        history.append(row)
        if callback:
            callback(row)
        if bar is not None:
            bar.update(1)
            bar.set_postfix({k: f"{row[k]:.1f}" for k in row if k.endswith("/regret")})
    if bar is not None:
        bar.close()
    return LocalRun(history, learner)

