"""Where MLflow writes, checked before a run starts: a local store this process cannot write, or
a damaged SQLite database, is named at once (MLflow would retry for minutes, or build empty
tables over a damaged file)."""

from __future__ import annotations

import os
from pathlib import Path

from yamblab.errors import DamagedFileError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI (None: another store, or in memory)."""
    if not uri.startswith("sqlite:"):
        return None
    from sqlalchemy.engine import make_url

    db = make_url(uri).database
    return None if not db or db == ":memory:" else Path(db)


def check_store_writable(uri: str | None) -> None:
    """Refuse at once a local store this process cannot write (MLflow would retry for minutes,
    then answer with a traceback): an SQLite database's folder (and the file, if there), or a
    file store's folder.

    Raises:
        YamblabError: naming the store and why.
    """
    from yamblab.atomic import check_writable
    from yamblab.errors import YamblabError

    uri = uri or DEFAULT_TRACKING_URI
    path = sqlite_path(uri)
    if path is None:
        if uri.startswith(("sqlite:", "http://", "https://", "databricks", "postgresql", "mysql", "mssql")):
            return
        path = Path(uri.removeprefix("file://"))
        check_writable(path, "the MLflow store")
        return
    check_writable(path.parent.absolute(), f"the MLflow database {path.name}")
    if path.is_file() and not os.access(path, os.W_OK):
        raise YamblabError(f"cannot write the MLflow database {path}: permission denied")


def check_sqlite_store(uri: str) -> None:
    """Refuse a damaged SQLite MLflow store before MLflow opens it (MLflow would build empty
    tables in an emptied file, and answer a damaged one with a traceback).

    A missing file is fine (MLflow creates it). An existing one must be a non-empty SQLite
    database that passes SQLite's ``PRAGMA quick_check``; the check only reads (SQLite itself
    rolls back a transaction a killed writer left half done, as MLflow's first connection would).
    A database another process holds locked is left to MLflow.

    Raises:
        DamagedFileError: the file is empty, not an SQLite database, or fails the check; the
            message names it and says how to keep the runs.
    """
    import sqlite3

    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return
    reason = None
    if path.stat().st_size == 0:
        reason = "it is empty: 0 bytes"
    else:
        try:
            con = sqlite3.connect(str(path), timeout=5.0)
            try:
                rows = [r[0] for r in con.execute("PRAGMA quick_check(3)").fetchall()]
            finally:
                con.close()
            if rows != ["ok"]:
                reason = "SQLite's quick_check finds: " + "; ".join(rows)
        except sqlite3.OperationalError:     # locked by another writer, unreadable: MLflow says so
            return
        except sqlite3.DatabaseError as exc:   # not a database, a malformed image
            reason = str(exc)
    if reason:
        raise DamagedFileError(
            f"the MLflow database {path} is damaged ({reason}); yamblab will not write over it, which "
            f"would lose its runs: restore it from a backup, or move it aside (mv {path} {path}.damaged) "
            f"to start an empty one")
