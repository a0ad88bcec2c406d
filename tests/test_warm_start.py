"""Warm starts (``train.init_from``): a new run starts from a trained network, and a wider
boundary head takes the narrower one's weights without changing a value it computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from yamblab.errors import ConfigError, YamblabError

ROOT = Path(__file__).resolve().parents[1]


def _net(overrides: dict, seed: int, config: str = "jamb-cpu.yaml"):
    from yamblab.model.network import YambNet
    from yamblab.training.config import load_run_config

    cfg = load_run_config(ROOT / "configs" / config, overrides)
    torch.manual_seed(seed)
    net = YambNet(cfg.model).eval()
    with torch.no_grad():                      # not the initial weights: a "trained" network
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return cfg, net


def _positions(cfg, n: int = 64):
    """Boundary cards (n, C, R) and positions with dice of cfg's game, from a few random games."""
    from yamblab.agents.base import make_agent
    from yamblab.games.yamb.game import encode_yamb_boundary

    g = cfg.game_obj
    b = g.new_batch(8, seed=2)
    agent = make_agent("random", g, seed=2)
    cards, dice = [], []
    for step in range(40):
        if step % 5 == 0:
            dice.append(g.encode(b))
        cards.append(np.asarray(b.card).copy())
        b.step(agent.act(b))
    return encode_yamb_boundary(g.rules, np.concatenate(cards)[:n]), dice


def test_a_wider_boundary_head_computes_what_the_narrower_one_did():
    from yamblab.model.checkpoint import transfer_weights

    cfg, old = _net({"model.boundary_hidden": 16}, seed=0)
    _, new = _net({"model.boundary_hidden": 40}, seed=1)
    enc, with_dice = _positions(cfg)
    before = new.predict_value(enc)
    widened = transfer_weights(new, old.state_dict())
    assert set(widened) == {f"boundary_head.mlp.{i}.{k}" for i in (0, 2) for k in ("weight", "bias")} | {
        "boundary_head.mlp.4.weight"}
    got, want = new.predict_value(enc), old.predict_value(enc)
    assert not np.allclose(before, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)           # points; float32 sums in another order
    for e in with_dice:                                                     # the transformer's outputs: copied
        for a, b in zip(new.predict(e), old.predict(e)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
    mlp = new.boundary_head.mlp
    assert torch.all(mlp[2].weight[:16, 16:] == 0) and torch.all(mlp[4].weight[:, 16:] == 0)
    assert torch.any(mlp[2].weight[16:] != 0)                              # the new units have inputs
    # and they learn: their outgoing weights get gradients at once
    x = torch.as_tensor(np.ascontiguousarray(enc.columns, np.float32))
    f = torch.as_tensor(np.ascontiguousarray(enc.column_features, np.float32))
    new.boundary_head(x, f).sum().backward()
    assert torch.any(mlp[4].weight.grad[:, 16:] != 0)


@pytest.mark.parametrize("old,new,match", [
    ({"model.boundary_hidden": 40}, {"model.boundary_hidden": 16}, "only the boundary head's hidden width"),
    ({"model.boundary_features": "card"}, {}, "boundary_head.mlp.0.weight"),
    ({"size": "small"}, {}, "is another network: it has no place here for trunk"),
    ({"model.boundary_head": False}, {}, "is another network: it lacks boundary_head"),
])
def test_weights_that_cannot_be_widened_are_refused(old, new, match):
    from yamblab.model.checkpoint import transfer_weights

    _, a = _net(old, seed=0)
    _, b = _net(new, seed=1)
    keep = {k: v.clone() for k, v in b.state_dict().items()}
    with pytest.raises(ConfigError, match=match):
        transfer_weights(b, a.state_dict(), "trained.pt")
    assert all(torch.equal(keep[k], v) for k, v in b.state_dict().items())   # nothing half-loaded


def _trained_checkpoint(tmp_path, tiny_config, overrides=None):
    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun

    cfg = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                        "runtime.iterations": 1, "runtime.eval_games": 2,
                                        "train.games_per_iteration": 2, **(overrides or {})}, "test")
    run = TrainingRun(cfg, tmp_path / "base", progress=False)
    run.run()
    run.finish()
    return cfg, tmp_path / "base" / "checkpoint.pt"


