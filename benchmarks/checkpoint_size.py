"""Benchmark: what a checkpoint costs with the replay buffer inside ``checkpoint.pt`` (the old
way: one ``torch.save`` of the learner and every position) and with its positions in segment
files of ``RUN/replay/`` (the new way, :meth:`~yamblab.training.resume.write_checkpoint`:
the positions added since the last checkpoint, then a small ``checkpoint.pt``).

It fills a replay buffer of ``configs/yamb-gpu.yaml``'s shape (jamb_nn positions: one game
played by the tiny network, its rows repeated) and takes the learner state of that config's
network (weights and EMA; no optimiser moments yet, the same in both ways), then prints bytes
written, seconds and peak extra memory (tracemalloc's peak above the start: numpy's and
Python's allocations) for a first checkpoint (the whole ring), an incremental one (one
iteration's games of new positions) and a resume. It fills rings of ``--positions`` and half
as many, fewer than the config's 2,000,000, and prints the figures projected to the config's
ring (bytes and memory along the line through the two sizes, seconds at the measured bytes a
second; a ring much smaller than the default projects poorly: fixed costs such as the learner's
weights then dominate). Needs torch, numpy, pydantic and pyyaml only (no Ray, no MLflow).

    python benchmarks/checkpoint_size.py [--positions 500000] [--dir /tmp] [--seed 1]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
import tracemalloc
from dataclasses import fields
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def one_game(cfg, seed: int):
    """One jamb_nn game of ``cfg``'s rules played by a fresh tiny network: its positions (a dict
    of arrays in the replay buffer's format)."""
    import torch

    from yamblab.learners.learner import Learner
    from yamblab.learners.selfplay import SelfPlay
    from yamblab.model.config import ModelConfig

    torch.set_num_threads(1)
    keep = ("value_max", "value_bins")        # the value head's targets as the config has them
    tiny = cfg.model.model_copy(update={k: v for k, v in ModelConfig.preset("tiny").model_dump().items()
                                        if k not in keep})
    sp = SelfPlay(tiny, cfg.train, cfg.search, cfg.game_obj, device="cpu")
    version, weights = Learner(tiny, cfg.train).get_weights()
    sp.set_weights(weights, version)
    samples, _ = sp.play_games(1, seed=seed)
    return {f.name: getattr(samples, f.name) for f in fields(samples)}


def fill(buf, rows: dict, n: int, rng) -> None:
    """Add ``n`` positions drawn from ``rows`` to ``buf``, a chunk at a time."""
    m = len(next(iter(rows.values())))
    for start in range(0, n, 50_000):
        idx = rng.integers(0, m, size=min(50_000, n - start))
        buf.add({k: v[idx] for k, v in rows.items()})


def old_checkpoint(run: Path, learner: dict, buf) -> int:
    """The old way: the whole buffer, every array copied into a tensor, inside checkpoint.pt."""
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.training.resume import np_to_torch

    path = save_checkpoint(run / "checkpoint.pt", {"learner": learner, "buffer": np_to_torch(buf.state_dict())})
    return path.stat().st_size


def new_checkpoint(run: Path, learner: dict, buf, segments: list[dict]) -> tuple[int, list[dict]]:
    from yamblab.actors.replay import REPLAY_DIR, clean_replay, save_replay
    from yamblab.model.checkpoint import save_checkpoint

    state = buf.state_dict(data=False)
    segs = save_replay(run / REPLAY_DIR, state, segments, buf.positions)
    path = save_checkpoint(run / "checkpoint.pt", {"learner": learner, "buffer": {**state, "segments": segs}})
    clean_replay(run / REPLAY_DIR, segs)
    old = {s["name"] for s in segments}
    return path.stat().st_size + sum(s["bytes"] for s in segs if s["name"] not in old), segs


def old_resume(run: Path):
    from yamblab.actors.replay import ReplayBuffer
    from yamblab.model.checkpoint import load_checkpoint

    state = load_checkpoint(run / "checkpoint.pt")["buffer"]
    return ReplayBuffer.from_state_dict({**state, "data": {k: v.numpy() for k, v in state["data"].items()}})


def new_resume(run: Path):
    from yamblab.actors.replay import REPLAY_DIR, ReplayBuffer, load_replay
    from yamblab.model.checkpoint import load_checkpoint

    s = load_checkpoint(run / "checkpoint.pt")["buffer"]
    buf = ReplayBuffer.from_state_dict({"capacity": s["capacity"], "data": {}, "added": s["added"] - s["size"],
                                        "rng": s["rng"]})
    load_replay(run / REPLAY_DIR, s, buf.add)
    return buf


