"""Loading validated YAML configuration files.

Every config file is validated by a pydantic model before any work starts. A missing file, bad
YAML, an unknown key, a wrong type or an out-of-range value raises :class:`ConfigError` with a
message that names the file and the key (``configs/x.yaml: train.lr: Input should be greater
than 0``), an unknown key with the nearest valid one (``train.lrr: unknown key (did you mean
train.lr?)``). A key the user typed on the command line (``--set KEY=VALUE``, read into
:class:`SetOptions`) is named as typed (``--set train.lrr: unknown key (did you mean
train.lr?)``), not blamed on the file.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from yamblab.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


#: the tag pydantic puts in an error's location for the member of a union that refused the value
#: (``constrained-int``, ``literal['auto']``, ``function-after[...]``): not a key the user wrote
_MEMBER = re.compile(r"^(constrained-\w+|literal\[.*\]|[\w-]+\[.*\]|int|float|str|bool|none)$")


class SetOptions(dict):
    """Dotted-key overrides that the user typed on the command line (``--set KEY=VALUE``), keyed
    as typed: a problem at one of these keys is named ``--set KEY``, not blamed on the file they
    override. A plain dict of overrides (a test's, a sweep trial's) is named with the file."""

    origin = "--set"


#: where a problem at a key was typed: ``(origin, prefix)``, named ``f"{origin} {prefix}{key}"``
#: (``("--set", "")``: ``--set train.lr``; ``("--set", "overrides.")``: a sweep spec's run
#: setting, ``--set overrides.train.lr``)
Typed = dict[str, tuple[str, str]]


def typed_keys(overrides: Any, prefix: str = "") -> Typed | None:
    """The keys of ``overrides`` that were typed on the command line (a :class:`SetOptions`),
    for :func:`validate`; None for a plain dict."""
    if not isinstance(overrides, SetOptions):
        return None
    return {str(k): (overrides.origin, prefix) for k in overrides}


def with_new_sections(typed: Typed | None, base: dict) -> Typed | None:
    """``typed`` and each section that a typed key makes anew, not being a mapping in ``base``
    (``--set runtime.eval_early.every=5`` where the file has no ``eval_early``): what that
    section lacks (``runtime.eval_early.until: Field required``) is the option's to give, not
    the file's."""
    if not typed:
        return typed
    out = dict(typed)
    for key, how in typed.items():
        parts, node = key.split("."), base
        for i, part in enumerate(parts[:-1]):
            node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                out.setdefault(".".join(parts[:i + 1]), how)
                break
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field holds itself (``X``, ``X | None``, ``Annotated[X, ...]``),
    not inside a list or a mapping (whose keys are not the model's)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for a in typing.get_args(annotation) for m in _models_in(a)]
    return []


def dotted_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of ``model`` in dotted form, nested models' keys included (``train``,
    ``train.lr``, ``runtime.eval_early.every``)."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        out.append(prefix + name)
        for sub in _models_in(field.annotation):
            out.extend(k for k in dotted_keys(sub, f"{prefix}{name}.") if k not in out)
    return out


def nearest_key(key: str, keys: list[str]) -> str | None:
    """The valid dotted key nearest ``key`` (an unknown one), or None: a close name beside it
    (``train.lrr`` -> ``train.lr``), else a close dotted key (``trian.lr`` -> ``train.lr``), else
    the same name in another section (``lr``, ``runtime.lr`` -> ``train.lr``)."""
    parent, _, leaf = key.rpartition(".")
    if parent == "" or parent in keys:
        beside = {k.rpartition(".")[2]: k for k in keys if k.rpartition(".")[0] == parent}
        close = difflib.get_close_matches(leaf, list(beside), n=1)
        if close:
            return beside[close[0]]
    else:
        close = difflib.get_close_matches(key, keys, n=1)
        if close:
            return close[0]
    same = [k for k in keys if k.rpartition(".")[2] == leaf and k != key]
    return same[0] if same else None


