"""A tiny network trained for a few iterations in one process lowers its oracle regret."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.local import train_local
from yamblab.model.config import ModelConfig


@pytest.mark.slow
def test_tiny_network_learns_by_self_play(official_table, tmp_path):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = []
        run = train_local(
            ModelConfig.preset("tiny"),
            TrainConfig(games_per_iteration=64, lr=3e-3, epochs=3, seed=0),
            SearchConfig(depth="full_turn"), OFFICIAL, iterations=5, eval_games=100,
            eval_every=5, eval_depths=("none",), table=official_table,
            checkpoint_path=tmp_path / "last.ckpt", callback=rows.append)
    finally:
        torch.set_num_threads(old)
    h = run.history
    assert rows == h and [r["iteration"] for r in h] == list(range(6))
    before, after = h[0]["none/regret"], h[-1]["none/regret"]
    # the untrained policy loses ~200 points a game to the oracle; self-play with full-turn
    # search teaches it (noise-free evaluation on the same 100 seeded games)
    assert before > 150
    assert after < before - 40, (before, after)
    assert all(np.isfinite(r["train/total"]) for r in h[1:])
    assert run.learner.ema.updates == run.learner.steps > 0
    assert (tmp_path / "last.ckpt").exists()
