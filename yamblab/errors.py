"""Errors that name a user's mistake.

Every exception a user can provoke with bad input (impossible dice, an unreachable position,
an illegal action, an unknown variant, a damaged file) derives from :class:`YamblabError`.
The command line catches these and prints their message without a traceback.
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
