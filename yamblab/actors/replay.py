"""The replay buffer: a bounded FIFO of positions, sampled uniformly for the learner.

Positions are stored as a dict of numpy arrays with a common leading dimension (whatever the
self-play workers produce: encoded positions, policy targets, value targets …). The buffer is
bounded by a size budget in positions: adding past it drops the oldest positions first.
"""

from __future__ import annotations

import numpy as np

from yamblab.errors import ConfigError


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

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """A uniform random batch (with replacement) of ``batch_size`` positions.

        Raises:
            ValueError: the buffer is empty.
        """
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        logical = self._rng.integers(0, self._size, size=batch_size)   # 0 = oldest
        idx = (self._next - self._size + logical) % self.capacity
        return {k: v[idx] for k, v in self._data.items()}

    def all(self) -> dict[str, np.ndarray]:
        """Every stored position, oldest first."""
        if self._data is None:
            return {}
        order = (self._next - self._size + np.arange(self._size)) % self.capacity
        return {k: v[order] for k, v in self._data.items()}

    def state_dict(self) -> dict:
        """Everything needed to restore the buffer exactly (for checkpoints and resume)."""
        return {"capacity": self.capacity, "data": self.all(), "added": self.added,
                "rng": self._rng.bit_generator.state}

    @classmethod
    def from_state_dict(cls, state: dict) -> "ReplayBuffer":
        buf = cls(state["capacity"])
        if state["data"]:
            buf.add(state["data"])
        buf.added = int(state["added"])
        buf._rng.bit_generator.state = state["rng"]
        return buf
