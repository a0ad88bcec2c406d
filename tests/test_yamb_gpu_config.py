"""configs/yamb-gpu.yaml (the YoloYamb post's network and one-step search on jamb_nn) runs
through the Ray runtime on this CPU, scaled down by overrides alone, so a broken GPU-config
path cannot land unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the config scaled down to two short games, played at once by two workers, and two iterations:
#: one down column of the five-dice card (each one-step search has about a third of jamb_nn's
#: leaves, so the seed network's two games take 20 s of CPU rather than 70; jamb_nn's one-step
#: search itself is tested in tests/test_search.py); the GPU shares set to 0 on a cluster without
#: a GPU (which would refuse them by name); the evaluation by the policy head alone
SCALED = {"preset": "croatian", "columns": ["down"], "train.games_per_iteration": 1, "train.batch_size": 64,
          "runtime.iterations": 2, "runtime.learner_gpus": 0, "runtime.eval_gpus": 0,
          "runtime.workers": 2, "runtime.worker_cpus": 0.5, "runtime.learner_cpus": 0.5, "runtime.eval_cpus": 0.5,
          "runtime.replay_positions": 5000, "runtime.eval_games": 1, "runtime.eval_depth": "none"}


def test_the_gpu_config_asks_for_the_seed_network_one_step_search_and_gpu_shares():
    from yamblab.training.config import load_run_config

    cfg = load_run_config(ROOT / "configs" / "yamb-gpu.yaml")
    assert cfg.size == "seed" and cfg.search.depth == "one_step" and cfg.preset == "jamb_nn"
    assert cfg.runtime.learner_gpus + cfg.runtime.eval_gpus < 1 and cfg.runtime.worker_gpus == "auto"
    assert cfg.runtime.checkpoint_minutes > 0 and cfg.runtime.bf16


@pytest.mark.ray
def test_a_cluster_without_a_gpu_refuses_the_gpu_config_by_name(ray_cluster, tmp_path):
    from yamblab.errors import ConfigError
    from yamblab.training.config import load_run_config
    from yamblab.training.runtime import TrainingRun

    cfg = load_run_config(ROOT / "configs" / "yamb-gpu.yaml", {"runtime.run_dir": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"learner_gpus 0.5.*the Ray cluster has 0"):
        TrainingRun(cfg, tmp_path / "run", progress=False)


@pytest.mark.ray
@pytest.mark.slow
def test_the_gpu_config_trains_two_iterations_through_the_ray_runtime(ray_cluster, tmp_path):
    from yamblab.training.config import load_run_config
    from yamblab.training.runtime import TrainingRun

    cfg = load_run_config(ROOT / "configs" / "yamb-gpu.yaml", {**SCALED, "runtime.run_dir": str(tmp_path)})
    run = TrainingRun(cfg, tmp_path / "run", progress=False)
    try:
        assert run.backend.devices == {"learner": "cpu", "self-play": "cpu", "evaluator": "cpu"}
        run.run()
        learner = run.backend.network()
        assert sum(p.numel() for p in learner.parameters()) > 4_000_000       # the seed-sized network
        assert run.iteration == 2 and run.games_played == 2
        assert all(h["selfplay.positions"] > 13 for h in run.history)          # every turn, and its leaves
        assert run.history[-1]["train.steps"] > 0 and run.evals
        assert (tmp_path / "run" / "checkpoint.pt").is_file()
    finally:
        run.shutdown()
