"""Recorded studies keep their trials: a change to the run config (a setting added, renamed or
retired, a default moved) must not move the digest of a shipped config or of the main job's
trials, or a resumed sweep would run its arms again. When a change means to move one, update
the frozen value here and say so in the commit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the digests as recorded studies hold them (yamblab.sweeps.branch.config_digest)
FROZEN = {
    'jamb-cpu.yaml': 'f73f5f35ef6f',
    'yahtzee-cpu.yaml': 'ced2c6fe3db0',   # decisions_per_batch: 64 for policy_share 0.212 (same draws)
    'yahtzee-tiny.yaml': '2e5a11e29e7d',
    'yamb-cpu.yaml': '07a12a4387a8',
    'yamb-free-cpu.yaml': '645725e0d4ed',
    'yamb-gpu.yaml': '139b4ec0700b',
    'yamb-tiny.yaml': '4910ae5ae8fb',
    'ablation-small.yaml:base': '982866c83d62',
    'ablation-small.yaml:baseline/0': '48044e0d5ba3',
    'ablation-small.yaml:baseline/1': '70d51523b9c0',
    'ablation-small.yaml:baseline/2': 'a14b2f8ebaec',
    'ablation-small.yaml:baseline/3': '877f07eaa478',
    'ablation-small.yaml:baseline/4': 'a0aec55b65bc',
    'ablation-small.yaml:baseline/5': '1a068502c6ec',
    'ablation-small.yaml:no-kl-targets/0': '93edbd43fd95',
    'ablation-small.yaml:no-kl-targets/1': '2160662d3a24',
    'ablation-small.yaml:no-kl-targets/2': '5b814495322f',
    'ablation-small.yaml:no-kl-targets/3': '21bd472458f1',
    'ablation-small.yaml:no-kl-targets/4': '3e392cae9692',
    'ablation-small.yaml:no-kl-targets/5': 'e1c176a50615',
    'ablation-small.yaml:no-entropy-bonus/0': '9cdb9ceefa76',
    'ablation-small.yaml:no-entropy-bonus/1': '3413513d09bc',
    'ablation-small.yaml:no-entropy-bonus/2': '460507c26579',
    'ablation-small.yaml:no-entropy-bonus/3': 'a913c7aad8a1',
    'ablation-small.yaml:no-entropy-bonus/4': '0cb3265aa43e',
    'ablation-small.yaml:no-entropy-bonus/5': '1e443f304087',
    'ablation-small.yaml:no-hold-correction/0': '506e2dbd468a',
    'ablation-small.yaml:no-hold-correction/1': 'ebe1616f115d',
    'ablation-small.yaml:no-hold-correction/2': '02ba3c4a7977',
    'ablation-small.yaml:no-hold-correction/3': '45dd56a7e67c',
    'ablation-small.yaml:no-hold-correction/4': '521446e4960e',
    'ablation-small.yaml:no-hold-correction/5': 'b374b77dcb56',
    'ablation-small.yaml:outcome-value-targets/0': '634361027041',
    'ablation-small.yaml:outcome-value-targets/1': 'ce797d6a9f93',
    'ablation-small.yaml:outcome-value-targets/2': 'bd3ab1f6408c',
    'ablation-small.yaml:outcome-value-targets/3': '8ec036566e03',
    'ablation-small.yaml:outcome-value-targets/4': '93af2f664c9e',
    'ablation-small.yaml:outcome-value-targets/5': '65f2c00c22c1',
}


def _digests() -> dict[str, str]:
    from yamblab.sweeps.branch import base_config, config_digest
    from yamblab.sweeps.spec import load_sweep
    from yamblab.training.config import apply_overrides, load_run_config

    out = {p.name: config_digest(load_run_config(p)) for p in sorted((ROOT / "configs").glob("*.yaml"))}
    name = "ablation-small.yaml"         # the main job
    spec, base = load_sweep(ROOT / "experiments" / name)[:2]
    out[f"{name}:base"] = config_digest(base_config(spec, base))
    for arm, ov in spec.arm_overrides().items():
        for seed in spec.seeds:
            out[f"{name}:{arm}/{seed}"] = config_digest(
                apply_overrides(base, {**spec.overrides, **ov, "train.seed": seed}))
    return out


def test_no_change_moves_a_recorded_digest():
    now = _digests()
    moved = {k: (v, now.get(k)) for k, v in FROZEN.items() if now.get(k) != v}
    assert not moved, f"digests moved (recorded studies would rerun these arms): {moved}"
    assert set(now) >= set(FROZEN)