def measured(fn):
    """``(fn()'s value, seconds, peak extra bytes)``."""
    gc.collect()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    return out, seconds, tracemalloc.get_traced_memory()[1] - start


def bench(rows: dict, learner: dict, capacity: int, new: int, seed: int, where: str | None) -> dict:
    """``{(way, checkpoint): (bytes, seconds, peak extra bytes)}`` for a ring of ``capacity``
    positions: its first checkpoint, one after ``new`` more positions, and a resume."""
    from yamblab.actors.replay import ReplayBuffer

    tracemalloc.start()
    buf = ReplayBuffer(capacity, seed=0)
    fill(buf, rows, capacity, np.random.default_rng(seed))
    top = Path(tempfile.mkdtemp(prefix="ckpt-size-", dir=where))
    out, segs = {}, []
    try:
        for when in ("first", "incremental"):
            if when == "incremental":
                fill(buf, rows, new, np.random.default_rng(seed + 1))
            (b, segs), s, m = measured(lambda: new_checkpoint(top / "new", learner, buf, segs))
            out["new", when] = (b, s, m)
            out["old", when] = measured(lambda: old_checkpoint(top / "old", learner, buf))
        for way, fn in (("new", new_resume), ("old", old_resume)):
            back, s, m = measured(lambda: fn(top / way))
            assert np.array_equal(back.all()["policy_target"], buf.all()["policy_target"]), way
            read = sum(f.stat().st_size for f in (top / way).rglob("*") if f.is_file())
            out[way, "resume"] = (read, s, m)
            del back
    finally:
        tracemalloc.stop()
        shutil.rmtree(top, ignore_errors=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", default=str(ROOT / "configs" / "yamb-gpu.yaml"))
    p.add_argument("--positions", type=int, default=500_000,
                   help="replay capacity to fill (default 500,000, and half of it; projected to the config's)")
    p.add_argument("--dir", default=None, help="where the run folders go (default: the system's temporary folder)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    from yamblab.learners.learner import Learner
    from yamblab.training.config import load_run_config

    cfg = load_run_config(args.config)
    full = cfg.runtime.replay_positions
    rows = one_game(cfg, args.seed)
    per_game = len(rows["value_target"])
    new = cfg.train.games_per_iteration * per_game
    row_bytes = sum(v.dtype.itemsize * int(np.prod(v.shape[1:])) for v in rows.values())
    learner = Learner(cfg.model, cfg.train).state_dict()
    learner = {k: learner[k] for k in ("model", "ema", "model_config")}
    print(f"{cfg.name}: {row_bytes:,} bytes a position; one game {per_game} positions, so one iteration's "
          f"{cfg.train.games_per_iteration} games about {new:,}; the config's ring {full:,} positions "
          f"({full * row_bytes / 1e9:.2f} GB)")

    # two ring sizes: bytes and memory at the config's ring extrapolated along the line through
    # them, seconds at the measured rate of bytes a second
    small, big = args.positions // 2, args.positions
    at = {n: bench(rows, learner, n, new, args.seed, args.dir) for n in (small, big)}
    k = (full - big) / (big - small)
    print(f"\nmeasured with a ring of {big:,} positions ({big * row_bytes / 1e9:.2f} GB), and projected to "
          f"{full:,} (bytes and memory linear through {small:,} and {big:,}, seconds at the measured bytes a second)")
    print(f"{'checkpoint':<13}{'way':<5}{'bytes':>12}{'seconds':>9}{'peak memory':>13}   "
          f"{'projected: bytes':>16}{'seconds':>9}{'peak memory':>13}")
    for when in ("first", "incremental", "resume"):
        for way in ("old", "new"):
            now, before = at[big][way, when], at[small][way, when]
            proj = [max(0.0, v + (v - u) * k) for v, u in zip(now, before)]
            proj[1] = now[1] * proj[0] / now[0]                  # seconds: at the bytes' measured rate
            print(f"{when:<13}{way:<5}{now[0] / 1e6:>9,.0f} MB{now[1]:>9.2f}{now[2] / 1e6:>10,.0f} MB   "
                  f"{proj[0] / 1e9:>13.2f} GB{proj[1]:>9.1f}{proj[2] / 1e9:>10.2f} GB")
    print("bytes: written (resume: read); peak memory: tracemalloc's peak above the start (a resume's "
          "includes the ring it restores); every checkpoint holds the learner's weights and EMA "
          f"({sum(t.numel() * t.element_size() for w in ('model', 'ema') for t in learner[w].values()) / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
