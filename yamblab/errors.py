"""Errors that name a user's mistake.

Every exception a user can provoke with bad input (impossible dice, an unreachable position,
an illegal action, an unknown variant, a damaged file) or must fix on the machine (a full disk)
derives from :class:`YamblabError`. The command line catches these and prints their message
without a traceback.
"""

from __future__ import annotations


class YamblabError(Exception):
    """Base class of every error caused by bad input rather than a bug."""


class InvalidDiceError(YamblabError, ValueError):
    """Dice that cannot exist: a face outside 1..6, or the wrong number of dice."""


class UnreachablePositionError(YamblabError, ValueError):
    """A position that no game under the given rules can reach."""


class IllegalActionError(YamblabError, ValueError):
    """An action that the rules forbid in the current position."""


class UnknownVariantError(YamblabError, ValueError):
    """A rule variant, preset or agent name that yamblab does not know."""


class DamagedFileError(YamblabError, OSError):
    """A cache file or checkpoint that is truncated, corrupted or belongs to something else."""


class ConfigError(YamblabError, ValueError):
    """A configuration file or option that fails validation."""


class EndgameTooLarge(YamblabError, ValueError):
    """A Yamb card whose exact endgame needs more new states than the call allows."""


class DiskFullError(YamblabError, OSError):
    """A write that found no space left on its device (or the user's disk quota spent); the
    message names the file, and what was kept."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from, is a full disk: an ``OSError`` with
    ``ENOSPC`` or ``EDQUOT``, SQLite's ``SQLITE_FULL`` ("database or disk is full", as MLflow's
    SQLite store raises it, wrapped twice), or a :class:`DiskFullError`."""
    import errno
    import sqlite3

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFullError):
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL"
                                               or "database or disk is full" in str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
