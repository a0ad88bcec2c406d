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
    """``ema ← d · ema + (1 − d) · net`` on parameters; buffers are copied.

    Args:
        net: the trained network; decay: in [0, 1).
        warmup: ``d = min(decay, (1 + n) / (10 + n))`` at the n-th update (n from 0; the
            schedule of TensorFlow's ``ExponentialMovingAverage`` with ``num_updates``), so that
            a slow average follows the first, fast-moving weights instead of holding the random
            initial ones for thousands of steps; ``d`` reaches ``decay`` after
            ``(10·decay − 1) / (1 − decay)`` updates (8,990 for 0.999). False: ``d = decay``.

    Raises:
        ValueError: ``decay`` outside [0, 1).
    """

    def __init__(self, net: nn.Module, decay: float, warmup: bool = False):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay {decay} must be in [0, 1)")
        self.decay = decay
        self.warmup = bool(warmup)
        self.model = copy.deepcopy(net).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.updates = 0

    def current_decay(self) -> float:
        """The decay the next :meth:`update` applies (see ``warmup``)."""
        if not self.warmup:
            return self.decay
        return min(self.decay, (1.0 + self.updates) / (10.0 + self.updates))

    @torch.no_grad()
    def update(self, net: nn.Module) -> None:
        """Move the average towards ``net`` (call after every optimiser step)."""
        d = self.current_decay()
        ema_p = list(self.model.parameters())
        net_p = list(net.parameters())
        torch._foreach_mul_(ema_p, d)
        torch._foreach_add_(ema_p, [p.detach() for p in net_p], alpha=1.0 - d)
        for b_ema, b in zip(self.model.buffers(), net.buffers()):
            b_ema.copy_(b)
        self.updates += 1
