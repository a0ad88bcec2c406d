"""Exponential moving average of a network's weights (the network that plays the games).

The YoloYamb post ("V3.1: The Gradient War"): the EMA copy must be updated after every optimiser step;
updating it once per iteration froze the player and collapsed the scores from 700 to under 300.
:class:`EMA` counts its updates so that tests and metrics can check the cadence.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class EMA:
    """``ema ← decay · ema + (1 − decay) · net`` on parameters; buffers are copied.

    Args:
        net: the trained network; decay: in [0, 1).
    """

    def __init__(self, net: nn.Module, decay: float):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay {decay} must be in [0, 1)")
        self.decay = decay
        self.model = copy.deepcopy(net).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.updates = 0

    @torch.no_grad()
    def update(self, net: nn.Module) -> None:
        """Move the average towards ``net`` (call after every optimiser step)."""
        ema_p = list(self.model.parameters())
        net_p = list(net.parameters())
        torch._foreach_mul_(ema_p, self.decay)
        torch._foreach_add_(ema_p, [p.detach() for p in net_p], alpha=1.0 - self.decay)
        for b_ema, b in zip(self.model.buffers(), net.buffers()):
            b_ema.copy_(b)
        self.updates += 1
