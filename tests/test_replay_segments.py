"""The replay buffer's positions in segment files of RUN/replay/, beside checkpoint.pt: written
a checkpoint's new positions at a time, restored exactly, old run folders still loaded."""

from __future__ import annotations

import re

import numpy as np
import pytest

from yamblab.actors import replay
from yamblab.actors.replay import REPLAY_DIR, ReplayBuffer, clean_replay, load_replay, save_replay
from yamblab.errors import DamagedFileError, DiskFullError


def _positions(first: int, n: int) -> dict[str, np.ndarray]:
    """n positions whose ``x[:, 0]`` is their number, in the dtypes and ranks self-play uses."""
    i = np.arange(first, first + n)
    return {"x": np.stack([i, -i], 1).astype(np.float32), "flag": i % 3 == 0, "k": (i % 7).astype(np.int8),
            "v": (i * 0.5).astype(np.float32)}


def _restored(folder, state: dict) -> ReplayBuffer:
    """A buffer restored as a resumed run restores it: its small state, then the segments."""
    buf = ReplayBuffer.from_state_dict({"capacity": state["capacity"], "data": {},
                                        "added": state["added"] - state["size"], "rng": state["rng"]})
    load_replay(folder, state, buf.add)
    return buf


def _same(a: ReplayBuffer, b: ReplayBuffer) -> None:
    x, y = a.all(), b.all()
    assert sorted(x) == sorted(y)
    for k in x:
        assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]), k
    assert (a.added, len(a), a.capacity) == (b.added, len(b), b.capacity)
    da, db = a.sample(64), b.sample(64)                                   # the same draws from here on
    assert all(np.array_equal(da[k], db[k]) for k in da)


def _checkpoint(buf: ReplayBuffer, folder, segments: list[dict]) -> dict:
    state = buf.state_dict(data=False)
    return {**state, "segments": save_replay(folder, state, segments, buf.positions)}


def test_positions_are_numbered_as_added_and_only_kept_ones_are_given():
    buf = ReplayBuffer(10, seed=0)
    for a in range(0, 25, 5):
        buf.add(_positions(a, 5))
    assert buf.first == 15 and buf.added == 25
    assert buf.positions(17, 6)["x"][:, 0].tolist() == list(range(17, 23))       # across the ring's wrap
    assert buf.positions(25, 0)["x"].shape == (0, 2)
    for first, n in ((14, 2), (24, 2), (15, -1)):
        with pytest.raises(ValueError, match="not all kept"):
            buf.positions(first, n)


def test_a_wrapped_buffer_round_trips_exactly_chunk_by_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "CHUNK_BYTES", 40)            # a few positions a chunk
    buf = ReplayBuffer(40, seed=5)
    for a in range(0, 130, 13):
        buf.add(_positions(a, 13))
    buf.sample(7)                                            # the generator moved on
    state = _checkpoint(buf, tmp_path / "replay", [])
    assert sum(s["count"] for s in state["segments"]) == 40 and state["segments"][0]["first"] == 90
    back = _restored(tmp_path / "replay", state)
    assert back.all()["x"][:, 0].tolist() == list(range(90, 130))
    _same(buf, back)


def test_each_checkpoint_writes_only_the_new_positions(tmp_path):
    folder = tmp_path / "replay"
    buf = ReplayBuffer(160, seed=1)                           # segments of at most 10 positions
    buf.add(_positions(0, 30))
    first = _checkpoint(buf, folder, [])
    assert [(s["first"], s["count"]) for s in first["segments"]] == [(0, 10), (10, 10), (20, 10)]
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    buf.add(_positions(30, 7))
    second = _checkpoint(buf, folder, first["segments"])
    assert second["segments"][:3] == first["segments"] and second["segments"][3:] == [
        {**second["segments"][3], "first": 30, "count": 7}]
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.name in stamps} == stamps   # untouched
    _same(buf, _restored(folder, second))

    for a in range(37, 187, 50):                              # the ring wraps: oldest kept 27
        buf.add(_positions(a, 50))
    third = _checkpoint(buf, folder, second["segments"])
    assert third["segments"][:2] == [first["segments"][2], second["segments"][3]]   # 20..36: still kept
    assert sum(s["count"] for s in third["segments"][2:]) == 150
    _same(buf, _restored(folder, third))

    for a in range(187, 587, 100):                            # more new positions than the ring holds
        buf.add(_positions(a, 100))
    fourth = _checkpoint(buf, folder, third["segments"])
    assert not {s["name"] for s in fourth["segments"]} & {s["name"] for s in third["segments"]}
    assert sum(s["count"] for s in fourth["segments"]) == 160 and fourth["segments"][0]["first"] == 427
    _same(buf, _restored(folder, fourth))


