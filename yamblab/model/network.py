"""The policy-value transformer of the YoloYamb post ("Inside Iteration 1000"), sized by configuration.

Stages: the :class:`~yamblab.model.tokenizer.Tokenizer` makes 15 tokens, a shared trunk of
pre-norm blocks runs over them, then separate policy and value branches (each ending in its
own RMSNorm) feed the policy head and the value head. Auxiliary heads read the trunk.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from yamblab.games.encoding import EncodedBatch
from yamblab.model.blocks import Attention, Stack, SwiGLU
from yamblab.model.config import ModelConfig
from yamblab.model.heads import AuxHeads, BoundaryValueHead, PolicyHead, ValueHead
from yamblab.model.tokenizer import Inputs, Tokenizer


def autocast(device, bf16: bool):
    """bf16 autocast on a CUDA device when ``bf16`` is on; nothing on a CPU (its results stay
    float32, as before the switch existed)."""
    if bf16 and torch.device(device).type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def full_precision(t: torch.Tensor):
    """A region that runs in float32 even inside :func:`autocast`: the value heads, whose
    points (up to ``value_max``) bf16 would round to several points."""
    return torch.autocast(t.device.type, enabled=False)


@dataclass
class NetOutput:
    """What :meth:`YambNet.forward` returns (B positions).

    Attributes:
        logits: float (B, 208): policy logits with illegal actions at the dtype's minimum.
        value: float (B,): expected points still to come.
        value_logits: float (B, bins) for a bins head, (B, 1) scaled value / ``value_max``
            for a scalar head.
        bonus_logit, straight_logits: aux outputs (B,), (B, 7); ``None`` without aux heads.
        boundary_value: float (B,) the boundary head's points (``None`` without it); ``value``
            takes it on the positions without dice.
        trunk_rows: bool (B,): the positions the transformer ran on, or ``None`` for all of
            them. With a boundary head, positions without dice (turn starts) are valued by the
            boundary head alone and skip the transformer: on those rows ``logits`` are the
            dtype's minimum (no legal action), ``value_logits`` and the aux outputs are zeros
            and carry no gradient.
    """

    logits: torch.Tensor
    value: torch.Tensor
    value_logits: torch.Tensor
    bonus_logit: torch.Tensor | None = None
    straight_logits: torch.Tensor | None = None
    boundary_value: torch.Tensor | None = None
    trunk_rows: torch.Tensor | None = None


class YambNet(nn.Module):
    """Policy-value network over the shared encoding (Yahtzee and every Yamb variant).

    Args:
        cfg: a :class:`~yamblab.model.config.ModelConfig`.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        d, h, f, qk = cfg.d_model, cfg.n_heads, cfg.ffn_hidden, cfg.qk_norm
        self.tokenizer = Tokenizer(d, cfg.column_hidden)
        self.trunk = Stack(cfg.n_shared, d, h, f, qk, final_norm=False)
        self.policy_branch = Stack(cfg.n_policy, d, h, f, qk, final_norm=True)
        self.value_branch = Stack(cfg.n_value, d, h, f, qk, final_norm=True)
        self.policy_head = PolicyHead(d, h, qk, cfg.score_features, cfg.hold_correction)
        n_out = cfg.value_bins if cfg.value_head == "bins" else 1
        self.value_head = ValueHead(d, h, qk, cfg.value_pool, n_out)
        self.aux = AuxHeads(d) if cfg.aux_heads else None
        self.boundary_head = BoundaryValueHead(cfg.boundary_hidden, features=cfg.boundary_features) if cfg.boundary_head else None
        self.register_buffer("bin_centers", torch.linspace(0.0, cfg.value_max, cfg.value_bins), persistent=False)
        #: :meth:`predict` and :meth:`predict_value` run under bf16 autocast on a CUDA device
        #: (``runtime.bf16``; no effect on a CPU)
        self.inference_bf16 = False

    # ------------------------------------------------------------------ forward
    def forward(self, x: Inputs, transformer=None) -> NetOutput:
        """Run the network.

        Args:
            x: :class:`Inputs` of B positions.
            transformer: a callable that stands in for :meth:`transformer_pass` (same
                arguments, same results), such as its ``torch.compile`` form that the learner
                uses with ``runtime.learner_compile``; ``None``: :meth:`transformer_pass`.
        """
        if self.boundary_head is not None:
            rows = x.dice[:, 0] != 0
            if not bool(rows.all()):
                return self._forward_split(x, rows, transformer)
        return self._forward_all(x, transformer)

    def _forward_split(self, x: Inputs, rows: torch.Tensor, transformer=None) -> NetOutput:
        """Positions without dice through the boundary head alone, the others through the
        transformer too (a training batch of turn starts and decisions costs the transformer
        only its decisions)."""
        b = len(x)
        bv = self._boundary(x.columns, x.column_features)
        n_out = self.cfg.value_bins if self.cfg.value_head == "bins" else 1
        dtype = bv.dtype
        logits = x.legal.new_zeros((b, x.legal.shape[1]), dtype=dtype).fill_(torch.finfo(dtype).min)
        value_logits = bv.new_zeros((b, n_out))
        value = bv
        bonus = straight = None
        if self.aux is not None:
            bonus, straight = bv.new_zeros(b), bv.new_zeros((b, 7))
        if bool(rows.any()):
            inner = self._forward_all(x[rows], transformer)
            idx = rows.nonzero(as_tuple=True)[0]
            logits = logits.index_put((idx,), inner.logits.to(dtype))
            value_logits = value_logits.index_put((idx,), inner.value_logits.to(dtype))
            value = value.index_put((idx,), inner.value.to(dtype))
            if self.aux is not None:
                bonus = bonus.index_put((idx,), inner.bonus_logit.to(dtype))
                straight = straight.index_put((idx,), inner.straight_logits.to(dtype))
        return NetOutput(logits, value, value_logits, bonus, straight, bv, rows)

    def _boundary(self, columns: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """The boundary head's points, float32 (under autocast too: see :func:`full_precision`)."""
        with full_precision(columns):
            return self.boundary_head(columns.float(), features.float())

    def transformer_pass(self, x: Inputs) -> tuple:
        """The transformer alone on B positions: tokenizer, trunk, branches and heads, with no
        data-dependent branch (so ``torch.compile`` makes one graph of it).

        Returns:
            ``(logits, value_logits, value, bonus_logit, straight_logits)`` as in
            :class:`NetOutput` (the value is the transformer's own on every row; the aux
            outputs ``None`` without aux heads).
        """
        tok = self.trunk(self.tokenizer(x))
        p = self.policy_branch(tok)
        v = self.value_branch(tok)
        logits = self.policy_head(p, x.dice)
        logits = logits.masked_fill(~x.legal, torch.finfo(logits.dtype).min)
        vl, value = self._value_head(v)
        bonus = straight = None
        if self.aux is not None:
            bonus, straight = self.aux(tok)
        return logits, vl, value, bonus, straight

    def value_pass(self, x: Inputs) -> torch.Tensor:
        """The value alone, float32 (B,) points: the trunk, the value branch and the value head
        (the boundary head on rows without dice, when there is one); the policy branch, which a
        search leaf does not need, is skipped. The same values as :meth:`forward`'s."""
        rows = x.dice[:, 0] != 0
        if self.boundary_head is None or bool(rows.all()):     # search leaves with dice
            return self._transformer_value(x)
        value = self._boundary(x.columns, x.column_features)
        if bool(rows.any()):
            idx = rows.nonzero(as_tuple=True)[0]
            value = value.index_put((idx,), self._transformer_value(x[rows]).to(value.dtype))
        return value

    def _transformer_value(self, x: Inputs) -> torch.Tensor:
        return self._value_head(self.value_branch(self.trunk(self.tokenizer(x))))[1]

    def _value_head(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(value_logits, value)`` of the value-branch tokens, in float32."""
        with full_precision(v):
            vl = self.value_head(v.float())
            if self.cfg.value_head == "bins":
                return vl, vl.softmax(dim=-1) @ self.bin_centers.to(vl.dtype)
            return vl, vl[:, 0] * self.cfg.value_max

    def _forward_all(self, x: Inputs, transformer=None) -> NetOutput:
        logits, vl, value, bonus, straight = (transformer or self.transformer_pass)(x)
        bv = None
        if self.boundary_head is not None:
            # Only when some position has no dice: a batch of decisions alone leaves the
            # boundary head out (no zero gradients for it, so AdamW does not move it).
            nod = x.dice[:, 0] == 0
            if bool(nod.any()):
                bv = self._boundary(x.columns, x.column_features)
                value = torch.where(nod, bv.to(value.dtype), value)
        return NetOutput(logits, value, vl, bonus, straight, bv)

    # ------------------------------------------------------------------ helpers
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @contextlib.contextmanager
    def _inferring(self):
        """Evaluation mode (put back after; switching walks every module, so only when needed)
        under :func:`autocast` as :attr:`inference_bf16` says."""
        was = self.training
        if was:
            self.eval()
        try:
            with autocast(self.device, self.inference_bf16):
                yield
        finally:
            if was:
                self.train(True)

    @torch.no_grad()
    def predict(self, enc: EncodedBatch | Inputs, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
        """Prior and value of positions without gradients, in chunks of ``chunk``.

        Returns:
            ``(prior float32 (B, 208), value float64 (B,) points)``; the prior is the
            softmax of the masked logits (zero on illegal actions; uniform over all 208 when
            a position has no legal action).
        """
        x = enc if isinstance(enc, Inputs) else Inputs.from_encoded(enc, self.device)
        x = x.to(self.device)
        priors, values = [], []
        with self._inferring():
            for s in range(0, len(x), chunk):
                out = self(x[s:s + chunk])
                priors.append(out.logits.float().softmax(dim=-1).cpu().numpy())
                values.append(out.value.double().cpu().numpy())
        if not priors:
            return np.zeros((0, 208), np.float32), np.zeros(0)
        return np.concatenate(priors), np.concatenate(values)

    @torch.no_grad()
    def predict_value(self, enc: EncodedBatch | Inputs, chunk: int = 8192) -> np.ndarray:
        """Value only, float64 (B,) points still to come: :meth:`value_pass` in chunks (no
        policy branch); with a boundary head on positions that all have no dice (full-turn
        search's leaves), the boundary head alone on the card."""
        if self.boundary_head is not None:
            dice = enc.dice
            if (np.asarray(dice.cpu() if torch.is_tensor(dice) else dice)[:, 0] == 0).all():
                if isinstance(enc, Inputs):
                    cols, feats = enc.columns.to(self.device), enc.column_features.to(self.device)
                else:               # the card alone: the head reads nothing else
                    cols = torch.as_tensor(np.ascontiguousarray(enc.columns, np.float32), device=self.device)
                    feats = torch.as_tensor(np.ascontiguousarray(enc.column_features, np.float32), device=self.device)
                out = [self._boundary(cols[s:s + chunk], feats[s:s + chunk])
                       for s in range(0, cols.shape[0], chunk)]
                return torch.cat(out).double().cpu().numpy() if out else np.zeros(0)
        x = (enc if isinstance(enc, Inputs) else Inputs.from_encoded(enc, self.device)).to(self.device)
        with self._inferring():
            out = [self.value_pass(x[s:s + chunk]).double().cpu() for s in range(0, len(x), chunk)]
        return torch.cat(out).numpy() if out else np.zeros(0)

    def n_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def set_recording(self, on: bool) -> None:
        """Make every attention and feed-forward layer keep its last probabilities / activations."""
        for m in self.modules():
            if isinstance(m, (Attention, SwiGLU)):
                m.record = on
                if not on:
                    if isinstance(m, Attention):
                        m.last_probs = None
                    else:
                        m.last_hidden = None


def build_model(cfg: ModelConfig | str = "tiny", seed: int | None = None) -> YambNet:
    """A fresh :class:`YambNet` from a config or a preset name; ``seed`` fixes the initial weights."""
    if isinstance(cfg, str):
        cfg = ModelConfig.preset(cfg)
    if seed is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return YambNet(cfg)
    return YambNet(cfg)
