"""A sweep's local Optuna journal (``.yamblab/sweeps/NAME.journal``), checked before Optuna
opens it and kept whole when a write meets a full disk.

Optuna reads a journal line by line and skips an incomplete last line; on the next write it
appends after it (gluing the two records into one bad line), and a journal it cannot read at all
looks empty, so a new study would be written into it. A damaged journal is therefore refused here
by name, before Optuna opens it, and never written over.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from yamblab.errors import DamagedFileError, DiskFullError, is_disk_full

#: What to do with a damaged journal (the end of every refusal).
_WHAT_TO_DO = "restore it from a backup, or move it aside (mv {p} {p}.damaged) to start the study afresh"


def check_journal(path: str | Path) -> int:
    """Check that ``path`` is a whole Optuna journal: every line one JSON record with an
    ``op_code``, the last one ended by its newline. A missing or empty file is a new journal.

    Returns:
        the number of records.

    Raises:
        DamagedFileError: a line that is not a journal record (naming its number and byte
            offset), or an incomplete last record (a write cut short: the message gives the
            ``truncate`` command that keeps every complete record before it).
    """
    path = Path(path)
    if not path.is_file():
        return 0
    raw = path.read_bytes()
    offset = 0
    lines = raw.split(b"\n")
    tail = lines.pop()          # b"" when the file ends with its newline
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line.decode("utf-8"))
            ok = isinstance(record, dict) and isinstance(record.get("op_code"), int)
        except (UnicodeDecodeError, json.JSONDecodeError):
            ok = False
        if not ok:
            raise DamagedFileError(
                f"the Optuna journal {path} is damaged: line {number} (from byte {offset}) is not a journal "
                f"record; yamblab will not write over it, which would lose its finished trials: "
                + _WHAT_TO_DO.format(p=path))
        offset += len(line) + 1
    if tail:
        if not lines:
            raise DamagedFileError(
                f"the Optuna journal {path} is damaged: it holds no complete journal record ({len(tail)} "
                f"bytes without a line end); yamblab will not write over it: " + _WHAT_TO_DO.format(p=path))
        raise DamagedFileError(
            f"the Optuna journal {path} ends in an incomplete record (its last {len(tail)} bytes, from byte "
            f"{offset}: a write cut short); yamblab will not write after it. To keep the {len(lines)} "
            f"complete records before it: truncate -s {offset} {path}; or restore the file from a backup")
    return len(lines)


class WholeAppends(JournalFileBackend):
    """Optuna's journal file whose append, on a full disk, is cut back to the file's size before
    it (only when what the file gained is a prefix of the records being written: another
    writer's records are never cut) and raises :class:`~yamblab.errors.DiskFullError`."""

    def append_logs(self, logs: list[dict]) -> None:
        path = Path(self._file_path)
        size = path.stat().st_size if path.exists() else 0
        try:
            super().append_logs(logs)
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            meant = ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode()
            with open(path, "rb") as f:
                f.seek(size)
                gained = f.read()
            if 0 < len(gained) < len(meant) and meant.startswith(gained):
                os.truncate(path, size)
            raise DiskFullError(f"disk full: no space left on the device to write the Optuna journal "
                                f"{path} (the records before are kept as they were)") from None


def journal_storage(path: str | Path) -> JournalStorage:
    """An Optuna ``JournalStorage`` on the journal ``path``, checked first (its folder is created).

    An append that meets a full disk leaves the journal as it was before it and raises.

    Raises:
        DamagedFileError: a damaged journal (:func:`check_journal`), or one whose records
            Optuna cannot replay.
        DiskFullError: an append found no space left on the journal's device.
    """
    path = Path(path)
    check_journal(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return JournalStorage(WholeAppends(str(path)))
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, AssertionError) as exc:
        raise DamagedFileError(
            f"the Optuna journal {path} is damaged: Optuna cannot replay its records ({type(exc).__name__}: "
            f"{exc}); yamblab will not write over it: " + _WHAT_TO_DO.format(p=path)) from None
