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