def test_segments_go_only_when_cleaned_after_the_checkpoint_that_drops_them(tmp_path):
    folder = tmp_path / "replay"
    buf = ReplayBuffer(16, seed=0)                            # one position a segment
    buf.add(_positions(0, 16))
    one = _checkpoint(buf, folder, [])
    buf.add(_positions(16, 4))
    two = _checkpoint(buf, folder, one["segments"])
    names = sorted(p.name for p in folder.iterdir())
    assert names == [replay.segment_name(i) for i in range(20)]       # the dropped four still there
    (folder / ".seg-000000000099.bin.host-1.x.tmp").write_bytes(b"half")
    (folder / replay.segment_name(99)).write_bytes(b"stray")
    clean_replay(folder, two["segments"])
    assert sorted(p.name for p in folder.iterdir()) == [replay.segment_name(i) for i in range(4, 20)]
    clean_replay(folder, [])
    assert not folder.exists()


@pytest.mark.parametrize("damage,words", [("missing", "is missing"), ("cut", "is damaged: 9 bytes"),
                                          ("flipped", "fails its SHA-256 checksum")])
def test_a_missing_or_damaged_segment_is_refused_by_name(tmp_path, damage, words):
    folder = tmp_path / "replay"
    buf = ReplayBuffer(32, seed=0)
    buf.add(_positions(0, 32))
    state = _checkpoint(buf, folder, [])
    path = folder / state["segments"][1]["name"]
    if damage == "missing":
        path.unlink()
    elif damage == "cut":
        path.write_bytes(path.read_bytes()[:9])
    else:
        raw = bytearray(path.read_bytes())
        raw[-3] ^= 0xFF
        path.write_bytes(bytes(raw))
    with pytest.raises(DamagedFileError, match=re.escape(str(path)) + ".*" + words):
        _restored(folder, state)


# ------------------------------------------------------------------ a training run's checkpoints
@pytest.fixture()
def cfg(tiny_config):
    from yamblab.training.config import apply_overrides

    return apply_overrides(tiny_config, {"runtime.actors": "in_process", "runtime.max_policy_lag": 0,
                                         "runtime.replay_positions": 48, "train.games_per_iteration": 2,
                                         "runtime.eval_games": 2}, "test")


def _run(cfg, folder, resume=False):
    from yamblab.training.runtime import TrainingRun

    return TrainingRun(cfg, folder, resume=resume, progress=False)


def _buffer(run) -> ReplayBuffer:
    return run.backend.buffer.buffer


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (folder / REPLAY_DIR).iterdir()}


def test_a_run_resumes_its_buffer_and_drops_segments_after_the_checkpoint(cfg, tmp_path, monkeypatch):
    import yamblab.model.checkpoint as ckpt

    d = tmp_path / "run"
    run = _run(cfg, d)
    run.step()                                                # real self-play positions: the ring is full
    assert len(_buffer(run)) == 48
    run.checkpoint()
    _same(_buffer(run), _buffer(_run(cfg, d, resume=True)))
    before, kept = _files(d), (d / "checkpoint.pt").read_bytes()
    buf = _buffer(run)
    buf.add(buf.sample(20))                                   # 20 new positions; the 20 oldest dropped

    def full(*a, **k):
        raise DiskFullError("disk full")

    monkeypatch.setattr(ckpt, "save_checkpoint", full)       # killed between the segment and checkpoint.pt
    with pytest.raises(DiskFullError):
        run.checkpoint()
    assert (d / "checkpoint.pt").read_bytes() == kept
    after = _files(d)
    assert {k: after[k] for k in before} == before and len(after) > len(before)   # nothing deleted yet
    resumed = _run(cfg, d, resume=True)                       # the new segment is a stray: ignored
    assert _buffer(resumed).added == buf.added - 20
    monkeypatch.undo()
    run.checkpoint()
    names = set(_files(d))
    assert names == {s["name"] for s in run.state.segments} and names - set(before) and set(before) - names
    _same(_buffer(run), _buffer(_run(cfg, d, resume=True)))
    run.checkpoint(keep_buffer=False)                         # a finished trial keeps no positions
    assert not (d / REPLAY_DIR).exists()
    assert len(_buffer(_run(cfg, d, resume=True))) == 0


