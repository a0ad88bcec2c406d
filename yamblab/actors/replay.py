"""The replay buffer: a bounded FIFO of positions, sampled uniformly for the learner.

Positions are stored as a dict of numpy arrays with a common leading dimension (whatever the
self-play workers produce: encoded positions, policy targets, value targets …). The buffer is
bounded by a size budget in positions: adding past it drops the oldest positions first.

Positions are numbered 0, 1, … in the order they are added; the buffer keeps numbers
``added - len(buffer)`` to ``added - 1``. A checkpoint keeps them apart from the weights, in
segment files of a ``replay/`` folder beside ``checkpoint.pt`` (:func:`save_replay`,
:func:`load_replay`, :func:`clean_replay`): each checkpoint appends the positions added since
the one before, and the checkpoint file names the segments that hold the ring's positions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from yamblab.atomic import atomic_write
from yamblab.errors import ConfigError, DamagedFileError

#: the folder of a run's replay segments, beside its checkpoint.pt
REPLAY_DIR = "replay"
SEGMENT_MAGIC = b"YAMBLAB-REPLAY\n"
SEGMENT_FORMAT = 1
#: a segment holds at most capacity / SEGMENT_SHARE positions (more new positions make several),
#: so the folder holds at most about capacity × (1 + 1/SEGMENT_SHARE) positions between checkpoints
SEGMENT_SHARE = 16
#: positions travel (from the buffer to a segment and back) in chunks of about this many bytes
CHUNK_BYTES = 32 << 20


class ReplayBuffer:
    """A bounded ring buffer of positions.

    Args:
        capacity: the most positions kept (>= 1).
        seed: seed of the sampling generator.

    Raises:
        ConfigError: a capacity below 1.
    """

    def __init__(self, capacity: int, seed: int = 0):
        if capacity < 1:
            raise ConfigError(f"replay capacity must be at least 1 position, got {capacity}")
        self.capacity = int(capacity)
        self._data: dict[str, np.ndarray] | None = None
        self._next = 0          # where the next position goes
        self._size = 0
        self.added = 0          # positions ever added
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    def add(self, positions: dict[str, np.ndarray]) -> None:
        """Append positions (arrays of equal length n); the oldest are dropped beyond capacity.

        Raises:
            ValueError: arrays of different lengths, or keys that differ from earlier adds.
        """
        lengths = {k: len(v) for k, v in positions.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"position arrays differ in length: {lengths}")
        n = next(iter(lengths.values()), 0)
        if n == 0:
            return
        if self._data is None:
            self._data = {k: np.zeros((self.capacity, *np.asarray(v).shape[1:]), dtype=np.asarray(v).dtype)
                          for k, v in positions.items()}
        elif set(positions) != set(self._data):
            raise ValueError(f"position keys {sorted(positions)} differ from {sorted(self._data)}")
        if n > self.capacity:
            positions = {k: np.asarray(v)[-self.capacity:] for k, v in positions.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for k, v in positions.items():
            self._data[k][idx] = v
        self._next = int((self._next + n) % self.capacity)
        self._size = min(self.capacity, self._size + n)
        self.added += n

    def _slots(self, logical: np.ndarray) -> np.ndarray:
        """Ring slots of logical positions, int64 like ``logical`` (0 = the oldest kept)."""
        return (self._next - self._size + logical) % self.capacity

    def sample(self, batch_size: int, policy_share: float | None = None) -> dict[str, np.ndarray]:
        """A random batch (with replacement) of ``batch_size`` positions.

        Args:
            batch_size: positions to draw.
            policy_share: None: uniform over the buffer. A share in (0, 1]: that share of the
                batch (rounded) drawn uniformly among the positions with a decision to make
                (``has_policy`` true) and the rest among the others, so that value-only
                samples (boundary states, off-path samples) however many cannot crowd the
                policy's positions out of the optimiser's batches. When one kind is absent the
                whole batch comes from the other.

        Raises:
            ValueError: the buffer is empty; a ``policy_share`` outside (0, 1]; a
                ``policy_share`` on positions without a ``has_policy`` array.
        """
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if policy_share is None:
            logical = self._rng.integers(0, self._size, size=batch_size)   # 0 = oldest
        else:
            if not 0.0 < policy_share <= 1.0:
                raise ValueError(f"policy_share must lie in (0, 1], got {policy_share!r}")
            if "has_policy" not in self._data:
                raise ValueError("policy_share needs positions with a 'has_policy' array")
            has_p = self._data["has_policy"][self._slots(np.arange(self._size))].astype(bool)
            kinds = [np.flatnonzero(has_p), np.flatnonzero(~has_p)]
            n_p = int(round(batch_size * policy_share))
            counts = [n_p, batch_size - n_p]
            if kinds[0].size == 0 or kinds[1].size == 0:
                counts = [batch_size, 0] if kinds[0].size else [0, batch_size]
            logical = np.concatenate([kind[self._rng.integers(0, kind.size, size=c)]
                                      for kind, c in zip(kinds, counts) if c])
        idx = self._slots(logical)
        return {k: v[idx] for k, v in self._data.items()}

    def all(self) -> dict[str, np.ndarray]:
        """Every stored position, oldest first."""
        if self._data is None:
            return {}
        order = self._slots(np.arange(self._size))
        return {k: v[order] for k, v in self._data.items()}

    @property
    def first(self) -> int:
        """The number of the oldest position kept (positions are numbered 0, 1, … as added)."""
        return self.added - self._size

    def positions(self, first: int, count: int) -> dict[str, np.ndarray]:
        """Copies of positions number ``first`` to ``first + count - 1``, in order.

        Raises:
            ValueError: a position the buffer does not keep (before :attr:`first`, from ``added`` on).
        """
        if count < 0 or first < self.first or first + count > self.added:
            raise ValueError(f"positions {first}..{first + count - 1} are not all kept "
                             f"(the buffer keeps {self.first}..{self.added - 1})")
        if self._data is None:
            return {}
        idx = self._slots(np.arange(first - self.first, first - self.first + count))
        return {k: v[idx] for k, v in self._data.items()}

    def state_dict(self, data: bool = True) -> dict:
        """Everything needed to restore the buffer exactly (for checkpoints and resume); without
        ``data`` the positions are left out and ``size`` counts them (:meth:`positions` gives them)."""
        out = {"capacity": self.capacity, "added": self.added, "rng": self._rng.bit_generator.state}
        return {**out, "data": self.all()} if data else {**out, "size": self._size}

    @classmethod
    def from_state_dict(cls, state: dict) -> "ReplayBuffer":
        """The buffer :meth:`state_dict` describes; an empty ``data`` with ``added`` N gives an
        empty buffer whose next position is number N (positions then streamed in with :meth:`add`)."""
        buf = cls(state["capacity"])
        if state["data"]:
            buf.add(state["data"])
        buf.added = int(state["added"])
        buf._rng.bit_generator.state = state["rng"]
        return buf


# --------------------------------------------------------------------------- segment files
def segment_name(first: int) -> str:
    """The file name of the segment whose first position is number ``first``."""
    return f"seg-{first:012d}.bin"


def write_segment(folder: str | Path, first: int, count: int, fetch) -> dict:
    """Write positions number ``first`` to ``first + count - 1`` as one segment file in ``folder``
    (:func:`~yamblab.atomic.atomic_write`: a temporary file, fsync, rename), fetching them from
    ``fetch(first, count) -> dict of arrays`` a chunk at a time, so no more than a chunk of them
    is held at once.

    File format: the line ``YAMBLAB-REPLAY``, a JSON header line (format, first, count, rows per
    chunk, each field's name, dtype and shape after the first axis), then chunk after chunk,
    each field's rows of the chunk in turn (C order).

    Returns:
        its record for the checkpoint: ``name``, ``first``, ``count``, ``bytes``, ``sha256``.

    Raises:
        DiskFullError: no space left (named; nothing is left of the segment).
    """
    if count < 1:
        raise ValueError(f"a segment holds at least one position, not {count}")
    path = Path(folder) / segment_name(first)
    sha, size = hashlib.sha256(), [0]

    def blocks():
        probe = fetch(first, 1)
        fields = [[k, np.asarray(v).dtype.str, list(np.shape(v)[1:])] for k, v in probe.items()]
        row = sum(np.dtype(d).itemsize * int(np.prod(s)) for _, d, s in fields)
        rows = max(1, CHUNK_BYTES // max(1, row))
        header = json.dumps({"format": SEGMENT_FORMAT, "first": first, "count": count, "rows": rows,
                             "fields": fields}).encode() + b"\n"
        out = [SEGMENT_MAGIC, header]
        for start in range(first, first + count, rows):
            part = fetch(start, min(rows, first + count - start))
            out += [np.ascontiguousarray(part[k], dtype=d).reshape(-1).view(np.uint8).data for k, d, _ in fields]
            for b in out:
                sha.update(b)
                size[0] += len(b)
                yield b
            out = part = b = []           # this chunk freed before the next is fetched

    atomic_write(path, blocks())
    return {"name": path.name, "first": int(first), "count": int(count), "bytes": size[0], "sha256": sha.hexdigest()}


def read_segment(path: str | Path, record: dict, skip: int = 0):
    """The positions of the segment file ``path`` from its ``skip``-th on, a chunk at a time
    (dicts of arrays), checked against its ``record`` (:func:`write_segment`'s): its size before
    the first chunk, its header, and its SHA-256 once it is read through.

    Raises:
        DamagedFileError: the file missing, of another size, not a segment, or failing its checksum (named).
    """
    path = Path(path)
    _check_size(path, record)
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        magic, line = f.read(len(SEGMENT_MAGIC)), f.readline()
        sha.update(magic + line)
        try:
            head = json.loads(line)
            fields = [(k, np.dtype(d), tuple(s)) for k, d, s in head["fields"]]
            rows, count = int(head["rows"]), int(head["count"])
        except (ValueError, KeyError, TypeError):
            head, fields, rows, count = {}, [], 0, -1
        if (magic != SEGMENT_MAGIC or head.get("format") != SEGMENT_FORMAT or rows < 1
                or (head.get("first"), count) != (record["first"], record["count"])):
            raise DamagedFileError(f"replay segment {path} is damaged or another segment (its header does not "
                                   f"say the positions {record['first']}..{record['first'] + record['count'] - 1} "
                                   "the checkpoint names)")
        for start in range(0, count, rows):
            n, part = min(rows, count - start), {}
            for k, dtype, shape in fields:
                want = n * dtype.itemsize * int(np.prod(shape))
                raw = f.read(want)
                if len(raw) != want:
                    raise DamagedFileError(f"replay segment {path} is damaged (shorter than its header says)")
                sha.update(raw)
                part[k] = np.frombuffer(raw, dtype).reshape(n, *shape)
            if start + n > skip:
                yield {k: v[max(0, skip - start):] for k, v in part.items()}
    if sha.hexdigest() != record["sha256"]:
        raise DamagedFileError(f"replay segment {path} fails its SHA-256 checksum")


def check_segments(folder: str | Path, segments: list[dict]) -> None:
    """Check that every segment a checkpoint names is in ``folder`` at its recorded size.

    Raises:
        DamagedFileError: the first one missing or of another size (named).
    """
    for s in segments:
        _check_size(Path(folder) / s["name"], s)


def _check_size(path: Path, record: dict) -> None:
    if not path.is_file():
        raise DamagedFileError(f"replay segment {path} is missing (the checkpoint names it)")
    if path.stat().st_size != record["bytes"]:
        raise DamagedFileError(f"replay segment {path} is damaged: {path.stat().st_size} bytes, "
                               f"the checkpoint says {record['bytes']}")


def save_replay(folder: str | Path, state: dict, segments: list[dict], fetch) -> list[dict]:
    """Write the segments a checkpoint of the buffer needs and return the list it names.

    Args:
        folder: the run's replay folder.
        state: the buffer's ``state_dict(data=False)``.
        segments: the segments the previous checkpoint named (empty: none of this run's).
        fetch: ``fetch(first, count)``, the buffer's :meth:`ReplayBuffer.positions`.

    Returns:
        the segments of ``segments`` that still hold a kept position, then new segments (at most
        capacity / :data:`SEGMENT_SHARE` positions each) for the positions added since, so at
        most the buffer's positions are written. Nothing is deleted here: :func:`clean_replay`
        does that once the checkpoint naming the list is written.
    """
    added, oldest = int(state["added"]), int(state["added"]) - int(state["size"])
    keep = [s for s in segments if s["first"] + s["count"] > oldest]
    start = keep[-1]["first"] + keep[-1]["count"] if keep else oldest
    if keep and (keep[0]["first"] > oldest or start > added):      # another buffer's: write this one whole
        keep, start = [], oldest
    most = max(1, -(-int(state["capacity"]) // SEGMENT_SHARE))
    while start < added:
        n = min(most, added - start)
        keep.append(write_segment(folder, start, n, fetch))
        start += n
    return keep


def load_replay(folder: str | Path, state: dict, add) -> int:
    """Feed the positions a checkpoint's buffer ``state`` keeps (its ``segments`` in ``folder``)
    to ``add``, oldest first, a chunk at a time; returns how many.

    Every segment's size is checked before the first position is fed, and its checksum once it
    is read through.

    Raises:
        DamagedFileError: a segment missing or damaged (named), or segments that do not hold
            the positions the checkpoint says.
    """
    folder = Path(folder)
    oldest, added = int(state["added"]) - int(state["size"]), int(state["added"])
    segments = state["segments"]
    ends = [s["first"] + s["count"] for s in segments]
    if added > oldest and (not segments or segments[0]["first"] > oldest or ends[-1] != added
                           or any(s["first"] != e for s, e in zip(segments[1:], ends))):
        raise DamagedFileError(f"the checkpoint's replay segments in {folder} do not hold the positions "
                               f"{oldest}..{added - 1} it keeps")
    check_segments(folder, segments)
    fed = 0
    for s in segments:
        for part in read_segment(folder / s["name"], s, skip=max(0, oldest - s["first"])):
            fed += len(next(iter(part.values())))
            add(part)
    return fed


def clean_replay(folder: str | Path, segments: list[dict]) -> None:
    """Remove every file of the replay folder but ``segments`` (segments the ring dropped, a
    killed checkpoint's segments and temporary files), and the folder when nothing is left.
    Call it only after the checkpoint that names ``segments`` is written."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    keep = {s["name"] for s in segments}
    for p in folder.iterdir():
        if p.name in keep:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
    if not keep:
        try:
            folder.rmdir()
        except OSError:
            pass
