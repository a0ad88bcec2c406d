"""Forward-pass throughput of the network presets (positions per second), printed.

Usage: ``python benchmarks/forward.py [--presets tiny seed] [--batch 4096] [--device cpu]
[--threads N]``. A benchmark, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import time

import torch

from yamblab.games.encoding import encode_yahtzee
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.model.network import build_model
from yamblab.model.tokenizer import Inputs


def bench(preset: str, batch: int, device: str, repeats: int = 5) -> float:
    net = build_model(preset, seed=0).to(device).eval()
    x = Inputs.from_encoded(encode_yahtzee(new_batch(batch, OFFICIAL, seed=1), OFFICIAL), device)
    with torch.no_grad():
        net(x)                                            # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(repeats):
            net(x)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
    return batch * repeats / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--presets", nargs="+", default=["tiny", "seed"])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"device {a.device}, batch {a.batch}, torch threads {torch.get_num_threads()}")
    for p in a.presets:
        n = build_model(p).n_parameters()
        print(f"{p:>6}: {n:>10,} parameters  {bench(p, a.batch, a.device):>12,.0f} positions/s")


if __name__ == "__main__":
    main()
