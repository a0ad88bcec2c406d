"""Atomic, checksummed checkpoints (the YoloYamb post: an interrupted save once loaded half a network
with the missing weights filled at random, and 40 GPU hours were lost).

File format: the line ``YAMBLAB-CHECKPOINT``, a JSON header line with the format version, the
payload's size in bytes and its SHA-256, then the payload (``torch.save`` of a dict of plain
types and tensors). Saving writes a temporary file in the same folder, fsyncs it, renames it
over the target and fsyncs the folder. Loading checks the magic line, the size and the
checksum before unpickling (``weights_only=True``), and model weights load strictly.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import torch

from yamblab.atomic import atomic_write
from yamblab.errors import DamagedFileError

MAGIC = b"YAMBLAB-CHECKPOINT\n"
FORMAT_VERSION = 1


def save_checkpoint(path: str | Path, payload: dict) -> Path:
    """Write ``payload`` atomically with its checksum; returns the path.

    Args:
        path: the checkpoint file (its folder is created).
        payload: a dict of plain types and tensors (e.g. :meth:`Learner.state_dict`).
    """
    path = Path(path)
    buf = io.BytesIO()
    torch.save(payload, buf)
    data = buf.getvalue()
    header = json.dumps({"format": FORMAT_VERSION, "size": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()}).encode() + b"\n"
    atomic_write(path, [MAGIC, header, data])
    return path


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """Read and verify a checkpoint written by :func:`save_checkpoint`.

    Raises:
        FileNotFoundError: no such file.
        DamagedFileError: not a yamblab checkpoint, an unknown format, truncated (fewer bytes
            than its header promises), extra bytes, a checksum mismatch, or an unreadable payload.
    """
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.startswith(MAGIC):
        raise DamagedFileError(f"checkpoint {path} is not a yamblab checkpoint (bad magic line)")
    nl = raw.find(b"\n", len(MAGIC))
    if nl < 0:
        raise DamagedFileError(f"checkpoint {path} is truncated inside its header")
    try:
        header = json.loads(raw[len(MAGIC):nl])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DamagedFileError(f"checkpoint {path} has a damaged header") from None
    if header.get("format") != FORMAT_VERSION:
        raise DamagedFileError(f"checkpoint {path} has format {header.get('format')}, expected {FORMAT_VERSION}")
    data = raw[nl + 1:]
    if len(data) != header.get("size"):
        raise DamagedFileError(
            f"checkpoint {path} is truncated or padded: {len(data)} payload bytes, header says {header.get('size')}")
    if hashlib.sha256(data).hexdigest() != header.get("sha256"):
        raise DamagedFileError(f"checkpoint {path} fails its SHA-256 checksum")
    try:
        return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        raise DamagedFileError(f"checkpoint {path} payload is unreadable ({exc.__class__.__name__}: {exc})") from None


def load_network(path: str | Path, which: str = "ema", map_location="cpu"):
    """The network stored in a checkpoint (``which``: ``"ema"`` the player, or ``"model"``).

    Raises:
        DamagedFileError: a damaged checkpoint, or weights missing / unexpected for its config.
    """
    return network_from_state(load_checkpoint(path, map_location), which, source=str(path))


def network_from_state(state: dict, which: str = "ema", source: str = "the checkpoint"):
    """The network of a checkpoint already loaded with :func:`load_checkpoint` (``which`` as in
    :func:`load_network`; ``source`` names the file in the error).

    Raises:
        DamagedFileError: weights missing / unexpected for its config.
    """
    from yamblab.model.config import ModelConfig
    from yamblab.model.network import YambNet

    try:
        cfg = ModelConfig(**state["model_config"])
        net = YambNet(cfg)
        net.load_state_dict(state[which], strict=True)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise DamagedFileError(f"checkpoint {source} does not hold a complete network: {exc}") from None
    return net.eval()
