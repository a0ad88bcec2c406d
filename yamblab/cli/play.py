"""``yamblab play``: play Yahtzee in the terminal with every decision graded by the oracle.

A move is typed in the words ``yamblab advise`` and the hints use:

=======================  =================================================================
``keep 3 4``             keep dice by **value** (a multiset of the dice showing: ``keep 5 5 5``
                         needs three fives showing), reroll the rest; ``keep`` alone or
                         ``reroll`` rerolls all, ``keep all`` rerolls nothing
``hold 134``             keep dice by **position** (1..5, as shown under the dice)
``box fours``            score a box by name (``fours``, ``score Fours``, ``fh`` … work too)
``?``                    help
=======================  =================================================================

However a game ends (its last box, end of input: Ctrl-D, or Ctrl-C) it ends with the same graded
summary of the game so far: the score, the expected points given away in all and by decision
(first keep, second keep, box). The status is 0 for a finished game and for Ctrl-D (the usual
way to leave), 130 for Ctrl-C (128 + SIGINT, the shell's convention for an interrupt).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import typer

from yamblab.cli.common import MAX_SEED, RULES_HELP, _rules
from yamblab.cli.user_errors import user_errors
from yamblab.errors import IllegalActionError, YamblabError
from yamblab.games.yahtzee.rules import BOX_LABELS, BOX_NAMES, box_index

#: the line that says how to type a move (never a move of the game at hand: it is not advice)
HOW_TO_TYPE = "type a move as: keep 5 5 5 (die values), hold 134 (positions), box fours, or ? for help"

HELP = """\
  keep 3 4     keep dice by value (they must be showing), reroll the rest
  keep         reroll all the dice (also: reroll); keep all: reroll nothing
  hold 134     keep dice by position (1..5, as numbered under the dice), reroll the rest
  box fours    score a box by name (or just: fours; score Fours, fh, 3k, ss, ls, y, c … work too)
  boxes: {boxes}
  Ctrl-D ends the game here with its summary (status 0); Ctrl-C too (status 130)"""

#: exit status of a game left with Ctrl-C (128 + SIGINT)
INTERRUPTED = 130


@user_errors
def play(
    seed: Optional[int] = typer.Option(None, min=0, max=MAX_SEED, help="Dice seed (default: random)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    hints: bool = typer.Option(False, help="Show the oracle's move before each decision."),
):
    """Play a game of Yahtzee in the terminal; the oracle grades every decision you make.

    Type keep 3 4 (dice by value), hold 134 (dice by position), box fours, or ? for help.
    Ctrl-D leaves with the summary of the game so far (status 0); Ctrl-C does too (status 130).
    """
    import random

    play_game(_rules(rules), seed if seed is not None else random.randrange(2**32), hints)


def parse_move(text: str, rolls_left: int, dice=None) -> int:
    """A typed move as an engine action (0..12 box, 13 + hold mask).

    ``keep 3 4`` / ``k 34`` keeps dice by value: a multiset of ``dice`` (the dice showing),
    refused if they do not show those values; ``keep`` alone, ``reroll`` or ``reroll all``
    rerolls all, ``keep all`` rerolls nothing. ``hold 134`` / ``h 134`` holds dice 1, 3 and 4
    (positions 1..5) and rerolls the rest. ``box fives`` / ``score Fives`` / a bare box name
    (``fh``, ``chance``, ``sixes`` …) scores a box. A bare number is refused: it could mean a
    box's position on the card, a face or a position, and reading it as a 0-based index once
    scored Sixes for a player who typed ``5``. Every message names what was typed.

    Args:
        text: what the player typed.
        rolls_left: rerolls left this turn (0..2).
        dice: the five dice showing, in position order (needed by ``keep``).

    Raises:
        IllegalActionError: an unknown box, a bare number, bad positions or values, values
            the dice do not show, or a keep with no rolls left.
    """
    raw = text.strip()
    t = " ".join(raw.lower().split("(")[0].split())     # a hint's "(hold 134)" may be copied too
    if not t:
        raise IllegalActionError(f"type a move: {HOW_TO_TYPE.split(': ', 1)[1]}")
    if t.lstrip("+-").isdigit():
        raise IllegalActionError(
            f"{raw!r} is a number, not a move: type a box name (e.g. box fives, fh), keep {t} "
            f"to keep dice by value or hold {t} to keep dice by position")
    word, _, rest = t.partition(" ")
    if t in ("reroll", "r", "reroll all"):
        word, rest = "keep", ""
    elif word.startswith("keep") and word != "keep":       # keep555
        word, rest = "keep", (word[4:] + " " + rest).strip()
    elif word.startswith("hold") and word != "hold":       # hold134
        word, rest = "hold", (word[4:] + " " + rest).strip()
    if word in ("keep", "k"):
        if rolls_left == 0:
            raise IllegalActionError(f"{raw!r}: no rerolls left this turn: score a box (e.g. box chance)")
        if rest == "all":
            return 13 + 31
        return 13 + _keep_mask(raw, rest, dice)
    if word in ("hold", "h"):
        if rolls_left == 0:
            raise IllegalActionError(f"{raw!r}: no rerolls left this turn: score a box (e.g. box chance)")
        digits = rest.replace(",", "").replace(" ", "")
        if any(c not in "12345" for c in digits) or len(set(digits)) != len(digits):
            raise IllegalActionError(f"{raw!r}: hold takes die positions 1..5, each once (e.g. hold 134); "
                                     "keep takes die values (e.g. keep 5 5)")
        return 13 + sum(1 << (int(c) - 1) for c in digits)
    name = rest if word in ("box", "b", "score") else t
    if not name:
        raise IllegalActionError(f"{raw!r}: name the box (e.g. box fours); boxes: {', '.join(BOX_NAMES)}")
    if name.lstrip("+-").isdigit():
        raise IllegalActionError(f"{raw!r}: name the box (e.g. box fives), not a number; "
                                 f"boxes: {', '.join(BOX_NAMES)}")
    try:
        return box_index(name)
    except IllegalActionError:
        raise IllegalActionError(
            f"{raw!r} is not a move: no box is called {name!r} (boxes: {', '.join(BOX_NAMES)}); "
            "to reroll type keep 5 5 (die values) or hold 134 (positions)") from None


def _keep_mask(raw: str, values: str, dice) -> int:
    """The hold mask keeping ``values`` (faces, a multiset of ``dice``): the leftmost die of each."""
    text = values.replace(",", " ").split()
    if len(text) == 1 and len(text[0]) > 1:
        text = list(text[0])
    if any(v not in "123456" or len(v) != 1 for v in text):
        raise IllegalActionError(f"{raw!r}: keep takes die values 1..6 (e.g. keep 5 5); "
                                 "hold takes positions (e.g. hold 134), box a box (e.g. box fours)")
    if not text:
        return 0                            # keep nothing: reroll all
    if dice is None:
        raise IllegalActionError(f"{raw!r}: keeping dice by value needs the dice showing")
    showing = [int(x) for x in dice]
    want = [int(v) for v in text]
    shown = " ".join(map(str, showing))
    if len(want) > len(showing):
        raise IllegalActionError(f"{raw!r}: there are only {len(showing)} dice (showing {shown})")
    short = [v for v in sorted(set(want)) if want.count(v) > showing.count(v)]
    if short:
        v = short[0]
        have = showing.count(v)
        what = f"no {v} is showing" if have == 0 else \
            f"only {_times(have, v)} showing, not {_WORDS[want.count(v)]}"
        raise IllegalActionError(f"{raw!r}: {what} (dice {shown}): keep takes the values of dice "
                                 "showing (hold takes positions, e.g. hold 134)")
    mask, used = 0, set()
    for v in want:
        i = next(i for i in range(len(showing)) if showing[i] == v and i not in used)
        used.add(i)
        mask |= 1 << i
    return mask


_WORDS = ("no", "one", "two", "three", "four", "five")


def _times(count: int, face: int) -> str:
    """``two 5s``, ``one 5``, ``no 5s``."""
    return f"{_WORDS[count]} {face}" + ("" if count == 1 else "s")   # count 1..5


def _describe(action: int, dice) -> str:
    """An action in the words of ``advise`` (keeps by value), with its positions."""
    if action < 13:
        return f"score {BOX_LABELS[action]}"
    h = action - 13
    pos = "".join(str(i + 1) for i in range(5) if (h >> i) & 1)
    if not pos:
        return "reroll all"
    if h == 31:
        return "keep all (reroll nothing)"
    vals = " ".join(map(str, sorted(int(dice[i]) for i in range(5) if (h >> i) & 1)))
    return f"keep {vals} (hold {pos})"


def _read(prompt: str) -> str:
    """One line from the player (EOFError at the end of input, KeyboardInterrupt on Ctrl-C)."""
    return input(prompt)


def play_game(rules, seed: int, hints: bool = False) -> None:
    """One interactive game on dice ``seed``: prompts for moves, prints each move's loss and,
    however the game ends, its graded summary.

    Raises:
        typer.Exit: status 130 when the player leaves with Ctrl-C (after the summary).
    """
    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.oracle.yahtzee.grading import DECISIONS, Grader
    from yamblab.oracle.yahtzee.table import OracleTable

    table = OracleTable.get(rules)
    grader = Grader(table)
    batch = new_batch(1, rules, seed=seed)
    lost = dict.fromkeys(DECISIONS, 0.0)
    count = {"decisions": 0, "perfect": 0}
    typer.echo(f"Yahtzee ({rules.name}), dice seed {seed}. {HOW_TO_TYPE}.")
    ended = None
    try:
        while not batch.done[0]:
            _turn(batch, grader, hints, lost, count)
    except EOFError:
        ended = "end of input (Ctrl-D)"
    except KeyboardInterrupt:
        ended = "interrupted (Ctrl-C)"
    _summary(batch, grader, table, lost, count, ended)
    if ended is not None and ended.startswith("interrupted"):
        raise typer.Exit(INTERRUPTED)


def _turn(batch, grader, hints: bool, lost: dict, count: dict) -> None:
    """One decision: show the position, read a move until one is legal, grade and play it."""
    from yamblab.oracle.yahtzee.grading import DECISIONS

    card = ", ".join(f"{BOX_LABELS[b]} {batch.box_scores[0, b]}" for b in range(13)
                     if batch.box_scores[0, b] >= 0) or "empty"
    dice = [int(x) for x in batch.dice[0]]
    rolls_left = int(batch.rolls_left[0])
    typer.echo(f"\nturn {int(batch.turn[0]) + 1}/13 · score {int(batch.total[0])} · card: {card}")
    typer.echo(f"dice {' '.join(map(str, dice))}   (positions 1 2 3 4 5) · rerolls left {rolls_left}")
    box, hold, _ = grader.values.action_values(batch)
    best = int(np.argmax(np.concatenate([box[0], hold[0]])))
    if hints:
        typer.echo(f"hint: {_describe(best, dice)}")
    while True:
        text = _read("your move (? for help): ")
        if text.strip().lower() in ("?", "help"):
            typer.echo(HELP.format(boxes=", ".join(BOX_NAMES)))
            continue
        try:
            action = parse_move(text, rolls_left, dice)
            if action < 13 and not np.isfinite(box[0, action]):
                legal = ", ".join(BOX_LABELS[b] for b in range(13) if np.isfinite(box[0, b]))
                why = "it is already filled" if batch.box_scores[0, action] >= 0 else "the rules forbid it now"
                raise IllegalActionError(f"{text.strip()!r}: cannot score {BOX_LABELS[action]}: {why}; "
                                         f"open to these dice: {legal}")
            regret, kind = grader.regrets(batch, np.array([action]))
            batch.step(np.array([action]))
            break
        except YamblabError as exc:
            typer.echo(f"  {exc}")
    r = float(regret[0])
    lost[DECISIONS[int(kind[0])]] += r
    count["decisions"] += 1
    if r < 1e-9:
        count["perfect"] += 1
        typer.echo("  perfect")
    else:
        typer.echo(f"  gave away {r:.2f} points of expected score (best: {_describe(best, dice)})")


def _summary(batch, grader, table, lost: dict, count: dict, ended: str | None) -> None:
    """The graded summary of the game so far (the same whether it finished or was left)."""
    total = sum(lost.values())
    by = " · ".join(f"{k} {v:.2f}" for k, v in lost.items())
    n, perfect = count["decisions"], count["perfect"]
    if ended is None:
        typer.echo(f"\nfinal score {int(batch.total[0])} · expected points given away {total:.2f} "
                   f"(optimal play averages {table.new_game_value:.2f})")
    else:
        turn = int(batch.turn[0]) + 1
        typer.echo(f"\n{ended}: game left at turn {turn}/13, rerolls left {int(batch.rolls_left[0])}")
        typer.echo(f"score so far {int(batch.total[0])} · expected points given away {total:.2f} "
                   f"(optimal play averages {table.new_game_value:.2f})")
        box, hold, _ = grader.values.action_values(batch)
        best = float(max(box[0].max(), hold[0].max()))
        typer.echo(f"optimal play from here would average a final score of {int(batch.total[0]) + best:.2f}")
    typer.echo(f"given away by decision: {by} · {n} decision{'s' if n != 1 else ''}, {perfect} perfect")
