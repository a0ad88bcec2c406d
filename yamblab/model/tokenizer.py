"""The tokenizer: a position in the shared layout becomes 15 tokens (the YoloYamb post, "Tokenizer").

* 8 column tokens: the 16 filled flags and 16 scores (÷ 80) of a column through one shared
  MLP, plus a learned column-type embedding ("which rules apply here"), plus a linear map of
  the column's 4 bonus features (upper sum, gap to the bonus threshold, the Max−Min term,
  the Ones count).
* 6 dice tokens: a shared face embedding (face 0 = no die) plus a slot embedding, so that
  "hold die 3" knows which physical die it is.
* 1 game-state token: a linear map of the 32-wide state vector.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import nn

from yamblab.games.encoding import COLUMN_TYPES, MAX_DICE, N_COLS, N_ROWS, STATE_DIM, EncodedBatch

N_COL_TOKENS = N_COLS                  # tokens 0..7
DICE_TOKEN0 = N_COLS                   # tokens 8..13
STATE_TOKEN = N_COLS + MAX_DICE        # token 14
N_TOKENS = STATE_TOKEN + 1             # 15
N_SCORE_FEATURES = 16


@dataclass
class Inputs:
    """A batch of positions as tensors (the fields of :class:`EncodedBatch`).

    Shapes: ``columns`` float32 (B, 8, 16, 2), ``column_type`` int64 (B, 8),
    ``column_features`` float32 (B, 8, 4), ``dice`` int64 (B, 6) faces 0..6,
    ``state`` float32 (B, 32), ``legal`` bool (B, 208).
    """

    columns: torch.Tensor
    column_type: torch.Tensor
    column_features: torch.Tensor
    dice: torch.Tensor
    state: torch.Tensor
    legal: torch.Tensor

    @classmethod
    def from_encoded(cls, enc: EncodedBatch, device: torch.device | str = "cpu") -> "Inputs":
        """Tensors of an :class:`EncodedBatch` (copied to ``device``)."""
        return cls(
            columns=torch.as_tensor(np.ascontiguousarray(enc.columns, np.float32), device=device),
            column_type=torch.as_tensor(np.ascontiguousarray(enc.column_type, np.int64), device=device),
            column_features=torch.as_tensor(np.ascontiguousarray(enc.column_features, np.float32), device=device),
            dice=torch.as_tensor(np.ascontiguousarray(enc.dice, np.int64), device=device),
            state=torch.as_tensor(np.ascontiguousarray(enc.state, np.float32), device=device),
            legal=torch.as_tensor(np.ascontiguousarray(enc.legal, np.bool_), device=device),
        )

    def to(self, device) -> "Inputs":
        return Inputs(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def __len__(self) -> int:
        return int(self.dice.shape[0])

    def __getitem__(self, idx) -> "Inputs":
        return Inputs(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


def score_features(dice: torch.Tensor) -> torch.Tensor:
    """The 16 dice facts added to the placement logits (the YoloYamb post, "Heads").

    Args:
        dice: int64 (B, 6) faces 1..6, 0 = no die.

    Returns:
        float32 (B, 16): counts of ones … sixes / 5, sum / 30, number of dice / 6, and flags
        for a pair, two pairs, three / four / five of a kind, a full house, a small straight
        (4 in a row) and a large straight (5 in a row).
    """
    onehot = torch.nn.functional.one_hot(dice.clamp(0, 6), 7)[..., 1:].to(torch.float32)
    counts = onehot.sum(dim=1)                                    # (B, 6)
    present = (counts > 0).to(torch.float32)
    total = (dice.clamp(0, 6).to(torch.float32)).sum(dim=1, keepdim=True)
    n = counts.sum(dim=1, keepdim=True)
    mx = counts.max(dim=1, keepdim=True).values
    pairs = (counts >= 2).to(torch.float32).sum(dim=1, keepdim=True)
    lr = torch.zeros_like(total)                                  # longest run of faces
    cur = torch.zeros_like(total)
    for f in range(6):
        cur = (cur + 1) * present[:, f:f + 1]
        lr = torch.maximum(lr, cur)
    full_house = ((counts == 3).any(dim=1, keepdim=True) & (counts == 2).any(dim=1, keepdim=True)) | (mx >= 5)
    feats = torch.cat([
        counts / 5.0, total / 30.0, n / 6.0,
        (mx >= 2).float(), (pairs >= 2).float(), (mx >= 3).float(), (mx >= 4).float(), (mx >= 5).float(),
        full_house.float(), (lr >= 4).float(), (lr >= 5).float(),
    ], dim=1)
    return feats


def longest_straight(dice: torch.Tensor) -> torch.Tensor:
    """Longest run of consecutive faces among the dice, int64 (B,) in 0..6 (aux-head target)."""
    onehot = torch.nn.functional.one_hot(dice.clamp(0, 6), 7)[..., 1:]
    present = (onehot.sum(dim=1) > 0).to(torch.int64)
    lr = torch.zeros(dice.shape[0], dtype=torch.int64, device=dice.device)
    cur = torch.zeros_like(lr)
    for f in range(6):
        cur = (cur + 1) * present[:, f]
        lr = torch.maximum(lr, cur)
    return lr


class Tokenizer(nn.Module):
    """Turns :class:`Inputs` into tokens float32 (B, 15, d): 8 columns, 6 dice, 1 state."""

    def __init__(self, d_model: int, column_hidden: int | None = None):
        super().__init__()
        h = column_hidden or d_model
        self.column_mlp = nn.Sequential(nn.Linear(2 * N_ROWS, h), nn.SiLU(), nn.Linear(h, d_model))
        self.column_type = nn.Embedding(len(COLUMN_TYPES), d_model)
        self.column_features = nn.Linear(4, d_model, bias=False)
        self.face = nn.Embedding(7, d_model)
        self.slot = nn.Embedding(MAX_DICE, d_model)
        self.state = nn.Linear(STATE_DIM, d_model)
        nn.init.normal_(self.column_type.weight, std=0.02)
        nn.init.normal_(self.face.weight, std=0.5)
        nn.init.normal_(self.slot.weight, std=0.02)

    def forward(self, x: Inputs) -> torch.Tensor:
        B = x.dice.shape[0]
        cols = x.columns.reshape(B, N_COLS, 2 * N_ROWS)
        col_tok = self.column_mlp(cols) + self.column_type(x.column_type) + self.column_features(x.column_features)
        slots = torch.arange(MAX_DICE, device=x.dice.device)
        dice_tok = self.face(x.dice.clamp(0, 6)) + self.slot(slots)[None]
        state_tok = self.state(x.state)[:, None]
        return torch.cat([col_tok, dice_tok, state_tok], dim=1)
