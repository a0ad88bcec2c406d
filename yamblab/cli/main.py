"""The ``yamblab`` command line.

Commands:
    yamblab oracle build      build (or load) the exact table and print a new game's value
    yamblab oracle evaluate   exact expected score of turn-perfect play for a valuation
    yamblab advise            rank every legal action of a position by exact expected score
    yamblab grade             play seeded games with an agent and grade every decision
    yamblab baseline          build the oracle and grade the baseline agents (a quick tour)
    yamblab play              play a game in the terminal, every decision graded
    yamblab serve             the advice API and the browser client
    yamblab train             AlphaZero-style training on a Ray cluster (resumable)
    yamblab sweep             ablation grids and tuning studies (Optuna + Ray + MLflow)

A user's mistake (impossible dice, an unreachable position, an unknown variant …) prints
``error: …`` and exits with status 2, without a traceback.

This module builds the app from the command modules beside it (one per command group) and holds
the entry point, :func:`main`.
"""

from __future__ import annotations

import importlib
import logging
import sys

import typer
from typer.core import TyperGroup

from yamblab.cli import grade, oracle, play, serve, sweep, train


class _Group(TyperGroup):
    """The root command: typer's own usage errors (an unknown option, a number out of range, a
    missing value) are reported like every other mistake, as one ``error: …`` line, status 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except typer.TyperException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":    # a bare group: its help
                exc.show()
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.command_path}: " if ctx is not None else ""
            typer.echo(f"error: {where}{' '.join(exc.format_message().split())}", err=True)
            sys.exit(2 if getattr(exc, "exit_code", 1) == 2 else exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=_Group,
    help="yamblab: AlphaZero-style agents for Yahtzee and Yamb, graded by an exact oracle.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
)
app.add_typer(oracle.oracle_app, name="oracle")

# the commands, in the order `yamblab --help` lists them (one module per command group)
app.command()(oracle.advise)
app.command()(grade.grade)
app.command()(grade.baseline)
app.command()(play.play)
app.command()(serve.serve)
app.command()(train.train)
app.command()(sweep.sweep)


def _mount_optional(name: str, module: str, help_text: str) -> None:
    """Mount the sub-command group of ``module`` (its ``app``), if present."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return
        raise
    app.add_typer(mod.app, name=name, help=help_text)


_mount_optional("model", "yamblab.cli.model", "The network: presets and summaries.")
_mount_optional("valuation", "yamblab.cli.valuation", "Rules of thumb: exact evaluation and tuning.")


def main() -> None:
    """Entry point of the ``yamblab`` console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