def test_a_run_starts_from_the_checkpoints_playing_network(tmp_path, tiny_config):
    from yamblab.model.checkpoint import load_checkpoint
    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun

    cfg, path = _trained_checkpoint(tmp_path, tiny_config)
    trained = load_checkpoint(path)["learner"]
    warm = apply_overrides(cfg, {"train.init_from": str(path), "train.seed": 5}, "test")
    run = TrainingRun(warm, tmp_path / "warm", progress=False)
    learner = run.backend.learner.learner
    assert learner.steps == 0 and run.iteration == 0
    for name, w in learner.net.state_dict().items():
        assert torch.equal(w, trained["ema"][name]) and torch.equal(learner.ema.model.state_dict()[name], w)
    assert any(not torch.equal(trained["ema"][k], trained["model"][k]) for k in trained["ema"])   # the EMA, not the model
    run.run()
    assert run.iteration == 1 and learner.steps > 0
    run.finish()
    # a resumed warm run carries on from its own checkpoint, even with the first one gone
    path.unlink()
    again = TrainingRun(warm, tmp_path / "warm", resume=True, progress=False)
    assert again.iteration == 1 and again.backend.learner.learner.steps == learner.steps


@pytest.mark.parametrize("setting,said", [
    ({"model.value_max": 150.0}, "model.value_max"),                 # in no weight, but it scales the values
    ({"model.boundary_features": "card"}, "model.boundary_features"),
    ({"model.boundary_hidden": 8}, "would drop some"),
])
def test_a_warm_start_into_another_network_names_the_setting(tmp_path, tiny_config, setting, said):
    from yamblab.training.config import apply_overrides
    from yamblab.training.runtime import TrainingRun

    base = {"model.boundary_head": True, "model.boundary_hidden": 16}
    cfg, path = _trained_checkpoint(tmp_path, tiny_config, base)
    warm = apply_overrides(cfg, {"train.init_from": str(path), **setting}, "test")
    with pytest.raises(YamblabError, match=said):
        TrainingRun(warm, tmp_path / "w", progress=False)
    assert not (tmp_path / "w").exists()


def test_a_warm_start_from_another_game_or_no_file_is_one_clear_error(tmp_path, tiny_config):
    from yamblab.training.config import apply_overrides, load_run_config
    from yamblab.training.runtime import TrainingRun

    _, path = _trained_checkpoint(tmp_path, tiny_config)
    yamb = load_run_config(ROOT / "configs" / "yamb-tiny.yaml", {"runtime.run_dir": str(tmp_path / "runs"),
                                                                  "runtime.actors": "in_process",
                                                                  "runtime.max_policy_lag": 0,
                                                                  "train.init_from": str(path)})
    with pytest.raises(YamblabError, match="learned yahtzee .* this run plays yamb"):
        TrainingRun(yamb, tmp_path / "y", progress=False)
    missing = apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                            "train.init_from": str(tmp_path / "nope.pt")}, "test")
    with pytest.raises(YamblabError, match="train.init_from: no checkpoint file at .*nope.pt"):
        TrainingRun(missing, tmp_path / "m", progress=False)


def test_the_cli_refuses_a_bad_checkpoint_to_start_from_before_making_a_run_folder(tmp_path):
    from typer.testing import CliRunner

    from yamblab.cli.main import app

    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    runs = tmp_path / "runs"
    for bad, said in ((tmp_path / "missing.pt", "no checkpoint file at"), (tmp_path / "junk.pt", "not a yamblab checkpoint")):
        res = CliRunner().invoke(app, ["train", "-c", str(ROOT / "configs" / "yahtzee-tiny.yaml"),
                                       "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                                       "--set", f"runtime.run_dir={runs}", "--set", f"train.init_from={bad}"])
        assert res.exit_code != 0 and said in res.output and "Traceback" not in res.output
        assert not runs.exists() or not any(runs.iterdir())