def _names_key(msg: str, key: str) -> str | None:
    """``msg`` without its leading ``key: `` when it starts by naming ``key`` (a validator's
    message, ``size: unknown network size``), ``msg`` itself when it names ``key`` otherwise
    (``train.bot 'x' is not …``, ```preset` and …``), else None."""
    for k in (key, f"`{key}`"):
        if msg.startswith(k + ": "):
            return msg[len(k) + 2:]
        if msg.startswith(k) and (len(msg) == len(k) or not (msg[len(k)].isalnum() or msg[len(k)] in "_.")):
            return msg
    return None


def format_validation_error(exc: ValidationError, source: str, model: type[BaseModel] | None = None,
                            typed: Typed | None = None) -> str:
    """Every problem on one line: ``source: dotted.key: message; other.key: message``. A value
    every member of a union refused is one problem (``runtime.workers: Input should be greater
    than or equal to 1, or 'auto'``), without pydantic's tags for the members. A validator's
    message that names its key itself is given as it is (``source: size: unknown network size
    'huge'``).

    Args:
        model: the model validated: an unknown key comes with the nearest of its dotted keys
            (``train.lrr: unknown key (did you mean train.lr?)``).
        typed: keys of the data typed elsewhere (:func:`typed_keys`): a problem at one of them
            or under it, or a validator's message that starts with one, is named as typed
            (``--set train.lrr: unknown key (did you mean train.lr?)``) instead of by ``source``.
    """
    keys = dotted_keys(model) if model is not None else []
    typed = typed or {}
    by_length = sorted(typed, key=len, reverse=True)
    # (where: None for source, else the typed key's "--set PREFIX"; key) -> messages
    problems: dict[tuple[str | None, str | None], list[str]] = {}
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and _MEMBER.match(p)))
        msg = " ".join(str(err["msg"]).split())
        kind = err["type"]
        if kind == "value_error":
            msg = msg.removeprefix("Value error, ")
        where, prefix = None, ""
        for t in by_length:      # the longest typed key at or above the problem's key
            if loc == t or loc.startswith(t + "."):
                where, prefix = typed[t]
                break
            # an unknown section the typed key goes through (--set trian.lr=1: `trian` is unknown)
            if kind == "extra_forbidden" and t.startswith(loc + "."):
                (where, prefix), loc = typed[t], t
                break
            # a validator's message about the typed key, raised above it
            if kind == "value_error" and (loc == "" or t.startswith(loc + ".")) \
                    and (named := _names_key(msg, t)) is not None:
                (where, prefix), loc, msg = typed[t], t, named
                break
        if kind == "extra_forbidden":
            near = nearest_key(loc, keys) if keys else None
            msg = "unknown key" + (f" (did you mean {prefix}{near}?)" if near else "")
        elif kind == "value_error" and where is None and loc and (named := _names_key(msg, loc)) is not None:
            msg = named         # `size: size: unknown network size` said once
        elif kind == "value_error" and where is None and not loc:
            loc = None          # a validator's message on the whole: given as it is, without "(top level)"
        label = f"{where} {prefix}" if where else None
        said = problems.setdefault((label, "(top level)" if loc == "" else loc), [])
        if msg not in said:
            said.append(msg)

    def one(loc: str | None, msgs: list[str]) -> str:
        text = msgs[0] + "".join(f", or {m.removeprefix('Input should be ')}" for m in msgs[1:])
        return text if loc is None else f"{loc}: {text}"

    typed_parts = [f"{label}{one(loc, msgs)}" for (label, loc), msgs in problems.items() if label]
    source_parts = [one(loc, msgs) for (label, loc), msgs in problems.items() if not label]
    return "; ".join(typed_parts + ([f"{source}: " + "; ".join(source_parts)] if source_parts else []))


def validate(model: type[M], data: Any, source: str, typed: Typed | None = None) -> M:
    """Validate ``data`` against ``model``.

    Args:
        typed: keys of ``data`` the user typed elsewhere (:func:`typed_keys`: ``--set``),
            named as typed when they are wrong.

    Raises:
        ConfigError: naming ``source`` (or the typed key) and every offending key, an unknown
            key with the nearest valid one.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, model, typed)) from None


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
