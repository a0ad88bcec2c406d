"""``yamblab play``: play Yahtzee in the terminal with every decision graded by the oracle."""

from __future__ import annotations

from typing import Optional

import numpy as np
import typer

from yamblab.cli.common import MAX_SEED, RULES_HELP, _rules
from yamblab.cli.user_errors import user_errors
from yamblab.errors import IllegalActionError, YamblabError
from yamblab.games.yahtzee.rules import BOX_LABELS, box_index


@user_errors
def play(
    seed: Optional[int] = typer.Option(None, min=0, max=MAX_SEED, help="Dice seed (default: random)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    hints: bool = typer.Option(False, help="Show the oracle's move before each decision."),
):
    """Play a game of Yahtzee in the terminal; the oracle grades every decision you make."""
    import random

    play_game(_rules(rules), seed if seed is not None else random.randrange(2**32), hints)


def parse_move(text: str, rolls_left: int) -> int:
    """A typed move as an engine action (0..12 box, 13 + hold mask).

    ``hold 134`` / ``h 134`` holds dice 1, 3 and 4 (positions 1..5) and rerolls the rest;
    ``reroll`` rerolls all; anything else is a box name (``fh``, ``chance``, ``sixes`` …).
    A bare number is refused: it could mean a box's position on the card or a face, and
    reading it as a 0-based index once scored Sixes for a player who typed ``5``.

    Raises:
        IllegalActionError: an unknown box, a bare number, bad positions, or a reroll with
            no rolls left.
    """
    t = text.strip().lower()
    if not t:
        raise IllegalActionError("type a move: hold 134, reroll, or a box name (fives, fh, chance …)")
    if t.lstrip("+-").isdigit():
        raise IllegalActionError(
            f"{t!r} is a number, not a move: type a box name (e.g. fives, 5s, fh) or hold {t} "
            "to hold dice by position")
    if t in ("reroll", "r"):
        t = "hold "
    if t.startswith("hold") or t.startswith("h ") or t == "h":
        if rolls_left == 0:
            raise IllegalActionError("no rerolls left: score a box")
        digits = t[4:] if t.startswith("hold") else t[1:]
        digits = digits.replace(",", "").replace(" ", "")
        if any(c not in "12345" for c in digits) or len(set(digits)) != len(digits):
            raise IllegalActionError(f"hold {digits!r}: give die positions 1..5, each once (e.g. hold 134)")
        return 13 + sum(1 << (int(c) - 1) for c in digits)
    return box_index(t)


def play_game(rules, seed: int, hints: bool = False) -> None:
    """One interactive game on dice ``seed``: prompts for moves, prints each move's loss."""
    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.oracle.yahtzee.grading import Grader
    from yamblab.oracle.yahtzee.table import OracleTable

    table = OracleTable.get(rules)
    grader = Grader(table)
    batch = new_batch(1, rules, seed=seed)
    lost = 0.0
    while not batch.done[0]:
        card = ", ".join(f"{BOX_LABELS[b]} {batch.box_scores[0, b]}" for b in range(13)
                         if batch.box_scores[0, b] >= 0) or "empty"
        typer.echo(f"\nturn {int(batch.turn[0]) + 1}/13 · score {int(batch.total[0])} · card: {card}")
        typer.echo(f"dice {' '.join(map(str, batch.dice[0]))}   (positions 1 2 3 4 5) · "
                   f"rerolls left {int(batch.rolls_left[0])}")
        if hints:
            box, hold, _ = grader.values.action_values(batch)
            best = int(np.argmax(np.concatenate([box[0], hold[0]])))
            typer.echo(f"hint: {_describe(best, batch)}")
        while True:
            text = typer.prompt("move (hold 134 / reroll / box name)", default="", show_default=False)
            try:
                action = parse_move(text, int(batch.rolls_left[0]))
                regret, _ = grader.regrets(batch, np.array([action]))
                batch.step(np.array([action]))
                break
            except YamblabError as exc:
                typer.echo(f"  {exc}")
        lost += float(regret[0])
        typer.echo(f"  {'perfect' if regret[0] < 1e-9 else f'gave away {regret[0]:.2f} points of expected score'}")
    typer.echo(f"\nfinal score {int(batch.total[0])} · expected points given away {lost:.2f} "
               f"(optimal play averages {table.new_game_value:.2f})")


def _describe(action: int, batch) -> str:
    if action < 13:
        return f"score {BOX_LABELS[action]}"
    h = action - 13
    pos = "".join(str(i + 1) for i in range(5) if (h >> i) & 1)
    return f"hold {pos}" if pos else "reroll all"
