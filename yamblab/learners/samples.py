"""The training sample format: plain numpy arrays, one row per position.

A :class:`SampleBatch` is what self-play produces and what the learner consumes; any replay
buffer can store, concatenate and sample it (it pickles cheaply: numpy arrays only).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from yamblab.games.encoding import EncodedBatch
from yamblab.model.tokenizer import Inputs


@dataclass
class SampleBatch:
    """N training positions.

    Attributes:
        columns, column_type, column_features, dice, state, legal: the encoding
            (:class:`~yamblab.games.encoding.EncodedBatch`; ``column_type`` and ``dice``
            stored as int8).
        policy_target: float32 (N, 208), zero rows where ``has_policy`` is False.
        has_policy: bool (N,): False for boundary positions (no decision to make).
        value_target: float32 (N,): points the game actually scored from this position on.
        bonus_target: float32 (N,): 1 if the game ended with its bonus reached (Yahtzee:
            upper section ≥ 63).
    """

    columns: np.ndarray
    column_type: np.ndarray
    column_features: np.ndarray
    dice: np.ndarray
    state: np.ndarray
    legal: np.ndarray
    policy_target: np.ndarray
    has_policy: np.ndarray
    value_target: np.ndarray
    bonus_target: np.ndarray

    def __len__(self) -> int:
        return int(self.value_target.shape[0])

    @classmethod
    def from_parts(cls, enc: EncodedBatch, policy_target: np.ndarray, has_policy: np.ndarray,
                   value_target: np.ndarray, bonus_target: np.ndarray) -> "SampleBatch":
        return cls(
            columns=enc.columns.astype(np.float32), column_type=enc.column_type.astype(np.int8),
            column_features=enc.column_features.astype(np.float32), dice=enc.dice.astype(np.int8),
            state=enc.state.astype(np.float32), legal=enc.legal.astype(np.bool_),
            policy_target=np.asarray(policy_target, np.float32), has_policy=np.asarray(has_policy, np.bool_),
            value_target=np.asarray(value_target, np.float32), bonus_target=np.asarray(bonus_target, np.float32))

    @classmethod
    def concat(cls, parts: list["SampleBatch"]) -> "SampleBatch":
        """One batch of all the rows of ``parts`` (in order).

        Raises:
            ValueError: an empty list.
        """
        if not parts:
            raise ValueError("nothing to concatenate")
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})

    def take(self, idx) -> "SampleBatch":
        """The rows ``idx`` (an index array or slice)."""
        return SampleBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def to_torch(self, device="cpu") -> tuple[Inputs, dict[str, torch.Tensor]]:
        """``(Inputs, targets)`` on ``device``; targets: policy, has_policy, value, bonus."""
        x = Inputs(
            columns=torch.as_tensor(self.columns, device=device),
            column_type=torch.as_tensor(self.column_type.astype(np.int64), device=device),
            column_features=torch.as_tensor(self.column_features, device=device),
            dice=torch.as_tensor(self.dice.astype(np.int64), device=device),
            state=torch.as_tensor(self.state, device=device),
            legal=torch.as_tensor(self.legal, device=device),
        )
        t = {
            "policy": torch.as_tensor(self.policy_target, device=device),
            "has_policy": torch.as_tensor(self.has_policy, device=device),
            "value": torch.as_tensor(self.value_target, device=device),
            "bonus": torch.as_tensor(self.bonus_target, device=device),
        }
        return x, t
