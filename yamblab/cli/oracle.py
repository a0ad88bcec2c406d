"""``yamblab oracle build``, ``yamblab oracle evaluate`` and ``yamblab advise``: the exact solvers
from the command line."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import GAME_HELP, RULES_HELP, _bad_choice, _rules, check_game_options
from yamblab.cli.user_errors import user_errors
from yamblab.errors import YamblabError

oracle_app = typer.Typer(help="The exact solvers: Yahtzee's table (by rule variant) and a single Yamb "
                              "column's (down, up or free).", no_args_is_help=True)


@oracle_app.command("build")
@user_errors
def oracle_build(
    rules: Optional[str] = typer.Option(None, help=RULES_HELP + " Yahtzee only (default forced)."),
    game: str = typer.Option("yahtzee", help="yahtzee (the whole game's table), or yamb (a single column, "
                                             "see --preset/--column)."),
    preset: Optional[str] = typer.Option(None, help="Yamb rule preset (default croatian; with --game yamb)."),
    column: Optional[str] = typer.Option(None, help="Yamb column to solve: down (default), up or free "
                                                    "(with --game yamb)."),
    rebuild: bool = typer.Option(False, help="Ignore a cached Yahtzee table and rebuild it."),
    cache_dir: Optional[str] = typer.Option(None, help="Yahtzee table cache folder (default $YAMBLAB_CACHE_DIR "
                                                       "or ~/.cache/yamblab)."),
):
    """Build (or load from the cache) an exact table and print the value of a new game.

    Yahtzee: the whole game's table for a rule variant (cached on disk). Yamb: the exact
    solution of a single column (down, up or free) of a preset (not cached).
    """
    check_game_options(game, "--column", rules=rules, preset=preset, columns=column)
    if game == "yamb":
        if rebuild or cache_dir is not None:
            raise YamblabError("--rebuild and --cache-dir are Yahtzee options: a Yamb column's "
                               "solution is not cached")
        from yamblab.games.yamb.rules import get_preset

        preset = preset or "croatian"
        get_preset(preset)
        col = (column or "down").strip().lower()
        if col not in ("down", "up", "free"):
            raise _bad_choice("Yamb column", column, ["down", "up", "free"])
        api = _yamb_api()
        value = api.build_column_oracle(preset, col)
        typer.echo(f"yamb preset {preset} column {col}: optimal expected score {value:.4f}")
        return
    if cache_dir is not None and Path(cache_dir).exists() and not Path(cache_dir).is_dir():
        raise YamblabError(f"--cache-dir {cache_dir} is a file, not a folder")
    import time

    from yamblab.oracle.yahtzee.table import OracleTable

    r = _rules(rules or "forced")
    t0 = time.perf_counter()
    table = OracleTable.get(r, directory=cache_dir, progress=True, rebuild=rebuild)
    dt = time.perf_counter() - t0
    typer.echo(f"rules {r.name}: optimal expected score of a new game {table.new_game_value:.4f} "
               f"points ({dt:.2f} s; cache {OracleTable.cache_path(r, cache_dir)})")


@oracle_app.command("evaluate")
@user_errors
def oracle_evaluate(
    valuation: str = typer.Option("zero", help="zero (greedy), oracle, a rule of thumb (average, "
                                               "average-step, average-ramp, fit, fit-stages, tuned-ramp), "
                                               "a rule file (.json/.yaml), a table (.npy) or a checkpoint (.pt)."),
    rules: str = typer.Option("forced", help=RULES_HELP),
    breakdown: bool = typer.Option(False, help="Also the exact regret per game by decision and by box, "
                                               "box means and the bonus rate (forward pass)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
):
    """Exact expected score of turn-perfect play against a valuation (no sampling noise)."""
    from yamblab.cli.valuation import evaluate_command

    evaluate_command(valuation, rules, breakdown, as_json)


@user_errors
def advise(
    dice: str = typer.Option(..., help="The dice in order, e.g. 1,1,3,4,6 or 11346 (Yamb: the preset's "
                                       "5 or 6 dice)."),
    rolls_left: Optional[int] = typer.Option(
        None, min=0, help="Rerolls left this turn, 0 after the last roll (default: after the first roll: "
                          "2 for Yahtzee; for Yamb the turn's rolls less one, more on a Yamb game's last "
                          "turn when the preset allows)."),
    card: str = typer.Option("", help="The scorecard so far. Yahtzee: 'ones=3,full_house=25,yahtzee=50' "
                                     "(add 'yahtzee_bonuses=N' for bonuses earned). Yamb: ROW=POINTS for a "
                                     "single column ('ones=3,twos=8'), COLUMN/ROW=POINTS for a card of "
                                     "several ('down/ones=3,free/yamb=80')."),
    rules: Optional[str] = typer.Option(None, help=RULES_HELP + " Yahtzee only (default forced)."),
    game: str = typer.Option("yahtzee", help=GAME_HELP),
    preset: Optional[str] = typer.Option(None, help="Yamb rule preset (default croatian; with --game yamb)."),
    columns: Optional[str] = typer.Option(None, help="Yamb only: the card's columns, comma-separated "
                                                     "(default: the preset's whole card). A single down, up "
                                                     "or free column is ranked exactly, by its oracle."),
    announced: Optional[str] = typer.Option(None, help="Yamb only: the row announced this turn (a card "
                                                       "with an announce column)."),
    agent: Optional[str] = typer.Option(None, help="Yamb card with no exact oracle (several columns): the "
                                                   "bot whose turn plan ranks the actions, heuristic (the "
                                                   "default) or greedy."),
    checkpoint: Optional[str] = typer.Option(None, help="Yamb card with no exact oracle: rank by full-turn "
                                                        "search on this trained network instead of a bot."),
    top: int = typer.Option(10, min=0, help="Show the best N actions (0: all)."),
):
    """Rank every legal keep and box of a position: by its exact expected final score where an
    oracle solves the game (Yahtzee; a single Yamb down, up or free column), else (a Yamb card of
    several columns) by a bot's or a network's turn plan, named in the header line."""
    check_game_options(game, rules=rules)
    if game == "yamb":
        _advise_yamb(dice, rolls_left, card, preset, columns, announced, agent, checkpoint, top)
        return
    yamb_only = [name for name, v in (("--preset", preset), ("--columns", columns), ("--announced", announced),
                                      ("--agent", agent), ("--checkpoint", checkpoint)) if v is not None]
    if yamb_only:
        raise YamblabError(f"{' and '.join(yamb_only)} {'is a Yamb option' if len(yamb_only) == 1 else 'are Yamb options'}"
                           " (with --game yamb); Yahtzee is ranked by its exact oracle")
    from yamblab.errors import UnreachablePositionError
    from yamblab.games.dice import validate_dice
    from yamblab.oracle.yahtzee.advice import advise as _advise
    from yamblab.oracle.yahtzee.advice import card_position
    from yamblab.oracle.yahtzee.table import OracleTable

    if rolls_left is not None and rolls_left > 2:
        raise UnreachablePositionError(f"--rolls-left {rolls_left}: a Yahtzee turn has 0, 1 or 2 rerolls left")
    r = _rules(rules or "forced")
    validate_dice(dice)
    state, so_far, _, _ = card_position(card, r)
    if state.is_terminal:
        raise UnreachablePositionError("--card: the scorecard is full: there is nothing left to decide")
    table = OracleTable.get(r)
    ranked = _advise(table, state, dice, 2 if rolls_left is None else rolls_left, so_far)
    _print_ranked([(a.label, a.expected_final, a.loss) for a in ranked], "expected final", top)


def _print_ranked(rows: list[tuple[str, float, float]], value_name: str, top: int) -> None:
    """The table of ranked actions (best first): action, value, loss against the best."""
    shown = rows if top == 0 else rows[:top]
    typer.echo(f"{'action':34s} {value_name:>15s} {'loss':>9s}")
    for label, value, loss in shown:
        typer.echo(f"{label:34s} {value:15.4f} {loss:9.4f}")
    if len(shown) < len(rows):
        typer.echo(f"… {len(rows) - len(shown)} more (use --top 0 to see all)")


# ---------------------------------------------------------------------------- advise --game yamb
def _advise_yamb(dice, rolls_left, card, preset, columns, announced, agent, checkpoint, top) -> None:
    """``advise --game yamb``: a single down, up or free column through the API's own Yamb advice
    (:func:`yamblab.service.yamb.column_advice`, exact), any other card by the turn plan
    of a bot (heuristic by default, or greedy) or of full-turn search on a network."""
    from yamblab.games.dice import validate_dice
    from yamblab.games.protocol import make_game

    cols = None
    if columns is not None:
        cols = [c.strip() for c in columns.split(",")]
        if not all(cols):
            raise YamblabError(f"--columns {columns!r}: give column names separated by commas, e.g. down "
                               "or down,up")
    g = make_game("yamb", preset=preset or "croatian", columns=cols)
    r = g.rules
    _check_ranker(g, announced, agent, checkpoint)
    from yamblab.service.yamb import column_advice, column_oracle, yamb_row_scores

    items = _yamb_card_items(card, r)
    arr = validate_dice(dice, r.n_dice)
    scores = []
    for c in r.columns:
        try:
            scores.append(yamb_row_scores(r, items[c]))     # the API's check of rows
        except YamblabError as exc:
            raise type(exc)(f"--card: {exc}") from None
    _check_card(r, scores)
    filled = sum(x >= 0 for col in scores for x in col)
    if filled == r.n_turns:
        raise YamblabError("--card: the card is full: there is nothing left to decide")
    rolls = r.last_turn_rolls if filled == r.n_turns - 1 else r.rolls
    if rolls_left is not None and rolls_left > rolls - 1:
        raise YamblabError(f"--rolls-left {rolls_left}: this turn has {rolls} rolls, so 0..{rolls - 1} "
                           "rerolls are left after a roll")
    roll = 1 if rolls_left is None else rolls - rolls_left
    where = f"yamb {g.label}, points so far {{so_far}}, roll {roll} of {rolls}"
    if g.solved:
        preset_name, column = g.preset, g.oracle_column
        out = column_advice(column_oracle(preset_name, column), preset_name, column, items[column],
                            arr.tolist(), roll)
        typer.echo(where.format(so_far=out["score_so_far"]) + f": ranked exactly by the {column} column's "
                   "oracle (expected final score under optimal play)")
        _print_ranked([(a["label"], a["expected_final"], a["loss"]) for a in out["actions"]],
                      "expected final", top)
        return
    batch = _yamb_position(r, scores, arr, roll, rolls, announced)
    if not batch.legal_actions()[0].any():
        raise YamblabError("no move is legal in this position (a turn whose only open boxes are in the "
                           "announce column must announce after its first roll: give --announced ROW)")
    so_far = int(batch.total[0])
    if checkpoint is not None:
        from yamblab.agents.base import make_agent

        search = make_agent("search", g, valuation=checkpoint, depth="full_turn").search
        q = search.action_values(batch)[0]
        how = (f"ranked by full-turn search on the network of {checkpoint} (no exact oracle for this card): "
               "expected final = points so far + the network's value of the rest")
        value_name, offset = "expected final", so_far
    else:
        bot = agent or "heuristic"
        q = _bot_action_values(bot, g, batch)[0]
        what = ("expected points this turn adds" if bot == "greedy" else
                "the bot's points-equivalent of the card (points now less the row's par, plus projected "
                "bonus and middle term), not an expected score")
        how = f"ranked by the {bot} bot's turn plan (no exact oracle for this card): value = {what}"
        value_name, offset = f"{bot} value", 0.0
    typer.echo(where.format(so_far=so_far) + ": " + how)
    _print_ranked(_yamb_ranked(batch, q, offset), value_name, top)


def _check_ranker(g, announced, agent, checkpoint) -> None:
    """Refuse ``advise --game yamb`` flags that do not fit the card: a bot or network for a column
    its oracle ranks exactly, ``--announced`` without an announce column, both a bot and a
    network, an unknown bot, a checkpoint that is not a file."""
    if g.solved:
        for name, value in (("--agent", agent), ("--checkpoint", checkpoint)):
            if value is not None:
                raise YamblabError(f"{name} ranks a Yamb card that has no exact oracle; a single "
                                   f"{g.oracle_column} column is ranked exactly, by its oracle: drop {name}")
    if announced is not None and g.rules.announce_column < 0:
        raise YamblabError(f"--announced {announced}: the card {g.label} has no announce column")
    if agent is not None and checkpoint is not None:
        raise YamblabError(f"--checkpoint is the network that ranks the actions; drop --agent {agent}")
    if agent is not None and agent not in ("heuristic", "greedy"):
        raise YamblabError(f"--agent {agent}: a Yamb card with no exact oracle is ranked by a bot's turn plan "
                           "(heuristic or greedy) or by a network's (--checkpoint PATH)")
    if checkpoint is not None and not Path(checkpoint).is_file():
        raise YamblabError(f"--checkpoint: no checkpoint file at {checkpoint}")


def _yamb_card_items(text: str, rules) -> dict[str, dict[str, int]]:
    """``--card`` of a Yamb game as {column kind: {row name: points}} (the rows checked later).

    ``ROW=POINTS`` names a row of a single-column card; ``COLUMN/ROW=POINTS`` a box of any card.

    Raises:
        UnreachablePositionError: an entry of another form, points that are not a whole
            number, a column not on the card, a box given twice.
    """
    from yamblab.errors import UnknownVariantError, UnreachablePositionError

    out: dict[str, dict[str, int]] = {c: {} for c in rules.columns}
    seen = set()
    single = len(rules.columns) == 1
    for item in [p.strip() for p in (text or "").split(",") if p.strip()]:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            form = "ROW=POINTS (e.g. ones=3)" if single else "COLUMN/ROW=POINTS (e.g. down/ones=3)"
            raise UnreachablePositionError(f"--card entry {item!r} must look like {form}")
        col, slash, row = key.strip().rpartition("/")
        col, row = col.strip().lower(), row.strip()
        if not slash:
            if not single:
                raise UnreachablePositionError(
                    f"--card entry {item!r}: name the column too, COLUMN/ROW=POINTS (e.g. down/{row}={value.strip()}); "
                    f"the columns: {', '.join(rules.columns)}")
            col = rules.columns[0]
        elif col not in rules.columns:
            raise UnknownVariantError(f"--card entry {item!r}: column {col!r} is not on this card; "
                                      f"its columns: {', '.join(rules.columns)}")
        try:
            points = int(value.strip())
        except ValueError:
            raise UnreachablePositionError(f"--card entry {item!r}: points {value.strip()!r} must be a "
                                           "whole number") from None
        norm = (col, row.lower().replace(" ", "_").replace("-", "_"))
        if norm in seen:
            raise UnreachablePositionError(f"--card: {col}/{row} is given twice")
        seen.add(norm)
        out[col][row] = points
    return out


def _check_card(rules, scores: list[list[int]]) -> None:
    """A Yamb card some game reaches: every score one a roll makes in its row, every column
    filled in an order its kind allows.

    Raises:
        UnreachablePositionError: naming the box.
    """
    from yamblab.errors import UnreachablePositionError
    from yamblab.games.yamb.rules import ROW_LABELS
    from yamblab.games.yamb.scoring import column_next_rows, score_table

    tab = score_table(rules)
    single = len(rules.columns) == 1
    for c, kind in enumerate(rules.columns):
        for row, x in enumerate(scores[c]):
            if x >= 0 and not (tab[:, row, :rules.max_rolls] == x).any():
                box = rules.rows[row] if single else f"{kind}/{rules.rows[row]}"
                raise UnreachablePositionError(f"--card {box}={x}: no roll scores {x} in {ROW_LABELS[rules.rows[row]]}")
        want = {row for row, x in enumerate(scores[c]) if x >= 0}
        open_rows = [True] * rules.n_rows
        while True:             # fill the column in an order its kind allows
            nxt = [row for row in column_next_rows(kind, open_rows) if row in want]
            if not nxt:
                break
            for row in nxt:
                open_rows[row] = False
                want.discard(row)
        if want:
            stuck = ROW_LABELS[rules.rows[min(want)]]
            before = " and ".join(ROW_LABELS[rules.rows[row]] for row in column_next_rows(kind, open_rows))
            raise UnreachablePositionError(f"--card: the {kind} column fills its rows in order: {stuck} cannot "
                                           f"be filled while {before} is open")


def _yamb_position(rules, scores: list[list[int]], dice, roll: int, rolls: int, announced):
    """A one-game :class:`~yamblab.games.yamb.engine.YambBatch` standing in the position.

    Raises:
        IllegalActionError, UnreachablePositionError: an announced row that is not a row, or not
            open in the announce column.
    """
    import numpy as np

    from yamblab.errors import IllegalActionError, UnreachablePositionError
    from yamblab.games.yamb.engine import YambBatch
    from yamblab.games.yamb.rules import ROW_LABELS
    from yamblab.games.yamb.scoring import column_parts

    ann = -1
    if announced is not None:
        if announced.strip().lstrip("+-").isdigit():
            raise IllegalActionError(f"--announced {announced}: name the row ({', '.join(rules.rows)}), "
                                     "not a number")
        try:
            ann = rules.row_index(announced)
        except YamblabError as exc:
            raise type(exc)(f"--announced {announced}: {exc}") from None
        if scores[rules.announce_column][ann] >= 0:
            raise UnreachablePositionError(f"--announced {announced}: {ROW_LABELS[rules.rows[ann]]} of the "
                                           "announce column is already filled")
    b = YambBatch(1, rules, seed=0)
    b.card[0] = np.asarray(scores, np.int16)
    b.turn[0] = sum(x >= 0 for col in scores for x in col)
    b.rolls_max[0] = rolls
    b.rolls_used[0] = roll
    b.dice[0] = dice
    b.announced[0] = ann
    b.pure[0] = int(roll == 1)           # a later roll counts as one that kept dice
    b.col_total[0] = [column_parts(rules, col)["total"] for col in scores]
    b.total[0] = int(b.col_total[0].sum())
    return b


def _bot_action_values(name: str, game, batch):
    """Q of every engine action by a bot's turn plan: the full-turn search's action values
    (:meth:`~yamblab.search.yamb_search.YambFullTurnSearch.action_values`) with the bot's box
    valuation in place of a network's, so that their best is the bot's move."""
    from yamblab.agents.base import make_agent
    from yamblab.search.yamb_search import YambFullTurnSearch

    bot = make_agent(name, game)

    class BotPlan(YambFullTurnSearch):
        def box_values(self, batch, games):
            return bot.box_values(batch, games)

    return BotPlan(game.rules, valuation=None).action_values(batch)


def _yamb_ranked(batch, q, offset: float) -> list[tuple[str, float, float]]:
    """Legal actions of game 0 as (label, value + offset, loss), best first; holds that keep the
    same dice once (by value), boxes first among equals."""
    import numpy as np

    from yamblab.games.yamb.rules import ROW_LABELS

    r = batch.rules
    dice = [int(x) for x in batch.dice[0]]
    rows, seen = [], set()
    for a in np.flatnonzero(np.isfinite(q)):
        a = int(a)
        if a < batch.n_placements:
            c, row = divmod(a, r.n_rows)
            label, box = f"score {r.columns[c]}/{ROW_LABELS[r.rows[row]]}", True
        elif a < batch.announce_offset:
            h = a - batch.hold_offset
            held = tuple(sorted(dice[i] for i in range(len(dice)) if (h >> i) & 1))
            if held in seen:
                continue
            seen.add(held)
            label = ("reroll all" if not held else "keep all" if len(held) == len(dice)
                     else "keep " + " ".join(map(str, held)))
            box = False
        else:
            label, box = f"announce {ROW_LABELS[r.rows[a - batch.announce_offset]]}", False
        rows.append((label, float(q[a]), box))
    if not rows:
        return []
    best = max(v for _, v, _ in rows)
    rows.sort(key=lambda t: (-t[1], not t[2]))
    return [(label, v + offset, best - v) for label, v, _ in rows]


def _yamb_api():
    try:
        return importlib.import_module("yamblab.oracle.yamb.build")
    except ModuleNotFoundError as exc:
        if exc.name == "yamblab.oracle.yamb.build":
            raise YamblabError("Yamb support is not installed in this version of yamblab") from None
        raise
