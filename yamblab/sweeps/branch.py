"""Branched sweeps: one trained base run that every arm and training seed of a sweep continues.

An ablation whose arms each train from scratch for a few minutes judges a policy that has not
learned yet. A branched sweep (``branch_from`` in the spec, :class:`~yamblab.sweeps.spec.BranchSpec`)
trains the baseline once (or takes a checkpoint), then starts every trial from the base's
weights, EMA network, optimiser state and replay buffer, with its arm's idea switched on or off
and its own training seed, so it measures an idea's effect on an agent that has already
learned. The base is cached by the digest of its config under ``RUN_DIR/bases/``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from yamblab.errors import ConfigError
from yamblab.sweeps.spec import SweepConfig
from yamblab.training.config import RunConfig, apply_overrides

#: Network switches a branch may turn on or off on a trained base: the hold-correction head
#: and the auxiliary heads (a branch that turns one off drops its weights and their optimiser
#: state; one that turns it on starts it fresh: the hold correction at zero, so the policy is
#: unchanged at the branch point, and the auxiliary heads feed neither policy nor value).
SWITCHABLE_MODEL_FIELDS = ("hold_correction", "aux_heads")
#: Salt of a branch's replay-sampling generator (seeded by the trial's training seed).
BRANCH_SALT = 0xB4A9C4


def base_config(spec: SweepConfig, base: RunConfig) -> RunConfig:
    """The run config of a branched sweep's base: the baseline arm's config with the
    ``branch_from`` overrides, its seed and its length (iterations or minutes).

    Raises:
        ConfigError: a bad key in ``branch_from.overrides`` (named), or no ``branch_from``.
    """
    b = spec.branch_from
    if b is None:
        raise ConfigError(f"sweep {spec.name} has no branch_from")
    arms = spec.arm_overrides()
    baseline = spec.baseline_arm or next(iter(arms))
    # one layer at a time (a dotted key and a nested one for the same field never race), the
    # base's own length and seed last
    cfg = apply_overrides(base, spec.overrides, source=f"sweep {spec.name}: overrides")
    cfg = apply_overrides(cfg, arms[baseline], source=f"sweep {spec.name}: arms.{baseline}")
    cfg = apply_overrides(cfg, b.overrides, source=f"sweep {spec.name}: branch_from.overrides")
    return apply_overrides(cfg, {"train.seed": b.seed, "runtime.iterations": b.iterations or 1_000_000,
                                 "runtime.time_budget_minutes": b.minutes, "name": f"{spec.name}-base"},
                           source=f"sweep {spec.name}: branch_from")


#: what a run config's identity is made of, whatever its values (a game at its defaults is
#: still that game)
_IDENTITY = ("game", "rules", "preset", "columns", "size")


def config_digest(cfg: RunConfig) -> str:
    """A short hash of everything in a run config that can change its result.

    Only the game's identity and the settings that differ from the defaults of a config of the
    same game and network size enter it, so a setting added to yamblab later, at the default
    that behaves as before, never moves a recorded arm's digest. The run folder and the run's
    name are left out, so the same arm run from another folder keeps its digest; any other
    change (the arm's overrides, the sweep's ``overrides``, the base config) gives a new digest,
    and a resumed sweep runs that arm again.
    """
    ident = {k: getattr(cfg, k) for k in _IDENTITY}
    default = RunConfig.model_validate({k: v for k, v in ident.items() if v is not None})
    return digest_of(cfg.model_dump(mode="json"), default.model_dump(mode="json"))


def digest_of(values: dict, default: dict) -> str:
    """:func:`config_digest` of a config's dump ``values`` against the dump ``default`` of the
    default config of its game and size: a setting missing from ``values`` counts as at its
    default (a config recorded before the setting existed)."""
    from yamblab.training.configio import flatten

    mine, base = flatten(values), flatten(default)
    for k in ("name", "runtime.run_dir"):
        mine.pop(k, None)
        base.pop(k, None)
    missing = object()
    kept = {k: v for k, v in mine.items() if k in _IDENTITY or base.get(k, missing) != v}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:12]


def file_digest(path: str | Path) -> str:
    """A short SHA-256 of a file's bytes (a checkpoint base's identity)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def load_base(path: str | Path) -> tuple[dict, RunConfig]:
    """A training run's checkpoint as a branch base: its state (loaded once, for every trial)
    and the run config stored in it.

    Raises:
        ConfigError: the file does not exist, is damaged (named), or is not a training run's
            checkpoint (no run config or learner state: a snapshot).
    """
    import yaml

    from yamblab.actors.replay import REPLAY_DIR, check_segments
    from yamblab.errors import DamagedFileError
    from yamblab.model.checkpoint import load_checkpoint
    from yamblab.training.configio import validate

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"branch_from.checkpoint: no such file {path}"
                          + (" (a folder: name its checkpoint.pt)" if path.is_dir() else ""))
    try:
        state = load_checkpoint(path)
        # the base's positions sit beside it in replay/ (a checkpoint copied out alone lacks them)
        check_segments(path.parent / REPLAY_DIR, state.get("buffer", {}).get("segments") or [])
    except DamagedFileError as exc:
        raise ConfigError(f"branch_from.checkpoint: {exc}") from None
    if "config" not in state or "learner" not in state:
        raise ConfigError(f"branch_from.checkpoint: {path} is not a training run's checkpoint (no run "
                          "config or learner state in it; a snapshot cannot be branched from)")
    return state, validate(RunConfig, yaml.safe_load(state["config"]), str(path))


