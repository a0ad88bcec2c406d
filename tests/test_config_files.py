"""Every shipped run config and sweep spec validates (so a typo can't reach a user)."""

from pathlib import Path

import pytest

from yamblab.sweeps.spec import load_sweep
from yamblab.training.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_run_configs_validate(path):
    cfg = load_run_config(path)
    assert cfg.runtime.iterations >= 1 and cfg.rules_obj is not None


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").rglob("*.yaml")), ids=lambda p: p.name)
def test_sweep_specs_validate(path):
    spec, base = load_sweep(path)
    assert spec.name and (spec.arm_overrides() if spec.kind == "grid" else spec.params)


def test_cpu_config_learns_from_self_play_alone():
    """The 30-minute CPU config must not use the oracle or bot games as teachers."""
    cfg = load_run_config(ROOT / "configs" / "yahtzee-cpu.yaml")
    assert cfg.train.distill_oracle is False and cfg.train.bot_share == 0.0
    assert cfg.runtime.time_budget_minutes is not None and cfg.runtime.time_budget_minutes <= 30


def test_an_empty_mapping_override_clears_instead_of_being_ignored():
    """``runtime.eval_modes: {}`` in a sweep's overrides drops the base config's extra modes
    (merged, it would change nothing and be silently ignored); a non-empty one still merges."""
    spec, base = load_sweep(ROOT / "experiments" / "archive" / "transformer-value.yaml")
    assert base.runtime.eval_modes == {}
    cpu = load_run_config(ROOT / "configs" / "yahtzee-cpu.yaml", {"runtime.eval_modes": {"one_step": 20}})
    assert cpu.runtime.eval_modes == {"none": 500, "one_step": 20}


@pytest.mark.parametrize("path, features, needle", [
    ("yahtzee-cpu.yaml", "card_middle", "reads Yamb's middle term"),
    ("yamb-free-cpu.yaml", "yahtzee", "reads a Yahtzee card"),
])
def test_boundary_features_of_the_other_game_are_refused_by_name(path, features, needle):
    from yamblab.errors import ConfigError

    with pytest.raises(ConfigError, match=needle):
        load_run_config(ROOT / "configs" / path, {"model.boundary_features": features})
    assert load_run_config(ROOT / "configs" / path, {"model.boundary_features": "card"}).model.boundary_features == "card"


def test_one_ray_version_for_the_driver_and_the_cluster():
    """The driver (pyproject.toml's pin), the image built from it and the RayJob's cluster
    (``rayVersion``) run one Ray version: Ray refuses a driver of another version."""
    import re

    import yaml

    pin = re.search(r'"ray\[default\]==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin, "pyproject.toml pins ray[default]==X.Y.Z"
    job = yaml.safe_load((ROOT / "infra" / "rayjob.yaml").read_text())
    assert job["spec"]["rayClusterSpec"]["rayVersion"] == pin.group(1)
    docker = (ROOT / "infra" / "Dockerfile").read_text()
    assert not re.search(r"pip install[^\n]*\bray\b", docker), "the image takes Ray from pyproject.toml"


def test_cpu_config_draws_decisions_on_top_of_the_value_samples():
    """configs/yahtzee-cpu.yaml's learner steps hold 64 decisions and the 238 value-side samples
    a uniform batch of 256 gave (about 7.3 % of its positions have a decision), at the optimiser
    steps per new position of uniform 256-batches at replay ratio 1.5 (1.77 rounds 1.5 × 302 /
    256 = 1.7695 up: 200 steps where they take 199)."""
    import math

    cfg = load_run_config(ROOT / "configs" / "yahtzee-cpu.yaml").train
    decisions = int(round(cfg.batch_size * cfg.policy_share_at(0.0)))
    assert decisions == 64 == cfg.decisions_per_batch and abs(cfg.batch_size - decisions - 256 * (1 - 0.073)) < 1
    assert decisions == int(round(cfg.batch_size * 0.212))   # the share it stated before: the same draws
    for new in (33_957, 16_942, 1_000):      # one iteration of 64 games, of 32, a few games
        assert abs(cfg.steps_for(new) - math.ceil(1.5 * new / 256)) <= 1


def test_decisions_per_batch_derives_the_share_and_refuses_a_second_say():
    cpu = ROOT / "configs" / "yahtzee-cpu.yaml"
    wider = load_run_config(cpu, {"train.batch_size": 400}).train
    assert wider.policy_share_at(0.0) == pytest.approx(64 / 400) and wider.policy_share is None
    uniform = load_run_config(cpu, {"train.decisions_per_batch": None}).train
    assert uniform.policy_share_at(0.5) is None
    with pytest.raises(ValueError, match="decisions_per_batch and train.policy_share both"):
        load_run_config(cpu, {"train.policy_share": 0.3})
    with pytest.raises(ValueError, match=r"decisions_per_batch \(64\) is more than train.batch_size \(32\)"):
        load_run_config(cpu, {"train.batch_size": 32})
    rising = load_run_config(cpu, {"train.policy_share_final": 0.4}).train
    assert rising.policy_share_at(0.0) == pytest.approx(64 / 302) and rising.policy_share_at(1.0) == pytest.approx(0.4)


def test_config_and_spec_headers_are_at_most_five_lines():
    """A config or spec opens with at most five lines of comment (what it is, where it is
    explained); its history lives in the docs."""
    long = []
    for path in sorted([*(ROOT / "configs").glob("*.yaml"), *(ROOT / "experiments").rglob("*.yaml")]):
        head = 0
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            head += 1
        if head > 5:
            long.append(f"{path.relative_to(ROOT)} ({head} lines)")
    assert not long, f"headers over five lines: {long}"
