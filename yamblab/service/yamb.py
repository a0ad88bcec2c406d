"""What ``yamblab serve`` (and ``yamblab advise --game yamb``) answers for a single Yamb column:
every action ranked by the column's exact oracle, and a game replayed on seeded dice with every
move graded. Functions of an oracle, so any caller with one answers as the server does."""

from __future__ import annotations

import numpy as np

from yamblab.errors import IllegalActionError, UnreachablePositionError
from yamblab.games.dice import validate_dice
from yamblab.vocabulary import BOX, decision_names, keep_name

#: the largest dice seed
MAX_SEED = 2**64 - 1


def ranked_actions(oracle, scores: list[int], dice, roll: int) -> list[dict]:
    """Every action of a single-column position, ranked by its exact expected final score
    (``loss``: below the best), a keep of the same faces once."""
    from yamblab.games.yamb.rules import ROW_LABELS
    from yamblab.games.yamb.scoring import column_parts

    so_far = column_parts(oracle.rules, scores)["total"]
    q = oracle.action_values(scores, dice, roll)
    best = max(q.values())
    out, seen = [], set()
    for name, v in q.items():
        if name.startswith("hold:"):
            h = int(name.split(":")[1])
            held = tuple(sorted(int(dice[i]) for i in range(len(dice)) if (h >> i) & 1))
            if held in seen:
                continue
            seen.add(held)
            label = "reroll all" if not held else ("keep all" if len(held) == len(dice)
                                                   else "keep " + " ".join(map(str, held)))
            move = {"hold": [i + 1 for i in range(len(dice)) if (h >> i) & 1]}
        else:
            row = name.split(":")[1] if ":" in name else oracle.rules.rows[oracle.order[sum(x >= 0 for x in scores)]]
            label = f"score {ROW_LABELS[row]}"
            move = {"row": row}
        out.append({"label": label, "move": move, "expected_final": so_far + v, "loss": best - v})
    out.sort(key=lambda a: (a["loss"], "row" not in a["move"]))
    return out

def column_advice(oracle, preset: str, column: str, scores, dice, roll: int) -> dict:
    """Every action of a Yamb single-column position ranked by ``oracle`` (its column's)
    by exact expected final score.

    Args:
        scores: {row name: points} of the filled rows; dice: the faces showing; roll: the
            roll number this turn (1-based).

    Raises:
        YamblabError: unknown rows, impossible scores or order, bad dice or roll number.
    """
    from yamblab.games.yamb.scoring import column_parts

    s = yamb_row_scores(oracle.rules, scores)
    arr = validate_dice(dice, oracle.rules.n_dice)
    return {"preset": preset, "column": column, "score_so_far": column_parts(oracle.rules, s)["total"],
            "actions": ranked_actions(oracle, s, arr.tolist(), int(roll))}

