"""Throughput: the transformer skipped on boundary positions, the replay ratio, the fused health
metrics and the actors' resources chosen from the machine (pure logic, no Ray)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from yamblab.errors import ConfigError
from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.learners.config import SearchConfig, TrainConfig
from yamblab.learners.health import grad_norms
from yamblab.learners.learner import Learner
from yamblab.learners.losses import compute_losses
from yamblab.learners.selfplay import SelfPlay
from yamblab.model.config import ModelConfig
from yamblab.training.config import RuntimeConfig
from yamblab.training.resources import resolve_resources

HEAD = ModelConfig.preset("tiny", boundary_head=True, boundary_hidden=32)
TRAIN = TrainConfig(value_target_mix=1.0, successor_samples=2, batch_size=64)


@pytest.fixture(scope="module")
def batch():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    sp = SelfPlay(HEAD, TRAIN, SearchConfig(), OFFICIAL)
    samples, _ = sp.play_games(3, seed=2)
    torch.set_num_threads(old)
    return samples


def test_boundary_rows_skip_the_transformer_and_the_rest_is_unchanged(batch):
    torch.manual_seed(0)
    learner = Learner(HEAD, TRAIN)
    net = learner.net.eval()
    x, t = batch.to_torch()
    nod = x.dice[:, 0] == 0
    assert nod.any() and (~nod).any()               # a mixed batch: turn starts and decisions
    with torch.no_grad():
        split = net(x)
        full = net._forward_all(x, False)           # every row through the transformer
    assert torch.equal(split.trunk_rows, ~nod)
    assert torch.allclose(split.logits[~nod], full.logits[~nod], atol=1e-5)
    assert torch.allclose(split.value[~nod], full.value[~nod], atol=1e-4)
    assert torch.allclose(split.bonus_logit[~nod], full.bonus_logit[~nod], atol=1e-5)
    # boundary rows: the boundary head's value, no legal action, no transformer output
    assert torch.allclose(split.value[nod], split.boundary_value[nod])
    assert torch.allclose(split.value[nod], full.value[nod], atol=1e-4)
    assert (split.value_logits[nod] == 0).all() and (split.bonus_logit[nod] == 0).all()
    # the losses of the split forward equal the full forward's, but for the aux bonus term,
    # which the split one takes on the decision rows only
    net.train()
    ls = compute_losses(net(x), x, t, TRAIN, net.bin_centers, HEAD.value_max)
    lf = compute_losses(net._forward_all(x), x, t, TRAIN, net.bin_centers, HEAD.value_max)
    for k in ("policy", "value", "boundary", "entropy", "aux_straight"):
        assert float(ls[k].detach()) == pytest.approx(float(lf[k].detach()), rel=1e-4, abs=1e-5), k
    # the total: the weighted terms, less the entropy bonus
    want = (TRAIN.value_coef * ls["value"] + TRAIN.aux_coef * (ls["aux_bonus"] + ls["aux_straight"])
            + ls["policy"] - TRAIN.entropy_coef * ls["entropy"])
    assert float(ls["total"]) == pytest.approx(float(want), rel=1e-5)
    # a batch of boundary rows alone does not touch the transformer's weights
    net.zero_grad()
    out = net(x[nod])
    only = compute_losses(out, x[nod], {k: v[nod] for k, v in t.items()}, TRAIN, net.bin_centers,
                          HEAD.value_max)
    assert set(only) == {"total", "boundary"}        # no term reported for positions it lacks
    only["total"].backward()
    assert all(p.grad is None for p in net.trunk.parameters())
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in net.boundary_head.parameters())


def test_replay_ratio_sets_the_optimiser_steps(batch):
    cfg = TrainConfig(replay_ratio=2.5, batch_size=64)
    learner = Learner(HEAD, cfg)
    assert cfg.steps_for(0) == 0
    assert cfg.steps_for(1) == 1
    assert cfg.steps_for(1000) == math.ceil(2.5 * 1000 / 64) == 40
    assert cfg.samples_for(1000) == 40 * 64 and cfg.samples_for(0) == 0
    m = learner.train_iteration(batch.take(slice(0, 128)), health=False)
    assert learner.steps == 2 and m["samples"] == 128 and m["samples_total"] == 128
    assert learner.state_dict()["samples_trained"] == 128


def test_epochs_is_refused_with_its_replacement_named():
    with pytest.raises(ValidationError, match="replaced by train.replay_ratio"):
        TrainConfig(epochs=2)
    with pytest.raises(ValidationError):
        TrainConfig(replay_ratio=0)


def test_fused_gradient_norms_match_a_per_parameter_sum(batch):
    learner = Learner(HEAD, TRAIN)
    x, t = batch.to_torch()
    out = learner.net(x)
    compute_losses(out, x, t, TRAIN, learner.net.bin_centers, HEAD.value_max)["total"].backward()
    got = grad_norms(learner.net)
    sq = 0.0
    for part in ("tokenizer", "trunk", "policy_head"):
        s = sum(float(p.grad.double().pow(2).sum()) for p in getattr(learner.net, part).parameters()
                if p.grad is not None)
        assert got[f"grad_norm/{part}"] == pytest.approx(math.sqrt(s), rel=1e-4)
    for p in learner.net.parameters():
        if p.grad is not None:
            sq += float(p.grad.double().pow(2).sum())
    # every part is counted, the boundary head too
    head = sum(float(p.grad.double().pow(2).sum()) for p in learner.net.boundary_head.parameters()
               if p.grad is not None)
    assert head > 0
    assert got["grad_norm/boundary_head"] == pytest.approx(math.sqrt(head), rel=1e-4)
    assert got["grad_norm"] == pytest.approx(math.sqrt(sq), rel=1e-4)


@pytest.mark.parametrize("cpus,gpu,workers,worker_cpus,learner,evaluator", [
    (2, False, 1, 1.0, 0.75, 0.25),      # a 2-core laptop or CI box: both cores busy
    (1, False, 1, 0.5, 0.25, 0.25),      # a sweep trial of one CPU
    (8, False, 4, 1.0, 3.0, 1.0),
    (16, True, 14, 1.0, 1.0, 1.0),       # a GPU node: the learner feeds the GPU
])
def test_auto_resources_fill_the_machine(cpus, gpu, workers, worker_cpus, learner, evaluator):
    r = resolve_resources(RuntimeConfig(), cpus, gpu)
    assert (r.workers, r.worker_cpus, r.learner_cpus, r.eval_cpus) == (workers, worker_cpus, learner, evaluator)
    assert r.total == pytest.approx(cpus)
    assert r.learner_gpu is gpu
    assert f"{workers} self-play worker" in r.describe()


def test_explicit_resources_are_kept_and_overcommitment_is_refused():
    rt = RuntimeConfig(workers=2, worker_cpus=0.5, learner_cpus=0.5, eval_cpus=0.5)
    r = resolve_resources(rt, 4, False)
    assert (r.workers, r.worker_cpus, r.learner_cpus, r.eval_cpus) == (2, 0.5, 0.5, 0.5)
    # explicit learner and evaluator, automatic workers: the rest, one worker per CPU
    r = resolve_resources(RuntimeConfig(learner_cpus=1, eval_cpus=1), 6, False)
    assert (r.workers, r.worker_cpus) == (4, 1.0)
    with pytest.raises(ConfigError, match="declares 3 CPUs.*may use 2"):
        resolve_resources(RuntimeConfig(workers=2, worker_cpus=1, learner_cpus=0.5, eval_cpus=0.5), 2, False)
    with pytest.raises(ConfigError, match="leave no CPU for self-play"):
        resolve_resources(RuntimeConfig(learner_cpus=1.5, eval_cpus=0.5), 2, False)
    with pytest.raises(ValidationError):
        RuntimeConfig(workers=0)
    with pytest.raises(ValidationError):
        RuntimeConfig(worker_cpus="many")
    assert np.isclose(resolve_resources(RuntimeConfig(), 2, False).threads(0.75), 1)


def test_learner_threads_default_to_its_cpus_and_can_be_raised():
    assert resolve_resources(RuntimeConfig(), 2, False).learner_threads == 1
    assert resolve_resources(RuntimeConfig(), 8, False).learner_threads == 3
    r = resolve_resources(RuntimeConfig(learner_threads=2), 2, False)
    assert r.learner_threads == 2 and r.learner_cpus == 0.75
    assert "learner 0.75 CPU (2 threads)" in r.describe()
    with pytest.raises(ValidationError):
        RuntimeConfig(learner_threads=0)


def test_cosine_learning_rate_schedule():
    const = TrainConfig(lr=2e-3)
    assert const.lr_at(0.0) == const.lr_at(0.7) == 2e-3
    cos = TrainConfig(lr=2e-3, lr_schedule="cosine", lr_final=0.1)
    assert cos.lr_at(0.0) == pytest.approx(2e-3)
    assert cos.lr_at(0.5) == pytest.approx(2e-3 * (0.1 + 0.9 * 0.5))
    assert cos.lr_at(1.0) == pytest.approx(2e-4)
    assert cos.lr_at(7.0) == pytest.approx(2e-4) and cos.lr_at(-1.0) == pytest.approx(2e-3)
    lrs = [cos.lr_at(p) for p in np.linspace(0, 1, 11)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    with pytest.raises(ValidationError):
        TrainConfig(lr_schedule="step")


@pytest.mark.parametrize("name, start, final", [("value_target_mix", 0.7, 1.0), ("policy_share", 0.07, 0.3)])
def test_annealed_settings_follow_the_learning_rate_clock(name, start, final):
    """train.value_target_mix_final (λ of the value targets) and train.policy_share_final (the
    share of decisions in the learner's draws): the setting moves from its start to the final
    value along a half cosine of the run's progress (clipped to [0, 1]); without a final value it
    stays put; a final value outside the setting's range is refused."""
    at = lambda cfg, p: getattr(cfg, f"{name}_at")(p)                   # noqa: E731
    assert at(TrainConfig(**{name: start}), 0.9) == start
    cfg = TrainConfig(**{name: start, f"{name}_final": final})
    assert at(cfg, 0.0) == pytest.approx(start)
    assert at(cfg, 0.5) == pytest.approx((start + final) / 2)           # the cosine's midpoint: the mean
    assert at(cfg, 1.0) == pytest.approx(final)
    assert at(cfg, -2.0) == pytest.approx(start) and at(cfg, 3.0) == pytest.approx(final)
    values = [at(cfg, p) for p in np.linspace(0, 1, 11)]
    assert all(a <= b for a, b in zip(values, values[1:]))
    with pytest.raises(ValidationError):
        TrainConfig(**{name: start, f"{name}_final": 1.5})


def test_a_final_policy_share_needs_a_starting_one():
    """Without train.policy_share the draws are uniform, and a final share without a starting
    one is refused, naming both."""
    assert TrainConfig().policy_share_at(0.3) is None
    with pytest.raises(ValidationError, match="policy_share_final.*needs.*train.policy_share"):
        TrainConfig(policy_share_final=0.3)


def test_self_play_takes_the_value_target_mix_it_is_given():
    """play_games(value_target_mix=λ) overrides the config's λ, and the targets are linear in
    it: λ = 0.5 lies halfway between the outcome targets (λ = 0) and the search values (λ = 1)
    on the same games."""
    sp = SelfPlay(HEAD, TrainConfig(value_target_mix=0.5), SearchConfig(depth="full_turn"), OFFICIAL)
    outcome, _ = sp.play_games(2, seed=4, value_target_mix=0.0)
    searched, _ = sp.play_games(2, seed=4, value_target_mix=1.0)
    half, _ = sp.play_games(2, seed=4)
    np.testing.assert_array_equal(outcome.dice, searched.dice)            # the same games
    assert np.abs(outcome.value_target - searched.value_target).max() > 1.0
    np.testing.assert_allclose(half.value_target, 0.5 * (outcome.value_target + searched.value_target),
                               rtol=1e-5, atol=1e-3)


def test_the_learner_trains_at_the_rate_it_is_given(batch):
    learner = Learner(HEAD, TrainConfig(batch_size=64, lr=1e-3))
    m = learner.train_iteration(batch.take(slice(0, 64)), health=False, lr=3e-4)
    assert m["lr"] == pytest.approx(3e-4)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(3e-4)
    with pytest.raises(ValueError, match="finite positive"):
        learner.set_lr(float("nan"))


def test_split_steps_group_the_positions_by_kind(batch):
    """train.decision_batch_size: boundary-head steps on positions without dice, transformer
    steps on positions with dice, each position at most once, the two kinds interleaved."""
    cfg = TrainConfig(batch_size=16, decision_batch_size=8)
    learner = Learner(HEAD, cfg)
    x, _ = batch.to_torch()
    with_dice = x.dice[:, 0] != 0
    nb, nd = int((~with_dice).sum()), int(with_dice.sum())
    assert nb >= 32 and nd >= 16
    steps = learner._split_batches(with_dice)
    kinds = [bool(with_dice[idx].all()) for idx in steps]
    assert all(bool(with_dice[idx].all()) or bool((~with_dice[idx]).all()) for idx in steps)   # never mixed
    assert kinds.count(False) == nb // 16 and kinds.count(True) == nd // 8
    assert all(len(idx) == (8 if k else 16) for idx, k in zip(steps, kinds))
    rows = torch.cat(steps)
    assert len(set(rows.tolist())) == len(rows)                       # no position twice
    # interleaved: the decision steps are spread over the pass, not bunched at one end
    where = [i for i, k in enumerate(kinds) if k]
    assert where[0] < len(steps) // 2 < where[-1]


def test_split_steps_train_each_part_on_its_own_kind(batch):
    torch.manual_seed(0)
    cfg = TrainConfig(batch_size=16, decision_batch_size=8, value_target_mix=1.0)
    learner = Learner(HEAD, cfg)
    x, _ = batch.to_torch()
    with_dice = (x.dice[:, 0] != 0).numpy()
    before = {k: v.clone() for k, v in learner.net.state_dict().items()}
    m = learner.train_iteration(batch.take(np.flatnonzero(~with_dice)[:64]), health=False)
    after = learner.net.state_dict()
    # boundary rows alone: four boundary-head steps, the transformer untouched
    assert learner.steps == 4 and m["samples"] == 64
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("trunk."))
    assert not all(torch.equal(before[k], after[k]) for k in before if k.startswith("boundary_head."))
    assert "boundary" in m and "policy" not in m and "value" not in m
    # decisions alone: the boundary head untouched (no zero gradients, no AdamW drift)
    before = {k: v.clone() for k, v in learner.net.state_dict().items()}
    m = learner.train_iteration(batch.take(np.flatnonzero(with_dice)[:32]), health=False)
    after = learner.net.state_dict()
    assert learner.steps == 8
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("boundary_head."))
    assert not all(torch.equal(before[k], after[k]) for k in before if k.startswith("trunk."))
    assert "policy" in m and "boundary" not in m and m["policy"] > 0
    # a mixed draw: both kinds, each loss the mean over its own steps
    m = learner.train_iteration(batch, health=False)
    assert m["policy"] > 0 and m["boundary"] > 0 and m["ema_updates"] == learner.steps


def test_split_steps_are_refused_where_they_cannot_apply():
    from yamblab.training.config import RunConfig

    with pytest.raises(ValidationError, match="needs model.boundary_head"):
        RunConfig(game="yahtzee", train={"decision_batch_size": 64})
    RunConfig(game="yahtzee", model={"boundary_head": True}, train={"decision_batch_size": 64})
