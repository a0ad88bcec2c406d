"""The Ray runtime on one small shared local cluster."""

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("name,lag", [("yahtzee-tiny", 1), ("yamb-tiny", 1), ("yahtzee-tiny", 0)])
def test_two_iterations_on_ray(ray_cluster, tmp_path, name, lag):
    """Both games train through the one loop, serial (lag 0) or with self-play playing ahead of
    the learner (lag 1); Yamb's single column is graded by its oracle."""
    from yamblab.training.config import load_run_config
    from yamblab.training.resume import CHECKPOINT
    from yamblab.training.runtime import TrainingRun

    tiny_config = load_run_config(ROOT / "configs" / f"{name}.yaml", {"runtime.run_dir": str(tmp_path / "runs"),
                                                                       "runtime.iterations": 3,
                                                                       "runtime.max_policy_lag": lag})
    run = TrainingRun(tiny_config, tmp_path / "run", progress=False)
    try:
        history = run.run()
        assert [h["iteration"] for h in history] == [1, 2, 3]
        n = tiny_config.train.games_per_iteration
        assert [h["games_played"] for h in history] == [n, 2 * n, 3 * n]
        # the first batch plays with the first weights; later ones are `lag` trainings behind
        assert [h["selfplay.policy_lag"] for h in history] == [0, lag, lag]
        assert history[-1]["selfplay.positions_total"] == sum(h["selfplay.positions"] for h in history)
        # the replay ratio sets the optimiser steps: ceil(ratio x new positions / batch)
        bs, ratio = tiny_config.train.batch_size, tiny_config.train.replay_ratio
        assert [h["train.samples"] for h in history] == [
            bs * max(1, -(-int(ratio * h["selfplay.positions"]) // bs)) for h in history]
        assert np.isfinite(history[-1]["eval.regret_mean"]) and history[-1]["eval.regret_mean"] > 0
        # the evaluation says what was behind it
        assert history[-1]["eval.selfplay_positions"] == history[-1]["selfplay.positions_total"]
        assert history[-1]["eval.optimiser_steps"] == history[-1]["train.steps"]
        assert history[-1]["buffer.positions"] > 0
        assert (tmp_path / "run" / CHECKPOINT).exists()
        # three versions were published and the worker loaded a version only when it changed:
        # serially each once; with lag 1 the first two batches share the first weights
        assert run.backend.weight_loads() == [3 - lag]
        out = run.finish()
        assert len(out["per_game_regret"]) == tiny_config.runtime.eval_games
    finally:
        run.shutdown()


def test_weights_reach_workers_only_on_version_change(ray_cluster, tiny_config):
    from yamblab.actors.actors import SelfPlayWorker
    from yamblab.learners.learner import Learner

    worker = ray_cluster.remote(num_cpus=1)(SelfPlayWorker).remote(tiny_config)
    version, state = Learner(tiny_config.model, tiny_config.train).get_weights()
    ref = [ray_cluster.put(state)]
    for first in (0, 2, 4):
        ray_cluster.get(worker.play.remote(version, ref, 2, 0, first))
    assert ray_cluster.get(worker.weight_loads.remote()) == 1
    ray_cluster.get(worker.play.remote(version + 1, ref, 2, 0, 6))
    assert ray_cluster.get(worker.weight_loads.remote()) == 2
    ray_cluster.kill(worker)


def test_killed_worker_is_replaced_and_its_games_replayed(ray_cluster, tiny_config, tmp_path):
    """A worker whose process dies mid-game is restarted by Ray and its games are played again."""
    import sys

    import ray.cloudpickle

    from yamblab.actors.actors import SelfPlayWorker
    from yamblab.training.backends import RayBackend

    class DiesOnce(SelfPlayWorker):
        """Kills its own process during its first game (a marker file makes it die only once)."""

        def __init__(self, config, worker_id, marker):
            super().__init__(config, worker_id)
            self.marker = marker

        def play(self, *args, **kwargs):
            import os

            if not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os._exit(1)
            return super().play(*args, **kwargs)

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    backend = RayBackend(tiny_config)
    try:
        ray_cluster.kill(backend.workers[0])
        backend.workers[0] = ray_cluster.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(DiesOnce).remote(
            tiny_config, 0, str(tmp_path / "died"))
        version, weights = backend.weights()
        jobs = [{"n": 4, "seed": 0, "first_game": 4 * i, "n_bot": 0} for i in range(3)]
        stats = backend.collect(backend.submit(version, weights, jobs))
        assert (tmp_path / "died").exists() and backend.restarts >= 1
        assert len(stats) == 3                          # every job done once
        assert sorted(s["positions"] > 0 for s in stats) == [True, True, True]
    finally:
        backend.shutdown()


def test_evaluation_modes_on_the_same_dice(ray_cluster, tmp_path):
    """Every evaluation grades the extra decision modes too, each on its own number of games;
    with ``runtime.snapshots`` the graded network is kept and grades the same afterwards."""
    from yamblab.agents.search_agent import network_agent
    from yamblab.model.checkpoint import load_network
    from yamblab.oracle.yahtzee.grading import grade
    from yamblab.training.config import load_run_config
    from yamblab.training.runtime import TrainingRun

    cfg = load_run_config(ROOT / "configs" / "yahtzee-tiny.yaml",
                          {"runtime.iterations": 1, "runtime.eval_games": 6, "runtime.snapshots": True,
                           "runtime.eval_modes": {"none": 10, "one_step": 4}})
    run = TrainingRun(cfg, tmp_path / "run", progress=False)
    try:
        run.run()
        m = run.history[-1]
        for mode, games in (("none", 10), ("one_step", 4)):
            assert m[f"eval.{mode}.games"] == games
            assert m[f"eval.{mode}.regret_ci_low"] <= m[f"eval.{mode}.regret_mean"] <= m[f"eval.{mode}.regret_ci_high"]
            assert len(run.evals[-1]["modes"][mode]["per_game_regret"]) == games
        assert run.evals[-1]["mode"] == "full_turn" and len(run.evals[-1]["per_game_regret"]) == 6
        # the policy head alone is a different player from full-turn search on the same dice
        assert m["eval.none.regret_mean"] != m["eval.regret_mean"]
        assert run.finish()["modes"].keys() == {"none", "one_step"}
        snaps = sorted((tmp_path / "run" / "snapshots").glob("iteration-*.pt"))
        assert [s.name for s in snaps] == ["iteration-000001.pt"]
        again = grade(network_agent(load_network(snaps[0]), cfg.game_obj, "full_turn"), cfg.rules_obj,
                      games=6, seed=cfg.runtime.eval_seed)
        np.testing.assert_allclose(again.regrets, run.evals[-1]["per_game_regret"], atol=1e-5)
    finally:
        run.shutdown()


@pytest.mark.parametrize("name", ["yahtzee-tiny", "yamb-tiny"])
def test_in_process_roles_give_the_numbers_of_ray_actors(ray_cluster, tmp_path, name, one_torch_thread):
    """``runtime.actors: in_process`` (the roles as plain objects in the driver, one after
    another) trains and evaluates to the same numbers as the Ray actors of the serial loop, on
    one CPU each: the same losses, self-play scores and evaluation, digit for digit."""
    from yamblab.training.config import load_run_config
    from yamblab.training.backends import InProcessBackend, RayBackend
    from yamblab.training.runtime import TrainingRun

    histories = {}
    for actors in ("in_process", "ray"):
        cfg = load_run_config(ROOT / "configs" / f"{name}.yaml", {
            "runtime.run_dir": str(tmp_path / actors), "runtime.iterations": 2, "runtime.max_policy_lag": 0,
            "runtime.eval_every": 2, "runtime.actors": actors})
        run = TrainingRun(cfg, tmp_path / actors / "run", progress=False, cpus=1)
        try:
            assert type(run.backend) is (InProcessBackend if actors == "in_process" else RayBackend)
            histories[actors] = run.run()
            run.finish()
        finally:
            run.shutdown()
    keys = ["train.total", "selfplay.score_mean", "selfplay.positions", "eval.score_mean"]
    got = [[h.get(k) for k in keys] for h in histories["in_process"]]
    assert got == [[h.get(k) for k in keys] for h in histories["ray"]]
    assert got[-1][-1] is not None and np.isfinite(got[-1][-1])


def test_in_process_roles_refuse_a_policy_lag():
    """The roles in one process take turns: a config that asks them to overlap is refused by name."""
    from yamblab.errors import ConfigError
    from yamblab.training.config import load_run_config

    for bad, word in [({"runtime.max_policy_lag": 1}, "max_policy_lag"), ({"runtime.max_policy_lag": 0,
                                                                            "runtime.workers": 2}, "workers")]:
        with pytest.raises(ConfigError, match=word):
            load_run_config(ROOT / "configs" / "yahtzee-tiny.yaml", {"runtime.actors": "in_process", **bad})


@pytest.mark.slow
def test_two_iterations_of_jamb_nn_report_paired_differences(ray_cluster, tmp_path):
    """configs/jamb-cpu.yaml (JambNeuralNetwork's rules), shrunk: two iterations on the shared
    cluster; a card with no oracle is graded against the heuristic and greedy bots on the same
    dice, with the policy head alone beside it and the points column by column."""
    from yamblab.training.config import load_run_config
    from yamblab.training.runtime import TrainingRun

    cfg = load_run_config(ROOT / "configs" / "jamb-cpu.yaml", {
        "runtime.run_dir": str(tmp_path / "runs"), "runtime.iterations": 2, "runtime.eval_every": 2,
        "runtime.eval_games": 6, "runtime.eval_modes": {"none": 6}, "train.games_per_iteration": 2,
        "train.replay_ratio": 0.5, "model.boundary_hidden": 32})
    assert cfg.preset == "jamb_nn" and cfg.model.boundary_features == "card_middle"
    run = TrainingRun(cfg, tmp_path / "run", progress=False)
    try:
        last = run.run()[-1]
        out = run.finish()
    finally:
        run.shutdown()
    assert last["eval.vs_baseline_mean"] == pytest.approx(last["eval.score_mean"] - last["eval.baseline_score_mean"])
    assert last["eval.vs_baseline_ci_low"] < last["eval.vs_baseline_mean"] < last["eval.vs_baseline_ci_high"]
    assert np.isfinite(last["eval.vs_greedy_mean"]) and np.isfinite(last["eval.none.vs_baseline_mean"])
    # what a sweep compares: the points each game scored below the heuristic bot on its dice
    assert out["loss"] == "points below heuristic" and len(out["per_game_regret"]) == 6
    assert np.mean(out["per_game_regret"]) == pytest.approx(-last["eval.vs_baseline_mean"])
    columns = [last[f"eval.column.{k}_mean"] for k in ("down", "free", "up", "announce")]
    assert sum(columns) == pytest.approx(last["eval.score_mean"])
    assert 0.0 <= last["eval.announce_fill_rate"] <= 1.0


def test_early_evaluations_are_denser_and_grade_the_main_mode_only(tmp_path, one_torch_thread):
    """``runtime.eval_early``: evaluations every ``every`` iterations up to ``until`` besides
    ``eval_every``'s grid; those grade the main mode (and the exact regret) without the other
    modes, the grid's and the last one are whole, and the summary's thresholds see them all."""
    from yamblab.training.config import load_run_config
    from yamblab.training.runtime import TrainingRun
    from yamblab.training.summary import run_summary

    cfg = load_run_config(ROOT / "configs" / "yahtzee-tiny.yaml", {
        "runtime.run_dir": str(tmp_path / "runs"), "runtime.iterations": 5, "runtime.max_policy_lag": 0,
        "runtime.actors": "in_process", "runtime.eval_every": 4, "runtime.eval_early": {"every": 1, "until": 2},
        "runtime.eval_games": 2, "runtime.eval_modes": {"none": 3}, "train.games_per_iteration": 2})
    run = TrainingRun(cfg, tmp_path / "run", progress=False, cpus=1)
    try:
        history = run.run()
        run.finish()
    finally:
        run.shutdown()
    assert [(e["iteration"], e["whole"]) for e in run.evals] == [(1, False), (2, False), (4, True), (5, True)]
    assert [sorted(e["modes"]) != [] and "none" in e["modes"] for e in run.evals] == [False, False, True, True]
    assert all(len(e["per_game_regret"]) == 2 for e in run.evals)
    assert [("eval.none.regret_mean" in h, "eval.regret_mean" in h) for h in history] == \
        [(False, True), (False, True), (False, False), (True, True), (True, True)]
    assert run_summary(run.evals)["summary.policy_regret"] == pytest.approx(np.mean(run.evals[-1]["modes"]["none"]["per_game_regret"]))


def test_early_evaluations_must_be_denser_than_the_grid():
    """An early grid no denser than ``eval_every`` is refused by name; the grids count from a
    branch point, and the last iteration is always evaluated whole."""
    from yamblab.errors import ConfigError
    from yamblab.training.config import RuntimeConfig, load_run_config

    with pytest.raises(ConfigError, match="eval_early.every"):
        load_run_config(ROOT / "configs" / "yahtzee-tiny.yaml", {"runtime.eval_every": 5,
                                                                  "runtime.eval_early": {"every": 5, "until": 50}})
    rt = RuntimeConfig(iterations=30, eval_every=10, eval_early={"every": 3, "until": 12})
    assert [i for i in range(1, 31) if rt.evaluation_due(i)] == [3, 6, 9, 10, 12, 20, 30]
    assert [rt.evaluation_due(i) for i in (3, 10, 12, 15, 30)] == ["early", "full", "early", None, "full"]
    assert [i for i in range(8, 31) if rt.evaluation_due(i, since=7)] == [10, 13, 16, 17, 19, 27, 30]


def test_a_run_stopped_on_an_early_evaluation_ends_on_a_whole_one(tmp_path, one_torch_thread):
    """A time budget that ends a run at an iteration with an early evaluation (``eval_early``)
    adds a whole evaluation of the same weights, so the summary has every mode."""
    from yamblab.training.config import load_run_config
    from yamblab.training.runtime import TrainingRun
    from yamblab.training.summary import run_summary

    cfg = load_run_config(ROOT / "configs" / "yahtzee-tiny.yaml", {
        "runtime.run_dir": str(tmp_path / "runs"), "runtime.iterations": 5, "runtime.max_policy_lag": 0,
        "runtime.actors": "in_process", "runtime.eval_every": 4, "runtime.eval_early": {"every": 1, "until": 2},
        "runtime.eval_games": 2, "runtime.eval_modes": {"none": 3}, "train.games_per_iteration": 2,
        "runtime.time_budget_minutes": 1e-4})
    run = TrainingRun(cfg, tmp_path / "run", progress=False, cpus=1)
    try:
        run.step()                  # iteration 1, and its early evaluation
        assert [(e["iteration"], e["whole"]) for e in run.evals] == [(1, False)]
        run.run()                   # the budget is spent: no more iterations, the last evaluation
    finally:
        run.shutdown()
    assert run.iteration == 1
    assert [(e["iteration"], e["whole"]) for e in run.evals] == [(1, False), (1, True)]
    assert "summary.policy_regret" in run_summary(run.evals)