def column_replay(oracle, preset: str, column: str, seed: int, moves: list, game: int = 0,
              advice: bool = False) -> dict:
    """Replay a Yamb single-column game on seeded dice, grading every move against ``oracle``.

    Moves are ``{"hold": [positions]}`` or ``{"row": name}`` (a down/up column takes
    ``{"row": null}``: its next row).

    Raises:
        IllegalActionError: a move the rules forbid (naming the move's number).
    """
    from yamblab.games.yamb.engine import YambBatch
    from yamblab.games.yamb.rules import ROW_LABELS
    from yamblab.games.yamb.scoring import column_parts

    if not 0 <= int(seed) <= MAX_SEED:
        raise UnreachablePositionError(f"seed {seed} must be 0..2**64-1")
    rules = oracle.rules
    batch = YambBatch(1, rules, seed=int(seed), first_game=int(game))
    graded = []
    by = dict.fromkeys(decision_names(rules.max_rolls), 0.0)     # the words every report uses
    for k, move in enumerate(moves):
        where = f"move {k + 1}"
        if batch.done[0]:
            raise IllegalActionError(f"{where}: the game is already over")
        scores = batch.card[0, 0].tolist()
        dice = batch.dice[0].tolist()
        roll = int(batch.rolls_used[0])
        if not isinstance(move, dict) or (("hold" in move) == ("row" in move)):
            raise IllegalActionError(f'{where}: a move is {{"hold": [positions]}} or {{"row": "row name"}}')
        if "hold" in move:
            pos = move["hold"]
            if (not isinstance(pos, list) or any(not isinstance(p, int) or isinstance(p, bool) for p in pos)
                    or any(not 1 <= p <= rules.n_dice for p in pos) or len(set(pos)) != len(pos)):
                raise IllegalActionError(f"{where}: hold {pos!r}: die positions are 1..{rules.n_dice}, each once")
            if roll >= int(batch.rolls_max[0]):
                raise IllegalActionError(f"{where}: no rolls left this turn: score a row")
            h = sum(1 << (p - 1) for p in pos)
            name, action, label = f"hold:{h}", batch.hold_offset + h, None
        else:
            nxt = oracle.order[int(batch.turn[0])] if column != "free" else None
            row = move["row"]
            if row is None:
                if nxt is None:
                    raise IllegalActionError(f"{where}: a free column needs the row to score")
                r = nxt
            else:
                if isinstance(row, int) or str(row).strip().isdigit():
                    raise IllegalActionError(f"{where}: name the row ({', '.join(rules.rows)}), not a number")
                r = rules.row_index(row)
            if nxt is not None and r != nxt:
                raise IllegalActionError(f"{where}: the {column} column takes {ROW_LABELS[rules.rows[nxt]]} next")
            if scores[r] >= 0:
                raise IllegalActionError(f"{where}: {ROW_LABELS[rules.rows[r]]} is already filled")
            name = "score" if column != "free" else f"score:{rules.rows[r]}"
            action, label = r, f"score {ROW_LABELS[rules.rows[r]]}"
        q = oracle.action_values(scores, dice, roll)
        best = max(q, key=q.get)
        loss = q[best] - q[name]
        ranked = ranked_actions(oracle, scores, dice, roll)
        if label is None:
            held = sorted(dice[i] for i in range(len(dice)) if (h >> i) & 1)
            label = "reroll all" if not held else "keep " + " ".join(map(str, held))
        batch.step(np.array([action]))
        by[BOX if name.startswith("score") else keep_name(roll)] += loss
        graded.append({"label": label, "move": move, "dice": dice, "loss": float(loss),
                       "best": ranked[0]["label"]})
    scores = batch.card[0, 0].tolist()
    out = {"preset": preset, "column": column, "seed": int(seed), "game": int(game),
           "rows": list(rules.rows),
           "position": {"dice": batch.dice[0].tolist(), "roll": int(batch.rolls_used[0]),
                        "rolls": int(batch.rolls_max[0]), "turn": min(int(batch.turn[0]) + 1, rules.n_rows),
                        "scores": {rules.rows[r]: int(v) for r, v in enumerate(scores) if v >= 0},
                        "total": column_parts(rules, scores)["total"], "done": bool(batch.done[0]),
                        "next_row": (None if column == "free" or batch.done[0]
                                     else rules.rows[oracle.order[int(batch.turn[0])]])},
           "moves": graded, "loss_total": float(sum(g["loss"] for g in graded)),
           "loss_by_decision": by, "optimal_expected": oracle.value}
    if advice and not batch.done[0]:
        out["advice"] = ranked_actions(oracle, scores, batch.dice[0].tolist(), int(batch.rolls_used[0]))
    return out


def column_oracle(preset: str, column: str):
    """The exact oracle of a single Yamb column (``down``, ``up``, or ``free``: about 20 s and
    150 MB to build) of ``preset``."""
    if column == "free":
        from yamblab.oracle.yamb.free import FreeColumnOracle

        return FreeColumnOracle(preset)
    from yamblab.oracle.yamb.column import ColumnOracle

    return ColumnOracle(preset, column)


def yamb_row_scores(rules, scores) -> list[int]:
    """A single column's ``{row name: points}`` as a list over ``rules.rows`` (-1: open).

    Raises:
        UnreachablePositionError: not a mapping, or points that are not a whole number >= 0.
        IllegalActionError: a row given by number; an unknown row (``rules.row_index``'s error).
    """
    rows = rules.rows
    out = [-1] * len(rows)
    if scores is None:
        return out
    if not isinstance(scores, dict):
        raise UnreachablePositionError("Yamb scores are a mapping {row name: points}")
    for name, v in scores.items():
        key = str(name).strip()
        if key.lstrip("+-").isdigit():
            raise IllegalActionError(f"Yamb row {key}: name the row ({', '.join(rows)}), not a number")
        r = rules.row_index(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise UnreachablePositionError(f"row {rows[r]}: points must be a whole number ≥ 0, got {v!r}")
        out[r] = v
    return out
