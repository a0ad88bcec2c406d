"""How every command reports a user's mistake: ``error: …`` on stderr and exit status 2.

A :class:`~yamblab.errors.YamblabError` is raised by whatever refuses bad input (dice, cards,
rule strings, config files, paths); the commands wrap themselves in :func:`user_errors` so that
the user sees one line naming the problem, never a traceback.
"""

from __future__ import annotations

import functools

import typer

from yamblab.errors import YamblabError


def user_errors(fn):
    """Turn YamblabError (a user's mistake) into 'error: …' on stderr and exit status 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except YamblabError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    return wrapper


__all__ = ["user_errors"]
