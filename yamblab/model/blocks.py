"""Transformer blocks (the YoloYamb post, "Transformer"): pre-norm, RMSNorm, attention with QK-Norm,
SwiGLU feed-forward.

Attention uses ``torch.nn.functional.scaled_dot_product_attention`` unless a block is asked to
record its attention probabilities (for the attention-entropy health metric), in which case it
computes them explicitly. Feed-forward blocks can record their hidden activations (for the
dead-unit health metric).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    """Multi-head attention with optional QK-Norm (RMSNorm of queries and keys per head).

    ``forward(x, context=None)``: x float (B, Tq, d), context float (B, Tk, d) (default x);
    returns float (B, Tq, d). With ``record = True`` the last probabilities (B, H, Tq, Tk) are
    kept in ``self.last_probs``.
    """

    def __init__(self, d_model: int, n_heads: int, qk_norm: bool = True):
        super().__init__()
        self.h = n_heads
        self.dh = d_model // n_heads
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.kv = nn.Linear(d_model, 2 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.q_norm = nn.RMSNorm(self.dh) if qk_norm else nn.Identity()
        self.k_norm = nn.RMSNorm(self.dh) if qk_norm else nn.Identity()
        self.record = False
        self.last_probs: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        ctx = x if context is None else context
        B, Tq, d = x.shape
        Tk = ctx.shape[1]
        q = self.q_norm(self.q(x).view(B, Tq, self.h, self.dh)).transpose(1, 2)
        k, v = self.kv(ctx).view(B, Tk, 2, self.h, self.dh).unbind(dim=2)
        k = self.k_norm(k).transpose(1, 2)
        v = v.transpose(1, 2)
        if self.record:
            att = (q @ k.transpose(-1, -2)) * self.dh ** -0.5
            p = att.softmax(dim=-1)
            self.last_probs = p.detach()
            y = p @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(B, Tq, d))


class SwiGLU(nn.Module):
    """SwiGLU feed-forward ``W2 (silu(W1 x) * W3 x)`` (Shazeer 2020), hidden width ``hidden``.

    With ``record = True`` the last hidden activations (B, T, hidden) are kept in
    ``self.last_hidden``.
    """

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.w13 = nn.Linear(d_model, 2 * hidden, bias=False)
        self.w2 = nn.Linear(hidden, d_model, bias=False)
        self.record = False
        self.last_hidden: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.w13(x).chunk(2, dim=-1)
        h = F.silu(a) * b
        if self.record:
            self.last_hidden = h.detach()
        return self.w2(h)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + ffn(norm(x))``."""

    def __init__(self, d_model: int, n_heads: int, ffn_hidden: int, qk_norm: bool = True):
        super().__init__()
        self.norm1 = nn.RMSNorm(d_model)
        self.attn = Attention(d_model, n_heads, qk_norm)
        self.norm2 = nn.RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, ffn_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class Stack(nn.Module):
    """A sequence of blocks followed by a final RMSNorm (the identity with zero blocks + norm)."""

    def __init__(self, n: int, d_model: int, n_heads: int, ffn_hidden: int, qk_norm: bool, final_norm: bool):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d_model, n_heads, ffn_hidden, qk_norm) for _ in range(n))
        self.norm = nn.RMSNorm(d_model) if final_norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.norm(x)
