"""Policy, value and auxiliary heads (the YoloYamb post, "Heads").

Policy: one softmax over the 208 shared actions (:mod:`yamblab.games.encoding`).

* Placements (0..127): each column token cross-attends to the dice tokens and the state
  token ("what can I score here with these dice?"); a shared projection gives one logit per
  row; the 16 dice facts (:func:`~yamblab.model.tokenizer.score_features`) are projected to
  16 per-row terms and added on top.
* Holds (128..191): each die casts a keep vote ``tanh(w · die token)`` in [-1, 1]; hold
  pattern ``h`` scores ``g · Σ_i s_i(h) v_i`` with ``s_i = +1`` if ``h`` holds die ``i`` and
  −1 otherwise (absent dice vote 0), ``g`` a learned gain. The optional hold correction is an
  MLP over all dice tokens together that adds one learned term per pattern (the YoloYamb post, V3.3:
  independent votes cannot express "hold 1-2-3-4 for the straight").
* Announcements (192..207): a linear map of the state token.

Value: mean pooling and/or a learned-query attention pooling of the value-branch tokens,
then an MLP to a distribution over bins of the points still to come (or to one scalar).
"""

from __future__ import annotations

import torch
from torch import nn

from yamblab.games.encoding import MAX_DICE, N_COLS, N_HOLD_PATTERNS, N_ROWS, SCORE_SCALE
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW
from yamblab.model.blocks import Attention
from yamblab.model.tokenizer import DICE_TOKEN0, N_COL_TOKENS, N_SCORE_FEATURES, STATE_TOKEN, score_features


def hold_signs() -> torch.Tensor:
    """float32 (64, 6): ``+1`` where hold pattern ``h`` holds die ``i`` (bit ``i``), else −1."""
    h = torch.arange(N_HOLD_PATTERNS)[:, None]
    bits = (h >> torch.arange(MAX_DICE)[None]) & 1
    return bits.to(torch.float32) * 2 - 1


class PolicyHead(nn.Module):
    """Raw (unmasked) logits float32 (B, 208) from the policy-branch tokens (B, 15, d)."""

    def __init__(self, d_model: int, n_heads: int, qk_norm: bool, use_score_features: bool,
                 hold_correction: bool):
        super().__init__()
        self.ctx_norm = nn.RMSNorm(d_model)
        self.cross = Attention(d_model, n_heads, qk_norm)
        self.row = nn.Linear(d_model, N_ROWS)
        self.use_score_features = use_score_features
        if use_score_features:
            self.score = nn.Linear(N_SCORE_FEATURES, N_ROWS, bias=False)
            nn.init.zeros_(self.score.weight)
        self.vote = nn.Linear(d_model, 1)
        self.hold_gain = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("signs", hold_signs(), persistent=False)
        self.hold_correction = None
        if hold_correction:
            self.hold_correction = nn.Sequential(
                nn.Linear(MAX_DICE * d_model, d_model), nn.SiLU(), nn.Linear(d_model, N_HOLD_PATTERNS))
            nn.init.zeros_(self.hold_correction[-1].weight)
            nn.init.zeros_(self.hold_correction[-1].bias)
        self.announce = nn.Linear(d_model, N_ROWS)

    def forward(self, tok: torch.Tensor, dice: torch.Tensor) -> torch.Tensor:
        B = tok.shape[0]
        cols = tok[:, :N_COL_TOKENS]
        ctx = self.ctx_norm(tok[:, DICE_TOKEN0:])                  # 6 dice + the state token
        h = cols + self.cross(cols, ctx)
        place = self.row(h)                                         # (B, 8, 16)
        if self.use_score_features:
            place = place + self.score(score_features(dice))[:, None, :]
        dtok = tok[:, DICE_TOKEN0:STATE_TOKEN]                      # (B, 6, d)
        present = (dice > 0).to(tok.dtype)
        votes = torch.tanh(self.vote(dtok).squeeze(-1)) * present   # (B, 6)
        holds = self.hold_gain * (votes @ self.signs.T.to(tok.dtype))   # (B, 64)
        if self.hold_correction is not None:
            holds = holds + self.hold_correction(dtok.reshape(B, -1))
        ann = self.announce(tok[:, STATE_TOKEN])
        return torch.cat([place.reshape(B, -1), holds, ann], dim=1)


class ValueHead(nn.Module):
    """Value logits float32 (B, n_out) from the value-branch tokens (B, 15, d).

    ``n_out`` is the number of bins, or 1 for a scalar head.
    """

    def __init__(self, d_model: int, n_heads: int, qk_norm: bool, pool: str, n_out: int):
        super().__init__()
        self.pool = pool
        if pool in ("query", "both"):
            self.query = nn.Parameter(torch.randn(1, 1, d_model) * 0.02)
            self.attn = Attention(d_model, n_heads, qk_norm)
        width = d_model * (2 if pool == "both" else 1)
        self.mlp = nn.Sequential(nn.Linear(width, d_model), nn.SiLU(), nn.Linear(d_model, n_out))

    def forward(self, tok: torch.Tensor) -> torch.Tensor:
        parts = []
        if self.pool in ("mean", "both"):
            parts.append(tok.mean(dim=1))
        if self.pool in ("query", "both"):
            q = self.query.expand(tok.shape[0], -1, -1)
            parts.append(self.attn(q, tok)[:, 0])
        return self.mlp(torch.cat(parts, dim=-1))


