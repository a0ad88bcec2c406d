"""The network: shapes for every preset, masking, config validation, ablation switches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from yamblab.errors import UnknownVariantError
from yamblab.games.encoding import N_ACTIONS, EncodedBatch, encode_yahtzee
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.model.config import PRESETS, ModelConfig
from yamblab.model.network import YambNet, build_model
from yamblab.model.tokenizer import Inputs, longest_straight, score_features


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def random_positions(n: int, seed: int = 0) -> EncodedBatch:
    """Yahtzee positions from random play (every phase of the game)."""
    b = new_batch(n, OFFICIAL, seed=seed)
    encs = []
    step = 0
    while not b.done.all():
        e = encode_yahtzee(b, OFFICIAL)
        live = ~b.done
        encs.append(EncodedBatch(**{k: getattr(e, k)[live] for k in e.__dataclass_fields__}))
        step += 1
        b.step(b.random_actions(seed, step))
    return EncodedBatch(**{k: np.concatenate([getattr(e, k) for e in encs]) for k in encs[0].__dataclass_fields__})


def yamb_like(n: int, seed: int = 0) -> EncodedBatch:
    """Synthetic positions that use all 8 columns, 16 rows, 6 dice and announcements."""
    rng = np.random.default_rng(seed)
    e = EncodedBatch.empty(n)
    e.columns[..., 0] = rng.random((n, 8, 16)) < 0.5
    e.columns[..., 1] = e.columns[..., 0] * rng.integers(0, 80, (n, 8, 16)) / 80
    e.column_type[:] = rng.integers(0, 9, (n, 8))
    e.column_features[:] = rng.random((n, 8, 4))
    e.dice[:] = rng.integers(1, 7, (n, 6))
    e.state[np.arange(n), rng.integers(0, 6, n)] = 1
    e.legal[:] = rng.random((n, N_ACTIONS)) < 0.3
    e.legal[:, 0] = True
    return e


@pytest.mark.parametrize("preset", list(PRESETS))
def test_shapes_for_every_preset(preset):
    net = build_model(preset, seed=0)
    for enc in (random_positions(4), yamb_like(7)):
        x = Inputs.from_encoded(enc)
        out = net(x)
        B = len(enc)
        assert out.logits.shape == (B, N_ACTIONS)
        assert out.value.shape == (B,)
        assert out.value_logits.shape == (B, net.cfg.value_bins)
        assert out.bonus_logit.shape == (B,)
        assert out.straight_logits.shape == (B, 7)
        assert torch.isfinite(out.value).all()
        assert ((out.value >= 0) & (out.value <= net.cfg.value_max)).all()


def test_seed_preset_matches_yoloyamb_size():
    cfg = ModelConfig.preset("seed")
    assert (cfg.d_model, cfg.n_heads, cfg.n_shared, cfg.n_policy, cfg.n_value, cfg.ffn_hidden) == (192, 4, 3, 3, 3, 512)
    n = build_model(cfg).n_parameters()
    assert 4.0e6 < n < 5.5e6          # the YoloYamb post: 4.7M at iteration 1000


def test_illegal_actions_get_zero_probability_and_are_never_chosen():
    net = build_model("tiny", seed=1)
    for enc in (random_positions(300, seed=2), yamb_like(2000, seed=3)):
        prior, value = net.predict(enc)
        assert prior.shape == (len(enc), N_ACTIONS)
        assert np.all(prior[~enc.legal] == 0.0)
        np.testing.assert_allclose(prior.sum(axis=1), 1.0, rtol=1e-5)
        choice = prior.argmax(axis=1)
        assert enc.legal[np.arange(len(enc)), choice].all()
        # even with huge random weights the mask holds
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(50.0)
    enc = yamb_like(500, seed=4)
    prior, _ = net.predict(enc)
    assert np.all(prior[~enc.legal] == 0.0)
    assert enc.legal[np.arange(len(enc)), prior.argmax(axis=1)].all()


@pytest.mark.parametrize("overrides", [
    dict(n_policy=0, n_value=0),                      # fully shared trunk
    dict(value_head="scalar"),
    dict(value_pool="mean"), dict(value_pool="query"),
    dict(hold_correction=False, score_features=False, aux_heads=False, qk_norm=False),
    dict(n_shared=0, n_policy=2, n_value=1),
])
def test_ablation_switches_build_and_run(overrides):
    cfg = ModelConfig.preset("tiny", **overrides)
    net = YambNet(cfg)
    out = net(Inputs.from_encoded(yamb_like(5)))
    assert out.logits.shape == (5, N_ACTIONS)
    assert out.value.shape == (5,)
    if cfg.value_head == "scalar":
        assert out.value_logits.shape == (5, 1)
    if not cfg.aux_heads:
        assert out.bonus_logit is None and net.aux is None
    if not cfg.hold_correction:
        assert net.policy_head.hold_correction is None


def test_config_validation():
    with pytest.raises(ValidationError):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValidationError):
        ModelConfig(bogus=1)
    with pytest.raises(ValidationError):
        ModelConfig(value_bins=1)
    with pytest.raises(ValidationError):
        ModelConfig(n_shared=0, n_policy=0, n_value=0)
    with pytest.raises(UnknownVariantError):
        ModelConfig.preset("huge")
    assert ModelConfig.preset("tiny", d_model=64).d_model == 64


def test_hold_logits_are_sums_of_votes_without_correction():
    net = YambNet(ModelConfig.preset("tiny", hold_correction=False))
    enc = random_positions(3)
    x = Inputs.from_encoded(enc)
    with torch.no_grad():
        out = net(x)
    holds = out.logits[:, 128:160]
    legal = x.legal[:, 128:160]
    rows = legal.all(dim=1)
    h = holds[rows]
    # pattern scores are additive in the dice: s(h) + s(~h) is the same for every pattern
    tot = h + h.flip(dims=[1])
    assert torch.allclose(tot, tot[:, :1].expand_as(tot), atol=1e-5)


def test_score_features_and_longest_straight():
    dice = torch.tensor([[3, 3, 5, 5, 5, 0], [2, 3, 4, 5, 6, 0], [1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0]])
    f = score_features(dice)
    assert f.shape == (4, 16)
    counts = f[:, :6] * 5
    assert counts[0].tolist() == [0, 0, 2, 0, 3, 0]
    assert f[0, 13] == 1 and f[1, 13] == 0          # full house
    assert f[1, 14] == 1 and f[1, 15] == 1          # small and large straight
    assert f[2, 12] == 1 and f[2, 13] == 1          # five of a kind (counts as a full house)
    assert torch.all(f[3] == 0)
    assert longest_straight(dice).tolist() == [1, 5, 1, 0]


def test_summary_lists_layers_and_parameter_count():
    from typer.testing import CliRunner

    from yamblab.cli.model import app

    res = CliRunner().invoke(app, ["summary", "--preset", "tiny"])
    assert res.exit_code == 0, res.output
    n = build_model("tiny").n_parameters()
    assert f"{n:,}" in res.output
    assert "trunk" in res.output and "value_head" in res.output
    bad = CliRunner().invoke(app, ["summary", "--preset", "nope"])
    assert bad.exit_code != 0


def test_boundary_head_values_boundary_positions():
    """With ``boundary_head`` the value of a position without dice is the boundary head's,
    ``predict_value`` on boundary-only batches runs only that head, and the boundary loss
    trains it on boundary rows."""
    import numpy as np
    import torch

    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.games.yahtzee.rules import OFFICIAL
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.losses import compute_losses
    from yamblab.model.config import ModelConfig
    from yamblab.model.network import YambNet
    from yamblab.model.tokenizer import Inputs
    from yamblab.games.encoding import encode_yahtzee
    from yamblab.search.expectimax import encode_boundary

    torch.manual_seed(0)
    net = YambNet(ModelConfig.preset("tiny", boundary_head=True)).eval()
    b = new_batch(4, OFFICIAL, seed=3)
    bnd = encode_boundary(b.box_scores, b.upper_raw, OFFICIAL)
    x = Inputs.from_encoded(bnd)
    with torch.no_grad():
        out = net(x)
    assert torch.allclose(out.value, out.boundary_value)
    np.testing.assert_allclose(net.predict_value(bnd), net.predict(bnd)[1], rtol=1e-5, atol=1e-4)
    dice = Inputs.from_encoded(encode_yahtzee(b, OFFICIAL))
    with torch.no_grad():
        assert net(dice).boundary_value is None          # positions with dice: the transformer alone
    net.train()
    t = {"policy": torch.zeros(4, 208), "has_policy": torch.zeros(4, dtype=torch.bool),
         "value": torch.full((4,), 200.0), "bonus": torch.zeros(4)}
    losses = compute_losses(net(x), x, t, TrainConfig(), net.bin_centers, net.cfg.value_max)
    assert losses["boundary"] > 0
    losses["total"].backward()
    assert net.boundary_head.mlp[-1].weight.grad.abs().sum() > 0   # a new card: all-zero features


@pytest.mark.parametrize("config", ["yahtzee-cpu", "jamb-cpu", "yamb-tiny"])
def test_value_pass_gives_forwards_values_without_the_policy_branch(config):
    """A search leaf's value skips the policy branch and head: the same values as the whole
    forward pass, bit for bit, on positions with dice and on a batch mixed with turn starts
    (which a boundary head values)."""
    from dataclasses import fields
    from pathlib import Path

    from yamblab.model.network import YambNet
    from yamblab.training.config import load_run_config

    cfg = load_run_config(Path(__file__).resolve().parents[1] / "configs" / f"{config}.yaml")
    torch.manual_seed(0)
    net = YambNet(cfg.model).eval()
    game = cfg.game_obj
    batch = game.new_batch(48, seed=1)
    enc = game.encode(batch)
    starts = game.encode_boundary(batch, np.arange(8))
    mixed = EncodedBatch(**{f.name: np.concatenate([getattr(enc, f.name), getattr(starts, f.name)])
                            for f in fields(EncodedBatch)})
    for e in (enc, mixed):
        assert np.array_equal(net.predict_value(e), net.predict(e)[1])