def check_branchable(spec: SweepConfig, base: RunConfig, base_cfg: RunConfig) -> None:
    """Refuse, before any work starts, an arm whose config cannot continue the base's run.

    A branch continues the base's network on the base's game: every arm must keep the game,
    its rules (preset, columns) and every network field except :data:`SWITCHABLE_MODEL_FIELDS`.

    Raises:
        ConfigError: naming the arm and each field it changes, with both values.
    """
    for arm, ov in spec.arm_overrides().items():
        cfg = apply_overrides(apply_overrides(base, spec.overrides, source=f"sweep {spec.name}: overrides"), ov,
                              source=f"sweep {spec.name}: arms.{arm}")
        bad = [f"{k}: {getattr(base_cfg, k)!r} in the base, {getattr(cfg, k)!r} here"
               for k in ("game", "rules", "preset", "columns") if getattr(cfg, k) != getattr(base_cfg, k)]
        mine, theirs = cfg.model.model_dump(), base_cfg.model.model_dump()
        bad += [f"model.{k}: {theirs[k]!r} in the base, {mine[k]!r} here" for k in mine
                if k not in SWITCHABLE_MODEL_FIELDS and mine[k] != theirs[k]]
        if cfg.runtime.replay_positions != base_cfg.runtime.replay_positions:
            bad.append(f"runtime.replay_positions: {base_cfg.runtime.replay_positions} in the base, "
                       f"{cfg.runtime.replay_positions} here (a branch continues the base's replay buffer)")
        if cfg.train.bot_share > 0:
            bad.append("train.bot_share: bot games taper from iteration 0 to train.bot_taper_iterations, "
                       "so a branch starting later gets none")
        if cfg.runtime.time_budget_minutes is not None:
            bad.append("runtime.time_budget_minutes: a branch runs runtime.iterations more iterations "
                       "(the base may be given minutes: branch_from.minutes)")
        if bad:
            raise ConfigError(
                f"sweep {spec.name}: arms.{arm} cannot branch from the base: {'; '.join(bad)}. A branched "
                f"arm continues the base's network on the base's game; only "
                f"{', '.join('model.' + f for f in SWITCHABLE_MODEL_FIELDS)} and the training and search "
                f"switches may change (or drop branch_from to train every arm from scratch)")


def _param_names(model_cfg) -> list[str]:
    from yamblab.model.network import YambNet

    return [n for n, p in YambNet(model_cfg).named_parameters() if p.requires_grad]


