"""Loading validated YAML configuration files.

Every config file is validated by a pydantic model before any work starts. A missing file, bad
YAML, an unknown key, a wrong type or an out-of-range value raises :class:`ConfigError` with a
message that names the file and the key (``configs/x.yaml: train.lr: Input should be greater
than 0``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from yamblab.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


#: the tag pydantic puts in an error's location for the member of a union that refused the value
#: (``constrained-int``, ``literal['auto']``, ``function-after[...]``): not a key the user wrote
_MEMBER = re.compile(r"^(constrained-\w+|literal\[.*\]|[\w-]+\[.*\]|int|float|str|bool|none)$")


def format_validation_error(exc: ValidationError, source: str) -> str:
    """Every problem on one line: ``source: dotted.key: message; other.key: message``. A value
    every member of a union refused is one problem (``runtime.workers: Input should be greater
    than or equal to 1, or 'auto'``), without pydantic's tags for the members."""
    problems: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and _MEMBER.match(p))) or "(top level)"
        msg = " ".join(str(err["msg"]).split())
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        said = problems.setdefault(loc, [])
        if msg not in said:
            said.append(msg)
    return f"{source}: " + "; ".join(
        f"{loc}: {msgs[0]}" + "".join(f", or {m.removeprefix('Input should be ')}" for m in msgs[1:])
        for loc, msgs in problems.items())


def validate(model: type[M], data: Any, source: str) -> M:
    """Validate ``data`` against ``model``.

    Raises:
        ConfigError: naming ``source`` and every offending key.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def read_yaml(path: str | Path) -> dict:
    """Read a YAML mapping from ``path``.

    Raises:
        ConfigError: the file is missing, is not valid YAML, or is not a mapping.
    """
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: a folder, not a config file")
    if not p.is_file():
        raise ConfigError(f"{p}: no such config file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a YAML text file (not UTF-8)") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys to values")
    return data


def load(model: type[M], path: str | Path) -> M:
    """Read and validate a YAML config file (see :func:`read_yaml`, :func:`validate`)."""
    return validate(model, read_yaml(path), str(path))


def deep_update(base: dict, overrides: dict) -> dict:
    """A copy of ``base`` with ``overrides`` merged in recursively (dotted keys allowed).

    ``{"train.lr": 1e-3}`` and ``{"train": {"lr": 1e-3}}`` mean the same. An empty mapping
    replaces what it names (``{"runtime.eval_modes": {}}`` clears the extra evaluation modes)
    instead of merging nothing into it.
    """
    out = {k: (deep_update(v, {}) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overrides.items():
        parts = str(key).split(".")
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        last = parts[-1]
        if isinstance(value, dict) and value and isinstance(node.get(last), dict):
            node[last] = deep_update(node[last], value)
        else:
            node[last] = value
    return out


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into dotted keys (for MLflow parameters)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
