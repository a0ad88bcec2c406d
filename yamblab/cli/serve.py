"""``yamblab serve``: the advice API and the browser client."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import RULES_HELP, _rules
from yamblab.cli.user_errors import user_errors
from yamblab.errors import YamblabError


@user_errors
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port."),
    rules: list[str] = typer.Option(["forced"], help=RULES_HELP + " Repeat to serve several."),
    checkpoint: Optional[str] = typer.Option(None, help="A trained checkpoint, served as agent 'checkpoint'."),
    yamb_free: bool = typer.Option(False, help="Also build the free-column Yamb oracle (about 20 s, 150 MB)."),
    target: bool = typer.Option(False, help="Also load (or build: minutes, once) the target-score table of "
                                            "the first variant: advice that maximises P(final >= T)."),
    target_max: Optional[int] = typer.Option(None, min=1, max=2000, help="With --target: the largest target "
                                                                         "the target-score table answers "
                                                                         "(default 300)."),
):
    """Serve the advice API (docs at /docs) and the browser client; prints the URL."""
    from yamblab.service.serve import check_address, run_server
    from yamblab.service.service import Service

    check_address(host, port)
    names = [_rules(r).name for r in rules]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise YamblabError(f"--rules names the variant {twice[0]} twice")
    if target_max is not None and not target:
        raise YamblabError("--target-max is an option of --target (the target-score table)")
    if checkpoint is not None:
        if not Path(checkpoint).is_file():
            raise YamblabError(f"--checkpoint: no checkpoint file at {checkpoint}")
        from yamblab.model.checkpoint import load_network

        from yamblab.errors import ConfigError
        from yamblab.games.yahtzee.game import YahtzeeGame

        refusals = []                 # a damaged file, or a game no served variant plays, refused now
        for r in rules:
            try:
                load_network(checkpoint, game=YahtzeeGame(_rules(r)))
                break
            except ConfigError as exc:
                refusals.append(exc)
        else:
            raise refusals[0]
    typer.echo("loading tables …")
    run_server(Service(rules, checkpoint=checkpoint, yamb_free=yamb_free, target=target,
                       target_max_points=target_max or 300, progress=True), host, port)
