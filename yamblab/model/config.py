"""Network configuration (pydantic) and the named size presets.

Every architectural idea of the YoloYamb post ("Inside Iteration 1000") is a switch here so that it
can be ablated: the split of the trunk into shared / policy / value layers, QK-Norm, the
score features of the policy head, the hold-correction head, the value head's pooling and
its output form (a distribution over bins or a scalar), and the auxiliary heads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yamblab.errors import UnknownVariantError


class ModelConfig(BaseModel):
    """Sizes and switches of :class:`yamblab.model.network.YambNet`.

    Attributes:
        d_model: token width.
        n_heads: attention heads (must divide ``d_model``).
        n_shared: transformer blocks of the shared trunk.
        n_policy, n_value: blocks of the separate policy and value branches (0 and 0: a
            fully shared trunk; YoloYamb split 3 + 3 + 3 at iteration 470).
        ffn_hidden: SwiGLU hidden width (seed: 512 for width 192, about 8/3 × width).
        column_hidden: hidden width of the shared column MLP (default: ``d_model``).
        qk_norm: RMSNorm on queries and keys inside attention.
        score_features: add the 16 dice facts to the placement logits.
        hold_correction: the head that sees all dice together and corrects the hold-pattern
            logits (the YoloYamb post, V3.3).
        value_head: ``"bins"`` (a distribution over ``value_bins`` bins of points still to
            come, the YoloYamb post's V3.2) or ``"scalar"``.
        value_bins: number of bins (centres evenly spaced from 0 to ``value_max``).
        value_max: points of the last bin centre. Default 500 for Yahtzee: the points still to
            come of a new game exceed 500 in far fewer than 1 game in 1000 (the seed used 1500
            for Yumbee, 30 points a bin).
        value_pool: ``"mean"``, ``"query"`` (learned-query attention) or ``"both"`` (seed).
        aux_heads: auxiliary heads for bonus progress and the longest straight (the YoloYamb post).
        boundary_head: a separate MLP value head for boundary positions (no dice), which
            is all that full-turn search asks the network for. It reads the Yahtzee card
            directly (see ``boundary_features``) and outputs a scalar (points), trained by squared
            error. Off by default. The tiny transformer's value head fitted even oracle values
            too coarsely for full-turn search (regret ~27 after supervised fitting, against
            ~3.6 for this head).
        boundary_hidden: hidden width of the two layers of that MLP.
        boundary_features: what that MLP reads: ``"yahtzee"`` (the Yahtzee card's 78
            features above) or ``"card"`` (any game's card in the shared layout: every box's
            filled flag and score / 80, and each column's four bonus features; 288 inputs; for
            Yamb) or ``"card_middle"`` (Yamb: the card's 288 and each column's known products of
            its middle term, Ones × Max and Ones × Min; 304 inputs).
    """

    model_config = ConfigDict(extra="forbid")

    d_model: int = Field(32, ge=8, le=2048)
    n_heads: int = Field(2, ge=1, le=64)
    n_shared: int = Field(1, ge=0, le=48)
    n_policy: int = Field(1, ge=0, le=48)
    n_value: int = Field(1, ge=0, le=48)
    ffn_hidden: int = Field(64, ge=4, le=16384)
    column_hidden: int | None = Field(None, ge=4, le=16384)
    qk_norm: bool = True
    score_features: bool = True
    hold_correction: bool = True
    value_head: Literal["bins", "scalar"] = "bins"
    value_bins: int = Field(51, ge=2, le=1024)
    value_max: float = Field(500.0, gt=0.0, le=100000.0)
    value_pool: Literal["mean", "query", "both"] = "both"
    aux_heads: bool = True
    boundary_head: bool = False
    boundary_hidden: int = Field(256, ge=4, le=16384)
    boundary_features: Literal["yahtzee", "card", "card_middle"] = "yahtzee"

    @model_validator(mode="after")
    def _check(self) -> "ModelConfig":
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads {self.n_heads} must divide d_model {self.d_model}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"head width d_model / n_heads = {self.d_model // self.n_heads} must be even")
        if self.n_shared + self.n_policy + self.n_value == 0:
            raise ValueError("the network needs at least one transformer block")
        return self

    @classmethod
    def preset(cls, name: str, **overrides) -> "ModelConfig":
        """A named preset (:data:`PRESETS`) with optional field overrides.

        Raises:
            UnknownVariantError: no preset of that name.
            pydantic.ValidationError: an override out of range.
        """
        if name not in PRESETS:
            raise UnknownVariantError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


#: Named sizes. ``tiny`` trains on a laptop CPU; ``seed`` is the YoloYamb post's iteration-1000 size
#: (width 192, 4 heads, 3 shared + 3 policy + 3 value layers, SwiGLU width 512) for a GPU.
PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=32, n_heads=2, n_shared=1, n_policy=1, n_value=1, ffn_hidden=64),
    "small": dict(d_model=64, n_heads=4, n_shared=2, n_policy=1, n_value=1, ffn_hidden=176),
    "seed": dict(d_model=192, n_heads=4, n_shared=3, n_policy=3, n_value=3, ffn_hidden=512),
}
