"""Health metrics of a network in training (the YoloYamb post: "exploding gradients, dead neurons,
and attention collapse").

* gradient norms: the global L2 norm and one per part (tokenizer, trunk, policy branch,
  value branch, heads), measured before clipping;
* dead units: the fraction of SwiGLU hidden units whose activation stays below ``eps`` in
  magnitude over a whole batch, per layer and overall;
* attention entropy: mean entropy (nats) of each layer's attention distributions, divided by
  ``log(number of keys)`` so 1 is uniform attention and 0 is attention collapsed onto one token.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from yamblab.model.blocks import Attention, SwiGLU
from yamblab.model.tokenizer import Inputs

PARTS = ("tokenizer", "trunk", "policy_branch", "value_branch", "policy_head", "value_head", "aux",
         "boundary_head")


def grad_norms(net: nn.Module) -> dict[str, float]:
    """L2 norms of the current gradients: ``grad_norm`` and ``grad_norm/<part>``.

    One fused norm over every gradient (``torch._foreach_norm``) and one transfer of the
    results, not a reduction and a host sync per parameter.
    """
    parts, grads = [], []
    for part in PARTS:
        mod = getattr(net, part, None)
        if mod is None:
            continue
        g = [p.grad.detach() for p in mod.parameters() if p.grad is not None]
        parts.append((part, len(g)))
        grads.extend(g)
    sq = (torch.stack(torch._foreach_norm(grads)).float() ** 2).tolist() if grads else []
    out: dict[str, float] = {}
    total, at = 0.0, 0
    for part, n in parts:
        s = float(sum(sq[at:at + n]))
        at += n
        out[f"grad_norm/{part}"] = math.sqrt(s)
        total += s
    out["grad_norm"] = math.sqrt(total)
    return out


@torch.no_grad()
def activation_health(net: nn.Module, x: Inputs, eps: float = 1e-3) -> dict[str, float]:
    """Dead-unit fractions and attention entropies on a batch ``x`` (no gradients).

    Returns:
        dict with ``dead_units`` (overall fraction), ``dead_units/<layer>``,
        ``attention_entropy/<layer>`` (normalised, 0..1) and ``attention_entropy_min``.
    """
    was = net.training
    net.eval()
    net.set_recording(True)
    try:
        net(x)
        out: dict[str, float] = {}
        dead = total = 0
        ents = []
        for name, m in net.named_modules():
            if isinstance(m, SwiGLU) and m.last_hidden is not None:
                h = m.last_hidden.abs().flatten(0, -2).amax(dim=0)
                d = int((h < eps).sum())
                out[f"dead_units/{name}"] = d / h.numel()
                dead += d
                total += h.numel()
            if isinstance(m, Attention) and m.last_probs is not None:
                p = m.last_probs
                ent = -(p * p.clamp_min(1e-12).log()).sum(dim=-1).mean()
                e = float(ent) / math.log(p.shape[-1]) if p.shape[-1] > 1 else 0.0
                out[f"attention_entropy/{name}"] = e
                ents.append(e)
        out["dead_units"] = dead / total if total else 0.0
        out["attention_entropy_min"] = min(ents) if ents else float("nan")
        return out
    finally:
        net.set_recording(False)
        net.train(was)
