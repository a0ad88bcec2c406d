"""A run's checkpoint: what it holds, how it is written between iterations and read back on
``--resume``, and the state a warm start (``train.init_from``) begins from.

``RUN/checkpoint.pt`` holds the learner (network, EMA, optimiser), the counters, the metrics
history and the evaluations; the replay buffer's positions sit beside it in segment files of
``RUN/replay/``, each checkpoint appending the positions added since the one before. Every file
is written atomically, so a kill at any moment leaves the last checkpoint and its segments whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from yamblab.errors import YamblabError
from yamblab.training.config import RunConfig
from yamblab.vocabulary import current_metrics

CHECKPOINT = "checkpoint.pt"


def np_to_torch(obj):
    """``obj`` with every numpy array (in nested dicts) as a torch tensor of its own memory."""
    import torch

    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.array(obj, copy=True))
    if isinstance(obj, dict):
        return {k: np_to_torch(v) for k, v in obj.items()}
    return obj


def _torch_to_np(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, dict):
        return {k: _torch_to_np(v) for k, v in obj.items()}
    return obj


@dataclass
class RunState:
    """Where a run stands: its counters, history and evaluations (what a checkpoint keeps besides
    the learner and the buffer)."""

    iteration: int = 0
    games_played: int = 0
    positions_total: int = 0
    steps_total: int = 0
    samples_total: int = 0
    history: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    run_id: str | None = None               # the MLflow run
    elapsed_before: float = 0.0             # seconds run before this process
    branch_iteration: int | None = None     # a branched sweep arm: its base's iteration
    branch_eval_due: bool = False           # ... whose network is evaluated first
    segments: list[dict] = field(default_factory=list)   # RUN/replay/ files the checkpoint names


@dataclass
class Resumed:
    """A checkpoint read back: the run's state, the learner's, and how its buffer is rebuilt
    (:func:`_buffer_to_resume`)."""

    state: RunState
    learner_state: dict
    buffer_state: dict | None
    replay: tuple | None


def _buffer_to_resume(state: dict, run_dir: Path) -> tuple[dict | None, tuple | None, list]:
    """How a run resumed from the checkpoint ``state`` gets its replay buffer:
    ``(buffer_state, replay, segments)``: the state the backend starts its buffer from (None: an
    empty buffer), ``(folder, buffer)`` whose segments are then streamed into it (None: none),
    and the run's own segments, which its next checkpoint appends to.

    A checkpoint names segments of ``RUN/replay/``; an older one holds the positions inside
    (``data``); one without positions (``keep_buffer=False``) gives an empty buffer. A branch's
    first checkpoint (``buffer_from``) takes its base's positions, read where the base keeps
    them (never written there), sampled with the branch's own generator.
    """
    from yamblab.actors.replay import REPLAY_DIR
    from yamblab.model.checkpoint import load_checkpoint

    buf, folder, own = _torch_to_np(state["buffer"]), run_dir / REPLAY_DIR, True
    if state.get("buffer_from") and not buf.get("data"):
        base = _torch_to_np(load_checkpoint(state["buffer_from"])["buffer"])
        buf = {**base, "rng": buf.get("rng", base["rng"])}
        folder, own = Path(state["buffer_from"]).parent / REPLAY_DIR, False
    if buf.get("segments"):
        start = {"capacity": buf["capacity"], "data": {}, "added": int(buf["added"]) - int(buf["size"]),
                 "rng": buf["rng"]}
        return start, (folder, buf), list(buf["segments"]) if own else []
    return (buf if buf.get("data") else None), None, []


def read_checkpoint(run_dir: Path) -> Resumed:
    """The checkpoint of ``run_dir``, read back (metric names of earlier versions renamed, so a
    curve goes on under today's name).

    Raises:
        YamblabError: no checkpoint there; DamagedFileError: a damaged one.
    """
    from yamblab.model.checkpoint import load_checkpoint

    path = run_dir / CHECKPOINT
    if not path.exists():
        raise YamblabError(f"no checkpoint to resume from in {run_dir}")
    ck = load_checkpoint(path)
    learner = ck["learner"]
    buffer_state, replay, segments = _buffer_to_resume(ck, run_dir)
    evals = json.loads(ck["evals"])
    state = RunState(
        iteration=int(ck["iteration"]), games_played=int(ck["games_played"]),
        positions_total=int(ck.get("positions_total", 0)), steps_total=int(learner.get("steps", 0)),
        samples_total=int(learner.get("samples_trained", 0)),
        history=[current_metrics(h) for h in json.loads(ck["history"])], evals=evals,
        run_id=ck.get("mlflow_run_id") or None, elapsed_before=float(ck.get("elapsed", 0.0)),
        branch_iteration=int(ck["branch_iteration"]) if "branch_iteration" in ck else None,
        branch_eval_due="branch_iteration" in ck and bool(ck.get("branch_eval_due")) and not evals,
        segments=segments)
    return Resumed(state, learner, buffer_state, replay)


def write_checkpoint(run_dir: Path, backend, state: RunState, cfg: RunConfig, elapsed: float,
                     keep_buffer: bool = True) -> tuple[Path, list[dict]]:
    """Write the run's state atomically (see :func:`yamblab.model.checkpoint.save_checkpoint`):
    the learner's state after the last training, the buffer, the counters and every evaluation
    recorded so far; returns the checkpoint's path and the segments it names.

    The buffer's positions go to segment files in ``RUN/replay/`` first: the positions added
    since the last checkpoint, fetched a chunk at a time
    (:func:`~yamblab.actors.replay.save_replay`); then ``checkpoint.pt`` names the segments that
    hold the ring's positions; then the segments it no longer names are deleted. A kill between
    any two of these writes leaves the last checkpoint and its segments whole.

    Args:
        keep_buffer: False leaves the replay buffer's positions out (a finished sweep trial's
            checkpoint; its segments are deleted; a run resumed from it starts with an empty
            buffer).

    Raises:
        DiskFullError: no space left to write it; the checkpoint before stays whole.
    """
    from yamblab.actors.replay import REPLAY_DIR, clean_replay, save_replay
    from yamblab.model.checkpoint import save_checkpoint

    folder = run_dir / REPLAY_DIR
    learner_state = backend.call(backend.learner, "state_dict")
    buffer_state = backend.call(backend.buffer, "state_dict", False)
    segments = save_replay(folder, buffer_state, state.segments,
                           lambda first, n: backend.call(backend.buffer, "positions", first, n)
                           ) if keep_buffer else []
    payload = {
        "learner": learner_state, "buffer": {**buffer_state, "segments": segments},
        "iteration": state.iteration, "games_played": state.games_played,
        "positions_total": state.positions_total,
        "history": json.dumps(state.history), "evals": json.dumps(state.evals),
        "config": cfg.to_yaml(), "mlflow_run_id": state.run_id or "", "elapsed": elapsed,
        "model_config": learner_state["model_config"], "ema": learner_state["ema"],
        "model": learner_state["model"],
    }
    if state.branch_iteration is not None:
        payload["branch_iteration"] = state.branch_iteration
    path = save_checkpoint(run_dir / CHECKPOINT, payload)
    clean_replay(folder, segments)
    return path, segments


def load_replay(backend, folder: Path, buffer: dict) -> None:
    """Stream the segments a checkpoint's ``buffer`` names, in ``folder``, into the buffer the
    backend started from its small state, a chunk at a time (so a buffer actor on another node
    of a cluster gets them too).

    Raises:
        DamagedFileError: a segment missing or damaged (named); the backend is shut down.
    """
    from yamblab.actors.replay import load_replay as stream

    try:
        stream(folder, buffer, lambda part: backend.call(backend.buffer, "add", part))
    except BaseException:
        backend.shutdown()
        raise


def branch_record(iteration: int, games_played: int, positions_total: int) -> dict:
    """The history entry of a branch point (its evaluation's ``eval.*`` metrics join it):
    ``branch_point`` 1 marks it, so that only its evaluation is logged, not a training step."""
    return {"iteration": iteration, "games_played": games_played, "selfplay.positions_total": positions_total,
            "branch_point": 1.0, "seconds": 0.0, "minutes": 0.0}


def warm_start_state(cfg: RunConfig) -> dict:
    """The learner state a new run starts from under ``train.init_from``: a new learner of
    ``cfg`` whose network and EMA hold the playing network of that checkpoint
    (:meth:`~yamblab.learners.learner.Learner.start_from`; a wider boundary head is widened
    without changing its values).

    Raises:
        YamblabError: no file there, a damaged checkpoint, one without a run config, one of
            another game or rules, or another network: any ``model`` setting but
            ``boundary_hidden`` different (``value_max`` too, which is in no weight but scales the
            value head), or a narrower boundary head.
    """
    import yaml

    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import load_checkpoint
    from yamblab.training.configio import validate

    path = Path(cfg.train.init_from)
    if not path.is_file():
        raise YamblabError(f"train.init_from: no checkpoint file at {path}")
    state = load_checkpoint(path)
    if "config" not in state or "ema" not in state:
        raise YamblabError(f"train.init_from: {path} holds no run config and network (is it a training checkpoint?)")
    theirs = validate(RunConfig, yaml.safe_load(state["config"]), str(path))
    mine, them = cfg.game_obj, theirs.game_obj
    if (cfg.game, mine.digest) != (theirs.game, them.digest):
        raise YamblabError(f"train.init_from: {path} learned {theirs.game} {them.label}; this run plays "
                           f"{cfg.game} {mine.label} (a network's values are worth nothing under other rules)")
    theirs_m, mine_m = theirs.model.model_dump(), cfg.model.model_dump()
    differ = [k for k in mine_m if k != "boundary_hidden" and theirs_m.get(k) != mine_m[k]]
    if differ:
        raise YamblabError(f"train.init_from: {path} is another network: " + ", ".join(
            f"model.{k} {theirs_m.get(k)!r} there, {mine_m[k]!r} here" for k in differ)
            + " (only model.boundary_hidden may differ, and only grow)")
    if mine_m["boundary_hidden"] < theirs_m["boundary_hidden"]:
        raise YamblabError(f"train.init_from: {path} has a boundary head of {theirs_m['boundary_hidden']} units; "
                           f"model.boundary_hidden {mine_m['boundary_hidden']} would drop some (it may only grow)")
    learner = Learner(cfg.model, cfg.train)
    learner.start_from(state["ema"], f"train.init_from {path}")
    return learner.state_dict()