def test_stray_files_are_ignored_and_cleaned_and_a_lost_segment_is_named(cfg, tmp_path):
    d = tmp_path / "run"
    run = _run(cfg, d)
    _buffer(run).add(_positions(0, 40))
    run.checkpoint()
    (d / REPLAY_DIR / replay.segment_name(40)).write_bytes(b"a killed checkpoint's segment")
    (d / REPLAY_DIR / ".seg-000000000040.bin.host-1.abc.tmp").write_bytes(b"half")
    resumed = _run(cfg, d, resume=True)
    _same(_buffer(run), _buffer(resumed))
    _buffer(resumed).add(_positions(40, 3))
    resumed.checkpoint()
    assert sorted(_files(d)) == sorted(s["name"] for s in resumed.state.segments)
    lost = d / REPLAY_DIR / resumed.state.segments[0]["name"]
    lost.unlink()
    with pytest.raises(DamagedFileError, match=f"replay segment {re.escape(str(lost))} is missing"):
        _run(cfg, d, resume=True)


def test_a_checkpoint_with_the_buffer_inside_still_resumes_exactly(cfg, tmp_path):
    """Run folders written before RUN/replay/: the positions inside checkpoint.pt."""
    import shutil

    from yamblab.model.checkpoint import load_checkpoint, save_checkpoint
    from yamblab.training.resume import np_to_torch

    d = tmp_path / "run"
    run = _run(cfg, d)
    buf = _buffer(run)
    buf.add(_positions(0, 70))
    buf.sample(5)
    run.checkpoint()
    state = load_checkpoint(d / "checkpoint.pt")
    save_checkpoint(d / "checkpoint.pt", {**state, "buffer": np_to_torch(buf.state_dict())})   # the old shape
    shutil.rmtree(d / REPLAY_DIR)
    resumed = _run(cfg, d, resume=True)
    _same(buf, _buffer(resumed))
    resumed.checkpoint()                                      # now written the new way, whole
    assert "data" not in load_checkpoint(d / "checkpoint.pt")["buffer"]
    assert sum(s["count"] for s in resumed.state.segments) == 48
    _same(_buffer(resumed), _buffer(_run(cfg, d, resume=True)))


@pytest.mark.parametrize("base_format", ["segments", "inside"])
def test_a_branch_reads_its_bases_positions_and_never_touches_them(cfg, tmp_path, base_format):
    from yamblab.model.checkpoint import load_checkpoint, save_checkpoint
    from yamblab.sweeps.branch import BRANCH_SALT, branch_checkpoint
    from yamblab.training.config import apply_overrides
    from yamblab.training.resume import np_to_torch

    base_dir = tmp_path / "base"
    base = _run(cfg, base_dir)
    _buffer(base).add(_positions(0, 60))
    base.checkpoint()
    if base_format == "inside":                               # a base written before RUN/replay/
        state = load_checkpoint(base_dir / "checkpoint.pt")
        save_checkpoint(base_dir / "checkpoint.pt", {**state, "buffer": np_to_torch(_buffer(base).state_dict())})
        clean_replay(base_dir / REPLAY_DIR, [])
    files = _files(base_dir) if base_format == "segments" else None
    mine = apply_overrides(cfg, {"train.seed": 3}, "test")
    branch_checkpoint(base_dir / "checkpoint.pt", mine, tmp_path / "branch")
    assert "segments" not in load_checkpoint(tmp_path / "branch" / "checkpoint.pt")["buffer"]
    branch = _run(mine, tmp_path / "branch", resume=True)
    got, want = _buffer(branch), _buffer(base)
    assert np.array_equal(got.all()["x"], want.all()["x"]) and got.added == want.added
    assert got._rng.bit_generator.state == np.random.default_rng([3, BRANCH_SALT]).bit_generator.state
    got.add(_positions(100, 2))
    branch.checkpoint()                                       # the branch's first own checkpoint: all of them
    assert sum(s["count"] for s in branch.state.segments) == 48
    if files is not None:
        assert _files(base_dir) == files                     # the base's segments as they were
    else:
        assert not (base_dir / REPLAY_DIR).exists()
    _same(got, _buffer(_run(mine, tmp_path / "branch", resume=True)))