def adapt_learner_state(state: dict, model_cfg, seed: int = 0) -> dict:
    """A learner state (:meth:`~yamblab.learners.learner.Learner.state_dict`) made to fit the
    network config ``model_cfg``, which may differ from the state's own only in
    :data:`SWITCHABLE_MODEL_FIELDS`.

    Weights the new config lacks are dropped from the network, the EMA network and the
    optimiser state (AdamW's per-parameter moments, re-indexed by parameter name); weights it
    adds take a fresh network's initial values (seeded by ``seed``; the hold-correction head
    starts at zero, so the policy is unchanged) and no optimiser state.

    Raises:
        ConfigError: the configs differ in another field.
    """
    import torch

    from yamblab.model.config import ModelConfig
    from yamblab.model.network import YambNet

    old_cfg = ModelConfig(**state["model_config"])
    if old_cfg == model_cfg:
        return state
    a, b = old_cfg.model_dump(), model_cfg.model_dump()
    other = [k for k in a if a[k] != b[k] and k not in SWITCHABLE_MODEL_FIELDS]
    if other:
        raise ConfigError(f"cannot branch: the network differs from the base's in {', '.join(other)}")
    old_names, new_names = _param_names(old_cfg), _param_names(model_cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = YambNet(model_cfg).state_dict()

    def fit(weights: dict) -> dict:
        return {k: (weights[k] if k in weights else v) for k, v in fresh.items()}

    opt = state["optimizer"]
    index = {name: i for i, name in enumerate(old_names)}
    moments = {j: opt["state"][index[n]] for j, n in enumerate(new_names)
               if n in index and index[n] in opt["state"]}
    groups = [dict(g) for g in opt["param_groups"]]
    if len(groups) != 1:
        raise ConfigError("cannot branch: the base's optimiser has several parameter groups")
    groups[0]["params"] = list(range(len(new_names)))
    return {**state, "model_config": model_cfg.model_dump(), "model": fit(state["model"]),
            "ema": fit(state["ema"]), "optimizer": {"state": moments, "param_groups": groups}}


def branch_checkpoint(base_checkpoint: str | Path, cfg: RunConfig, dest: str | Path,
                      evaluate: str = "changed", state: dict | None = None) -> Path:
    """Write a trial's first checkpoint: the base run's state continued under the trial's config.

    The learner state is fitted to the trial's network (:func:`adapt_learner_state`), the
    replay buffer keeps its positions but samples with a generator seeded by the trial's
    ``train.seed``, the iteration and game counters carry on (so the trial's self-play plays
    new game numbers of its own dice seed), and the history starts at the branch point, so
    every arm's curve starts where the base ended: with the base's last evaluation when the
    trial's network is the base's (``evaluate="changed"``), else with an evaluation of the
    trial's own network that the run makes before it trains (marked ``branch_eval_due``).

    Args:
        base_checkpoint: the base run's ``checkpoint.pt``.
        cfg: the trial's run config.
        dest: the trial's run folder (its ``checkpoint.pt`` is written atomically).
        evaluate: ``"changed"`` or ``"always"`` (:class:`~yamblab.sweeps.spec.BranchSpec`).
        state: the base checkpoint already loaded (a sweep loads it once for all its trials).

    The replay buffer's positions are not copied: the trial's checkpoint names the base's
    (``buffer_from``) and the run loads them from there (the base's ``RUN/replay/`` segments,
    read, never written), until its own first checkpoint writes them to the trial's folder.

    Returns:
        the path of the checkpoint written.

    Raises:
        DamagedFileError: a damaged base checkpoint; ConfigError: a network that cannot branch.
    """
    from yamblab.model.checkpoint import load_checkpoint, save_checkpoint
    from yamblab.training.resume import CHECKPOINT, branch_record

    state = state if state is not None else load_checkpoint(base_checkpoint)
    learner = adapt_learner_state(state["learner"], cfg.model, seed=cfg.train.seed)
    # the trial's minibatch order comes from its own seed, not from where the base's stood
    learner = {k: v for k, v in learner.items() if k != "rng"}
    learner = {**learner, "train_config": cfg.train.model_dump()}
    # the optimiser's own settings that the trial's config sets (AdamW keeps its weight decay in
    # its saved state; the learning rate is set at every iteration from the trial's schedule)
    opt = learner["optimizer"]
    learner["optimizer"] = {**opt, "param_groups": [{**g, "weight_decay": cfg.train.weight_decay}
                                                    for g in opt["param_groups"]]}
    buffer = {**{k: v for k, v in state["buffer"].items() if k != "segments"}, "data": {}}
    if "rng" in buffer:
        buffer["rng"] = np.random.default_rng([cfg.train.seed, BRANCH_SALT]).bit_generator.state
    it = int(state["iteration"])
    history, evals = [], []
    same_net = learner["model_config"] == state["learner"]["model_config"]
    if evaluate == "changed" and same_net and _same_evaluation(state.get("config"), cfg):
        last = next((e for e in json.loads(state["evals"]) if int(e["iteration"]) == it), None)
        record = next((h for h in json.loads(state["history"]) if int(h.get("iteration", -1)) == it), None)
        if last is not None and record is not None:
            evals = [last]
            history = [{**branch_record(it, int(state["games_played"]), int(state.get("positions_total", 0))),
                        **{k: v for k, v in record.items() if k.startswith("eval.")}}]
    payload = {**state, "learner": learner, "buffer": buffer, "history": json.dumps(history),
               "evals": json.dumps(evals), "config": cfg.to_yaml(), "mlflow_run_id": "", "elapsed": 0.0,
               "model_config": learner["model_config"], "ema": learner["ema"], "model": learner["model"],
               "branched_from": str(base_checkpoint), "buffer_from": str(Path(base_checkpoint).absolute()),
               "branch_iteration": it, "branch_eval_due": not evals}
    return save_checkpoint(Path(dest) / CHECKPOINT, payload)


def _same_evaluation(base_yaml: str | None, cfg: RunConfig) -> bool:
    """Whether the base's evaluations graded what the trial's do (the same search, evaluation
    games, dice, modes and decision set): only then is the base's last evaluation the trial's."""
    import yaml

    if not base_yaml:
        return False
    theirs = yaml.safe_load(base_yaml)
    mine = cfg.model_dump(mode="json")
    keys = ("eval_games", "eval_seed", "eval_depth", "eval_modes", "solver_eval", "solver_games")
    return (theirs.get("search") == mine["search"]
            and all(theirs.get("runtime", {}).get(k) == mine["runtime"][k] for k in keys)
            and all(theirs.get(k) == mine[k] for k in ("game", "rules", "preset", "columns")))

