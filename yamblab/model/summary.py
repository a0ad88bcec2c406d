"""A printed summary of a network: its parts, their layers and parameter counts."""

from __future__ import annotations

from torch import nn

from yamblab.model.config import ModelConfig
from yamblab.model.network import YambNet


def _count(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def summary(cfg: ModelConfig, name: str = "") -> str:
    """Lines describing the network built from ``cfg``: config, parts with parameter counts,
    the blocks of each stack, and the total."""
    net = YambNet(cfg)
    lines = [f"YambNet{f' ({name})' if name else ''}: width {cfg.d_model}, {cfg.n_heads} heads, "
             f"{cfg.n_shared} shared + {cfg.n_policy} policy + {cfg.n_value} value blocks, "
             f"SwiGLU {cfg.ffn_hidden}, value {cfg.value_head}"
             + (f" ({cfg.value_bins} bins, 0..{cfg.value_max:g} points)" if cfg.value_head == "bins" else ""),
             f"{'part':<34}{'parameters':>14}"]
    for part, mod in net.named_children():
        lines.append(f"{part:<34}{_count(mod):>14,}")
        for sub, m in mod.named_children():
            if isinstance(m, nn.ModuleList):
                for i, blk in enumerate(m):
                    label = f"{sub}.{i}"
                    lines.append(f"  {label:<32}{_count(blk):>14,}")
            elif _count(m):
                lines.append(f"  {sub:<32}{_count(m):>14,}")
    lines.append(f"{'total':<34}{net.n_parameters():>14,}")
    return "\n".join(lines)
