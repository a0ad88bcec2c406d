"""``yamblab model …``: inspect network presets."""

from __future__ import annotations

import typer

from yamblab.errors import YamblabError

app = typer.Typer(help="Inspect the policy-value network.", no_args_is_help=True)


@app.callback()
def _main() -> None:
    """Inspect the policy-value network."""


@app.command("summary")
def summary_cmd(preset: str = typer.Option("tiny", "--preset", "-p", help="tiny, small or seed")) -> None:
    """Print a preset's layers and parameter count."""
    from yamblab.model.config import ModelConfig
    from yamblab.model.summary import summary

    try:
        cfg = ModelConfig.preset(preset)
    except YamblabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(summary(cfg, preset))
