"""The exact Yahtzee oracle table: build, cache on disk with a checksum, look up.

The table holds, for every boundary state, the optimal expected points still to come
(the backward pass of "How The AI Works"). Layout: float64 array (4096, 3, 64) indexed by
``(mask12, ystate, upper)`` (see :mod:`yamblab.oracle.yahtzee._kernels`).

Cache files live in ``$YAMBLAB_CACHE_DIR`` (default ``~/.cache/yamblab``), one per rule variant,
named by the variant's digest. Each stores the variant's key, a format version and the
SHA-256 of the table; a file that is truncated, damaged or made for other rules is detected,
reported and rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from yamblab.atomic import atomic_write
from yamblab.errors import DamagedFileError
from yamblab.games.yahtzee.rules import OFFICIAL, BoundaryState, YahtzeeRules
from yamblab.oracle.yahtzee import _kernels

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
TABLE_SHAPE = (4096, 3, 64)


def timed_build(n_threads: int = 1, rules: YahtzeeRules = OFFICIAL) -> float:
    """Seconds (float, wall time) that one backward pass over ``rules``' table takes on
    ``n_threads`` OpenMP threads (0: all cores), nothing cached or kept: the machine's speed as
    a yardstick for wall times (``benchmarks/oracle_build.py``, the machine line of
    ``yamblab train``)."""
    import time

    t0 = time.perf_counter()
    _kernels.solve(rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus, n_threads)
    return time.perf_counter() - t0


def cache_dir() -> Path:
    """The folder for oracle tables: ``$YAMBLAB_CACHE_DIR`` or ``~/.cache/yamblab``."""
    env = os.environ.get("YAMBLAB_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "yamblab"


def _digest(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


@dataclass(frozen=True)
class OracleTable:
    """An exact value table for one Yahtzee rule variant.

    Attributes:
        rules: the variant.
        values: float64 (4096, 3, 64): optimal expected points still to come per boundary state.
    """

    rules: YahtzeeRules
    values: np.ndarray

    @property
    def new_game_value(self) -> float:
        """Optimal expected score of a new game, in points."""
        return float(self.values[0, 0, 0])

    def value(self, state: BoundaryState) -> float:
        """Optimal expected points still to come from ``state``."""
        u = state.upper if self.rules.upper_bonus else 0
        return float(self.values[state.mask12(), state.ystate, u])

    @classmethod
    def build(cls, rules: YahtzeeRules = OFFICIAL, progress: bool = False, n_threads: int = 0) -> "OracleTable":
        """Run the backward pass for ``rules`` (about 0.4 s on two cores).

        Args:
            progress: show a progress bar over the 13 layers of filled boxes.
            n_threads: OpenMP threads (0: all cores).
        """
        bar = None
        cb = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=int(sum(len(_kernels.layer_groups(n)) for n in range(13))),
                       desc=f"oracle {rules.name}", unit="state groups")
            cb = bar.update
        try:
            values = _kernels.solve(rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus,
                                    n_threads, cb)
        finally:
            if bar is not None:
                bar.close()
        values.setflags(write=False)
        return cls(rules=rules, values=values)

    # ------------------------------------------------------------------ cache
    def save(self, path: str | Path) -> Path:
        """Write the table atomically (temporary file, fsync, rename) with its checksum."""
        path = Path(path)
        meta = {"format": FORMAT_VERSION, "rules": self.rules.key, "sha256": _digest(self.values)}
        buf = io.BytesIO()
        np.savez(buf, values=self.values, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        atomic_write(path, buf.getvalue())
        return path

    @classmethod
    def load(cls, path: str | Path, rules: YahtzeeRules) -> "OracleTable":
        """Read a table written by :meth:`save` and check it.

        Raises:
            DamagedFileError: the file is unreadable or truncated, belongs to other rules or
                another format, or its checksum does not match its contents.
            FileNotFoundError: no such file.
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                values = np.array(z["values"])
                meta = json.loads(bytes(z["meta"]).decode())
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            raise DamagedFileError(f"oracle cache {path} is unreadable ({exc.__class__.__name__}: {exc})") from None
        if meta.get("format") != FORMAT_VERSION:
            raise DamagedFileError(f"oracle cache {path} has format {meta.get('format')}, expected {FORMAT_VERSION}")
        if meta.get("rules") != rules.key:
            raise DamagedFileError(f"oracle cache {path} was built for {meta.get('rules')}, not {rules.key}")
        if values.shape != TABLE_SHAPE or values.dtype != np.float64:
            raise DamagedFileError(f"oracle cache {path} holds a {values.dtype} {values.shape} array")
        if _digest(values) != meta.get("sha256"):
            raise DamagedFileError(f"oracle cache {path} fails its checksum")
        values.setflags(write=False)
        return cls(rules=rules, values=values)

    @classmethod
    def cache_path(cls, rules: YahtzeeRules, directory: str | Path | None = None) -> Path:
        """Where the table of ``rules`` is cached."""
        return Path(directory or cache_dir()) / f"yahtzee-oracle-{rules.digest}.npz"

    @classmethod
    def get(cls, rules: YahtzeeRules = OFFICIAL, directory: str | Path | None = None,
            progress: bool = False, rebuild: bool = False) -> "OracleTable":
        """Load the cached table of ``rules``, or build and cache it.

        A damaged or foreign cache file is reported (a warning) and rebuilt.
        """
        path = cls.cache_path(rules, directory)
        if not rebuild and path.exists():
            try:
                return cls.load(path, rules)
            except DamagedFileError as exc:
                log.warning("%s; rebuilding it", exc)
        table = cls.build(rules, progress=progress)
        try:
            table.save(path)
        except OSError as exc:  # a read-only cache folder must not stop the work
            log.warning("could not cache the oracle table at %s: %s", path, exc)
        return table
