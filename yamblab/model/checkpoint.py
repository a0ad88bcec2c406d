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


def check_game(state: dict, game, source: str = "the checkpoint") -> None:
    """Refuse a checkpoint whose run learned another game than ``game`` (a
    :class:`~yamblab.games.protocol.Game`): another game, Yahtzee rules or Yamb preset or
    columns. The network's inputs fit every game, so nothing else would notice.

    Raises:
        ConfigError: another game, naming both sides; a checkpoint that records no run config
            (one not written by ``yamblab train``).
    """
    import yaml

    from yamblab.errors import ConfigError
    from yamblab.games.protocol import make_game

    raw = state.get("config")
    if not raw:
        raise ConfigError(f"{source} records no run config, so the game its network learned cannot be checked: "
                          "use a checkpoint written by `yamblab train` (RUN/checkpoint.pt or a snapshot)")
    try:
        rec = yaml.safe_load(raw)
        theirs = make_game(rec.get("game", "yahtzee"), rec.get("rules"), rec.get("preset"), rec.get("columns"))
    except Exception as exc:  # noqa: BLE001 - a recorded config that no longer parses
        raise ConfigError(f"{source}: its recorded run config names no game this version knows ({exc})") from None
    if theirs.digest != game.digest:
        raise ConfigError(f"{source} learned {theirs.name} {theirs.label}; this command plays {game.name} {game.label} "
                          "(a network's values are worth nothing under other rules)")


def load_network(path: str | Path, which: str = "ema", map_location="cpu", game=None):
    """The network stored in a checkpoint (``which``: ``"ema"`` the player, or ``"model"``).

    Raises:
        DamagedFileError: a damaged checkpoint, or weights missing / unexpected for its config.
    """
    state = load_checkpoint(path, map_location)
    if game is not None:
        check_game(state, game, f"checkpoint {path}")
    return network_from_state(state, which, source=str(path))


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


#: the boundary head's MLP: the only weights :func:`transfer_weights` may widen
_WIDENABLE = "boundary_head.mlp."


def transfer_weights(net, weights: dict, source: str = "the checkpoint") -> list[str]:
    """Copy a trained network's ``weights`` into ``net``, widening its boundary head if ``net``'s
    is wider, without changing a single value it computes (a warm start; Net2Net's idea, Chen,
    Goodfellow & Shlens 2016, in its simplest form).

    Every weight of the same shape is copied. A boundary-head MLP layer (``weight`` float
    (out, in), ``bias`` (out,)) that is larger in ``net`` keeps the trained block at its top
    left and ``net``'s own initial weights for the new units' inputs, and takes **zero** from
    the new units into the old ones: the old units, and so the head's output, compute what they
    computed, while the new units are free to learn (their outputs' weights get gradients).

    Args:
        net: the network to load into (a :class:`~yamblab.model.network.YambNet`, freshly
            initialised; changed in place).
        weights: the trained network's ``state_dict``.
        source: names the trained network in errors.

    Returns:
        the names of the widened weights (empty when every shape agreed).

    Raises:
        ConfigError: a weight missing on either side, or one whose shape differs where widening
            is not possible (anywhere but the boundary head's hidden width: another network
            size, other boundary features, or a narrower head).
    """
    from yamblab.errors import ConfigError

    mine = net.state_dict()
    missing, extra = sorted(set(mine) - set(weights)), sorted(set(weights) - set(mine))
    if missing or extra:
        raise ConfigError(f"{source} is another network: " + "; ".join(
            f"{what} {', '.join(names[:3])}{' …' if len(names) > 3 else ''}"
            for what, names in (("it lacks", missing), ("it has no place here for", extra)) if names))
    out, widened = {}, []
    for name, new in mine.items():
        old = weights[name].to(new.dtype)
        if old.shape == new.shape:
            out[name] = old.clone()
            continue
        first_in = name == _WIDENABLE + "0.weight" and old.shape[1:] != new.shape[1:]
        if (not name.startswith(_WIDENABLE) or old.dim() != new.dim() or first_in
                or any(o > n for o, n in zip(old.shape, new.shape))):
            raise ConfigError(f"{source}: {name} is {tuple(old.shape)} there and {tuple(new.shape)} here; only "
                              "the boundary head's hidden width (model.boundary_hidden) may grow")
        w = new.clone()
        if w.dim() == 2:
            w[:old.shape[0], :old.shape[1]] = old
            w[:old.shape[0], old.shape[1]:] = 0.0       # nothing from the new units into the old ones
        else:
            w[:old.shape[0]] = old
        out[name] = w
        widened.append(name)
    net.load_state_dict(out, strict=True)
    return widened
