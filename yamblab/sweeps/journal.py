"""A sweep's local Optuna journal (``.yamblab/sweeps/NAME.journal``), checked before Optuna
opens it.

Optuna reads a journal line by line and skips an incomplete last line; on the next write it
appends after it (gluing the two records into one bad line), and a journal it cannot read at all
looks empty, so a new study would be written into it. A damaged journal is therefore refused here
by name, before Optuna opens it, and never written over.
"""

from __future__ import annotations

import json
from pathlib import Path

from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from yamblab.errors import DamagedFileError

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


def journal_storage(path: str | Path) -> JournalStorage:
    """An Optuna ``JournalStorage`` on the journal ``path``, checked first (its folder is created).

    Raises:
        DamagedFileError: a damaged journal (:func:`check_journal`), or one whose records
            Optuna cannot replay.
    """
    path = Path(path)
    check_journal(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return JournalStorage(JournalFileBackend(str(path)))
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, AssertionError) as exc:
        raise DamagedFileError(
            f"the Optuna journal {path} is damaged: Optuna cannot replay its records ({type(exc).__name__}: "
            f"{exc}); yamblab will not write over it: " + _WHAT_TO_DO.format(p=path)) from None