class AuxHeads(nn.Module):
    """Auxiliary heads on the shared trunk (the YoloYamb post): they shape the trunk, not the play.

    Returns ``(bonus_logit float (B,), straight_logits float (B, 7))``: the logit that the
    game ends with its bonus reached (Yahtzee: upper section ≥ 63) and the class 0..6 of the
    longest run of consecutive faces among the dice.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.bonus = nn.Linear(d_model, 1)
        self.straight = nn.Linear(d_model, 7)

    def forward(self, tok: torch.Tensor):
        bonus = self.bonus(tok.mean(dim=1)).squeeze(-1)
        straight = self.straight(tok[:, DICE_TOKEN0:STATE_TOKEN].mean(dim=1))
        return bonus, straight


BOUNDARY_FEATURES = 13 + 63 + 2
#: Inputs of the ``"card"`` boundary features: 8 × 16 boxes × (filled, score / 80) + 8 × 4.
CARD_FEATURES = 8 * 16 * 2 + 8 * 4


#: Inputs of the ``"card_middle"`` boundary features: the card's 288 and 8 × 2 middle products.
CARD_MIDDLE_FEATURES = CARD_FEATURES + N_COLS * 2


def card_features(columns: torch.Tensor, column_features: torch.Tensor) -> torch.Tensor:
    """Features of any card in the shared layout, float32 (B, 288): every box's filled flag and
    score / 80 (``columns`` flattened), then each column's four bonus features."""
    return torch.cat([columns.flatten(1), column_features.flatten(1)], dim=1)


def middle_products(columns: torch.Tensor) -> torch.Tensor:
    """The known parts of each Yamb column's middle term ``Ones × (Max − Min)``, float (B, 8, 2).

    Per column, ``Ones × Max`` and ``Ones × Min`` in points / 60 (the scale of the middle-term
    bonus feature), each 0 unless both of its boxes are filled (an open box encodes score 0).
    With them the middle term a card can still expect is linear in its features whichever of
    Ones, Max and Min are filled: ``o·(mx − E[mn]) = o·mx − o·E[mn]``, ``E[o]·(mx − mn)``,
    ``o·(E[mx] − E[mn])`` (clamping aside), so the MLP need not build a product itself. Rows
    are Yamb's (:data:`~yamblab.games.yamb.rules.ONES_ROW`, ``MAX_ROW``, ``MIN_ROW``; the YoloYamb post's
    "Ones count (which multiply that bonus)").

    Args:
        columns: float (B, 8, 16, 2) of the shared encoding: [filled flag, score / 80].
    """
    # only the three rows, read once: this runs on every leaf card full-turn search values
    pts = columns[:, :, [ONES_ROW, MAX_ROW, MIN_ROW], 1] * SCORE_SCALE    # (B, 8, 3) points, 0 open
    return pts[..., :1] * pts[..., 1:] / 60.0


def card_middle_features(columns: torch.Tensor, column_features: torch.Tensor) -> torch.Tensor:
    """:func:`card_features` followed by :func:`middle_products`, float32 (B, 304), for Yamb."""
    return torch.cat([card_features(columns, column_features), middle_products(columns).flatten(1)], dim=1)


def boundary_features(columns: torch.Tensor, column_features: torch.Tensor) -> torch.Tensor:
    """Features of Yahtzee cards for :class:`BoundaryValueHead`, float32 (B, 78).

    Args:
        columns: float (B, 8, 16, 2) and column_features: float (B, 8, 4) of the shared
            encoding (:mod:`yamblab.games.encoding`; column 0 is the Yahtzee card).

    Returns:
        the 13 filled flags, the upper subtotal capped at 63 as a thermometer (63 flags
        ``subtotal > i``) and divided by 63, and 1 if the Yahtzee box holds a 50.
    """
    filled = columns[:, 0, :13, 0]
    up = (column_features[:, 0, 0] * 60.0).round().clamp(0.0, 63.0)
    thermo = (up[:, None] > torch.arange(63, device=up.device, dtype=up.dtype)[None]).to(filled.dtype)
    y50 = (columns[:, 0, 11, 1] * 80.0 > 25.0).to(filled.dtype)
    return torch.cat([filled, thermo, (up / 63.0)[:, None], y50[:, None]], dim=1)


class BoundaryValueHead(nn.Module):
    """Scalar points still to come of a boundary position, float (B,), from its card.

    A two-layer SiLU MLP on :func:`boundary_features` (``"yahtzee"``), :func:`card_features`
    (``"card"``: any card) or :func:`card_middle_features` (``"card_middle"``: a Yamb card with
    its middle term's known products); the output is scaled by ``scale`` points so that the last
    layer works in units of order one.

    Raises:
        ValueError: an unknown ``features`` name.
    """

    _FEATURES = {"yahtzee": (boundary_features, BOUNDARY_FEATURES), "card": (card_features, CARD_FEATURES),
                 "card_middle": (card_middle_features, CARD_MIDDLE_FEATURES)}

    def __init__(self, hidden: int, scale: float = 100.0, features: str = "yahtzee"):
        super().__init__()
        self.scale = scale
        if features not in self._FEATURES:
            raise ValueError(f"unknown boundary features {features!r} (one of {', '.join(self._FEATURES)})")
        self.features, n_in = self._FEATURES[features]
        self.mlp = nn.Sequential(nn.Linear(n_in, hidden), nn.SiLU(),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, columns: torch.Tensor, column_features: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.features(columns, column_features))[:, 0] * self.scale
