"""What ``yamblab serve`` answers, without the web framework: advice, grading, agents' moves.

:class:`Service` holds the tables loaded once at start-up (one exact oracle per Yahtzee rule
variant, the exact Yamb column oracles, optionally the target-score table) and answers in
plain dicts of JSON types. Every user mistake raises a :class:`~yamblab.errors.YamblabError`
naming the problem (the app turns it into a 4xx); the service holds no per-game state, so one
request cannot disturb another: a game in the browser is its dice seed plus its moves so far,
replayed on the engine at every request (at most 39 decisions, well under a millisecond each).

Moves are written as ``{"hold": [1, 3, 4]}`` (die positions 1..5 to keep; ``[]`` rerolls all)
or ``{"box": "full_house"}`` (a box name, never a bare index). Sources: the advice endpoint of
timpalpant/yahtzee (a position in, every action's value out); the Best Values post's grading
widget (a decision's loss is the oracle's expected score after the best action minus that after
the chosen one).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from yamblab.errors import IllegalActionError, UnknownVariantError, UnreachablePositionError, YamblabError
from yamblab.games.dice import validate_dice
from yamblab.games.yahtzee.engine import new_batch
from yamblab.games.yahtzee.rules import (BOX_LABELS, BOX_NAMES, UPPER_BONUS_THRESHOLD, BoundaryState,
                                         YahtzeeRules, box_index, score_box)
from yamblab.oracle.yahtzee.advice import advise, card_position
from yamblab.oracle.yahtzee.grading import DECISIONS, Grader
from yamblab.oracle.yahtzee.table import OracleTable
from yamblab.service.yamb import MAX_SEED, column_advice, column_oracle, column_replay

__all__ = ["Service", "BASELINE_AGENTS", "parse_move"]

#: Named agents a user may pick (``checkpoint`` too when the server was given one).
BASELINE_AGENTS = ("oracle", "greedy", "random")


def parse_move(move: dict, rolls_left: int) -> int:
    """An engine action (0..12 box, 13 + hold mask) from ``{"hold": [positions]}`` or ``{"box": name}``.

    Raises:
        IllegalActionError: both or neither key, a bare number as a box, a position outside
            1..5 or given twice, or a hold with no rolls left.
    """
    if not isinstance(move, dict) or (("hold" in move) == ("box" in move)):
        raise IllegalActionError('a move is {"hold": [die positions 1..5]} or {"box": "box name"}')
    if "box" in move:
        name = move["box"]
        if not isinstance(name, str) or name.strip().lstrip("+-").isdigit():
            raise IllegalActionError(f"box {name!r}: name the box ({', '.join(BOX_NAMES)}), not a number")
        return box_index(name)
    pos = move["hold"]
    if not isinstance(pos, (list, tuple)) or any(not isinstance(p, int) or isinstance(p, bool) for p in pos):
        raise IllegalActionError(f"hold {pos!r}: give a list of die positions 1..5")
    if any(not 1 <= p <= 5 for p in pos) or len(set(pos)) != len(pos):
        raise IllegalActionError(f"hold {list(pos)}: die positions are 1..5, each at most once")
    if rolls_left <= 0:
        raise IllegalActionError("no rerolls left this turn: score a box")
    return 13 + sum(1 << (p - 1) for p in pos)


def _move_of(action: int) -> dict:
    if action < 13:
        return {"box": BOX_NAMES[action]}
    return {"hold": [i + 1 for i in range(5) if ((action - 13) >> i) & 1]}


def _label(action: int, dice) -> str:
    if action < 13:
        return f"score {BOX_LABELS[action]}"
    held = [int(dice[i]) for i in range(5) if ((action - 13) >> i) & 1]
    if not held:
        return "reroll all"
    if len(held) == 5:
        return "keep all (reroll nothing)"
    return "keep " + " ".join(map(str, sorted(held)))


def _state_of(batch, i: int = 0) -> BoundaryState:
    up = int(batch.upper_raw[i])
    return BoundaryState(filled=int(batch.filled[i]), upper=min(up, UPPER_BONUS_THRESHOLD),
                         yahtzee_fifty=int(batch.ystate[i]) == 2)


def _position_of(batch, i: int = 0) -> dict:
    card = {BOX_NAMES[b]: int(batch.box_scores[i, b]) for b in range(13) if batch.box_scores[i, b] >= 0}
    return {"dice": [int(x) for x in batch.dice[i]], "rolls_left": int(batch.rolls_left[i]),
            "turn": min(int(batch.turn[i]) + 1, 13), "card": card, "total": int(batch.total[i]),
            "upper_subtotal": int(batch.upper_raw[i]),
            "yahtzee_bonuses": int(batch.yahtzee_bonuses[i]), "done": bool(batch.done[0])}


@dataclass
class _AgentSlot:
    agent: object
    lock: threading.Lock


class Service:
    """The tables and agents a server shares between requests (read-only after start-up).

    Args:
        rules: the Yahtzee variants to serve (their oracle tables load now: 0.4 s each to
            build, instant from the cache).
        checkpoint: a trained checkpoint, served as agent ``checkpoint`` (full-turn search
            on its value head).
        yamb_presets: Yamb presets whose down and up column oracles are built now (about
            0.7 s each).
        yamb_free: also build the free-column oracle of each Yamb preset (about 20 s and
            150 MB each).
        target: ``True``: also load (or build: minutes) the target-score table of the first
            variant (:mod:`yamblab.oracle.yahtzee.target`) answering up to ``target_max_points``
            points still needed; or a :class:`~yamblab.oracle.yahtzee.target.TargetTable` to serve.

    Raises:
        UnknownVariantError: an unknown variant or preset.
        YamblabError: a checkpoint path that is not a file.
    """

    def __init__(self, rules=("forced",), checkpoint: str | None = None, yamb_presets=("croatian",),
                 yamb_free: bool = False, target=False, target_max_points: int = 300,
                 progress: bool = False):
        from pathlib import Path

        parsed = [r if isinstance(r, YahtzeeRules) else YahtzeeRules.parse(r) for r in rules]
        if not parsed:
            raise UnknownVariantError("serve at least one rule variant")
        self.default_rules = parsed[0].name
        self.tables: dict[str, OracleTable] = {r.name: OracleTable.get(r, progress=progress) for r in parsed}
        if checkpoint is not None and not Path(checkpoint).is_file():
            raise YamblabError(f"no checkpoint file at {checkpoint}")
        self.checkpoint = checkpoint
        self._agents: dict[tuple[str, str], _AgentSlot] = {}
        self._agents_lock = threading.Lock()
        self.yamb: dict[tuple[str, str], object] = {}
        for preset in yamb_presets:
            for column in ("down", "up", *(("free",) if yamb_free else ())):
                self.yamb[(preset, column)] = column_oracle(preset, column)
        self.target = None
        if target is True:
            from yamblab.oracle.yahtzee.target import TargetTable

            self.target = TargetTable.get(parsed[0], target_max_points, progress=progress)
        elif target:
            self.target = target      # a TargetTable built elsewhere

    # ------------------------------------------------------------------ look-ups
    def table(self, rules: str | None) -> OracleTable:
        """The oracle table of a served variant.

        Raises:
            UnknownVariantError: a variant that does not parse, or one this server does not serve.
        """
        name = YahtzeeRules.parse(rules if rules is not None else self.default_rules).name
        if name not in self.tables:
            raise UnknownVariantError(f"rules {name!r} are not served here; served: {', '.join(self.tables)} "
                                      "(start the server with --rules to add more)")
        return self.tables[name]

    def agent_names(self) -> list[str]:
        """Agents a request may name."""
        return list(BASELINE_AGENTS) + (["checkpoint"] if self.checkpoint else [])

    def _agent(self, name: str, table: OracleTable) -> _AgentSlot:
        if name not in self.agent_names():
            extra = "" if self.checkpoint else " (start the server with --checkpoint to add 'checkpoint')"
            raise UnknownVariantError(f"unknown agent {name!r}; choose one of {', '.join(self.agent_names())}{extra}")
        key = (name, table.rules.name)
        with self._agents_lock:
            if key not in self._agents:
                self._agents[key] = _AgentSlot(_make_agent(name, table, self.checkpoint), threading.Lock())
            return self._agents[key]

    def info(self) -> dict:
        """What this server serves: variants with their optimal expected score, agents, Yamb oracles."""
        return {"rules": {k: t.new_game_value for k, t in self.tables.items()},
                "default_rules": self.default_rules, "agents": self.agent_names(),
                "boxes": {n: l for n, l in zip(BOX_NAMES, BOX_LABELS)},
                "yamb": [{"preset": p, "column": c, "value": o.value,
                          "rows": list(o.rules.rows)} for (p, c), o in self.yamb.items()],
                "target": None if self.target is None else {"rules": self.target.rules.name,
                                                            "max_points": self.target.max_points}}

    # ------------------------------------------------------------------ Yahtzee
    def advice(self, rules, card, dice, rolls_left: int, yahtzee_bonuses: int | None = None,
               top: int | None = None) -> dict:
        """Every legal keep and box of a position, ranked by exact expected final score.

        Returns:
            dict: ``score_so_far`` (points), ``actions`` (best first: ``label``, ``move``,
            ``expected_final`` points, ``loss`` points given away against the best).

        Raises:
            YamblabError: a bad variant, card, dice or rolls left.
        """
        table = self.table(rules)
        state, so_far, _, _ = card_position(card, table.rules, yahtzee_bonuses)
        arr = validate_dice(dice)
        ranked = advise(table, state, arr, int(rolls_left), so_far)
        out = []
        for a in ranked:
            action = a.box if a.kind == "box" else 13 + a.hold_mask
            out.append({"kind": a.kind, "label": a.label, "move": _move_of(action),
                        "expected_final": a.expected_final, "loss": a.loss})
        if top:
            out = out[:int(top)]
        return {"rules": table.rules.name, "score_so_far": so_far, "actions": out}

    def _batch_for(self, table: OracleTable, card, dice, rolls_left: int, yahtzee_bonuses):
        """A one-game engine batch standing in the given position (for agents)."""
        state, so_far, scores, bonuses = card_position(card, table.rules, yahtzee_bonuses)
        arr = validate_dice(dice)
        if int(rolls_left) not in (0, 1, 2):
            raise UnreachablePositionError(f"rolls left must be 0, 1 or 2, got {rolls_left}")
        if state.is_terminal:
            raise UnreachablePositionError("the scorecard is full: there is nothing left to decide")
        b = new_batch(1, table.rules, seed=0)
        b.dice[0] = arr
        b.rolls_left[0] = int(rolls_left)
        b.turn[0] = len(scores)
        b.filled[0] = state.filled
        for box, pts in scores.items():
            b.box_scores[0, box] = pts
        b.upper_raw[0] = sum(v for k, v in scores.items() if k < 6)
        b.ystate[0] = state.ystate
        b.yahtzee_bonuses[0] = bonuses
        b.total[0] = so_far
        return b

    def agent_move(self, rules, agent: str, card, dice, rolls_left: int,
                   yahtzee_bonuses: int | None = None) -> dict:
        """The move a named agent makes in a position, graded, with its search values if it searches.

        Returns:
            dict: ``move``, ``label``, ``loss`` (points of expected score it gives away) and,
            for agents that search (``oracle``, ``checkpoint``), ``values``: every legal
            action's search value (points still to come by the agent's own valuation).

        Raises:
            YamblabError: a bad position or an unknown agent.
        """
        table = self.table(rules)
        batch = self._batch_for(table, card, dice, rolls_left, yahtzee_bonuses)
        slot = self._agent(agent, table)
        with slot.lock:
            slot.agent.reset(batch)
            action = int(np.asarray(slot.agent.act(batch))[0])
            values = _search_values(slot.agent, batch)
        regret, _ = Grader(table).regrets(batch, np.array([action]))
        out = {"agent": agent, "move": _move_of(action), "label": _label(action, batch.dice[0]),
               "loss": float(regret[0])}
        if values is not None:
            out["values"] = values
        return out

    def replay(self, rules, seed: int, moves: list, game: int = 0, advice: bool = False) -> dict:
        """Replay a game in the browser: seeded dice, the player's moves so far, each graded.

        The dice of game ``game`` of seed ``seed`` come from the engine, so an agent that plays
        the same game sees the same dice wherever it rerolls the same positions.

        Returns:
            dict: ``position`` (dice, rolls_left, turn, card, total, done), ``moves`` (each
            ``label``, ``kind`` (first keep / second keep / box), ``loss``, ``best`` label),
            ``loss_total``, ``loss_by_decision``, and with ``advice`` the ranked actions now.

        Raises:
            IllegalActionError: a move the rules forbid (naming the move's number).
        """
        table = self.table(rules)
        if not 0 <= int(seed) <= MAX_SEED:
            raise UnreachablePositionError(f"seed {seed} must be 0..2**64-1")
        batch = new_batch(1, table.rules, seed=int(seed), first_game=int(game))
        grader = Grader(table)
        graded = []
        by = dict.fromkeys(DECISIONS, 0.0)
        for k, move in enumerate(moves):
            if batch.done[0]:
                raise IllegalActionError(f"move {k + 1}: the game is already over")
            try:
                action = parse_move(move, int(batch.rolls_left[0]))
            except YamblabError as exc:
                raise IllegalActionError(f"move {k + 1}: {exc}") from None
            box, hold, _ = grader.values.action_values(batch)
            if action < 13 and not np.isfinite(box[0, action]):
                legal = ", ".join(BOX_LABELS[b] for b in range(13) if np.isfinite(box[0, b]))
                raise IllegalActionError(f"move {k + 1}: cannot score {BOX_LABELS[action]} now; legal: {legal}")
            regret, kind = grader.regrets(batch, np.array([action]))
            best = int(np.argmax(np.concatenate([box[0], hold[0]])))
            label = _label(action, batch.dice[0])
            best_label = _label(best, batch.dice[0])
            dice = [int(x) for x in batch.dice[0]]
            batch.step(np.array([action]))
            d = DECISIONS[int(kind[0])]
            by[d] += float(regret[0])
            graded.append({"label": label, "move": _move_of(action), "dice": dice, "decision": d,
                           "loss": float(regret[0]), "best": best_label})
        out = {"rules": table.rules.name, "seed": int(seed), "game": int(game),
               "position": _position_of(batch), "moves": graded,
               "loss_total": float(sum(g["loss"] for g in graded)), "loss_by_decision": by,
               "optimal_expected": table.new_game_value}
        if advice and not batch.done[0]:
            state = _state_of(batch)
            ranked = advise(table, state, batch.dice[0], int(batch.rolls_left[0]), int(batch.total[0]))
            out["advice"] = [{"label": a.label, "move": _move_of(a.box if a.kind == "box" else 13 + a.hold_mask),
                              "expected_final": a.expected_final, "loss": a.loss} for a in ranked]
        return out

    def agent_game(self, rules, agent: str, seed: int, game: int = 0) -> dict:
        """A whole game of a named agent on the dice of game ``game`` of ``seed``, graded move by move.

        Returns:
            the same dict as :meth:`replay` after the agent's moves (``moves`` in order).
        """
        table = self.table(rules)
        if not 0 <= int(seed) <= MAX_SEED:
            raise UnreachablePositionError(f"seed {seed} must be 0..2**64-1")
        batch = new_batch(1, table.rules, seed=int(seed), first_game=int(game))
        slot = self._agent(agent, table)
        moves = []
        with slot.lock:
            slot.agent.reset(batch)
            while not batch.done[0]:
                action = int(np.asarray(slot.agent.act(batch))[0])
                moves.append(_move_of(action))
                batch.step(np.array([action]))
        out = self.replay(rules, seed, moves, game)
        out["agent"] = agent
        return out

    def grade_decisions(self, rules, decisions: list[dict], card=None, yahtzee_bonuses: int | None = None) -> dict:
        """Grade a recorded game given as decisions (``dice``, ``rolls_left``, ``move``).

        Each decision is checked against the one before: within a turn the rolls left fall
        by one and the held dice stay in their positions; a box starts a new turn with two
        rolls left. The card starts from ``card`` (default: a new game).

        Returns:
            dict: per decision ``label``, ``decision`` kind, ``loss``, ``best``; ``loss_total``,
            ``loss_by_decision``, ``final_score`` when the card is full.

        Raises:
            YamblabError: a decision inconsistent with the one before, illegal under the
                rules, or with impossible dice (naming the decision's number).
        """
        table = self.table(rules)
        rules_obj = table.rules
        state, total, _, _ = card_position(card, rules_obj, yahtzee_bonuses)
        graded = []
        by = dict.fromkeys(DECISIONS, 0.0)
        prev = None   # (dice, rolls_left, hold positions) of the previous keep
        for k, d in enumerate(decisions):
            where = f"decision {k + 1}"
            try:
                dice = validate_dice(d.get("dice"))
                rl = d.get("rolls_left")
                if rl not in (0, 1, 2):
                    raise UnreachablePositionError(f"rolls left must be 0, 1 or 2, got {rl!r}")
                if state.is_terminal:
                    raise UnreachablePositionError("the card is already full")
                if prev is not None:
                    pdice, prl, held = prev
                    if rl != prl - 1:
                        raise UnreachablePositionError(f"after a reroll with {prl} rolls left, "
                                                       f"{prl - 1} are left, not {rl}")
                    moved = [p + 1 for p in held if int(dice[p]) != int(pdice[p])]
                    if moved:
                        raise UnreachablePositionError(f"held dice at positions {moved} changed")
                elif rl != 2:
                    raise UnreachablePositionError(f"a turn starts with 2 rolls left, not {rl}")
                action = parse_move(d.get("move"), rl)
                ranked = advise(table, state, dice, rl, total)
            except YamblabError as exc:
                raise type(exc)(f"{where}: {exc}") from None
            values = {}
            for a in ranked:
                values[a.box if a.kind == "box" else ("keep", a.keep)] = a
            best = ranked[0]
            if action < 13:
                if action not in values:
                    legal = ", ".join(BOX_LABELS[a.box] for a in ranked if a.kind == "box")
                    raise IllegalActionError(f"{where}: cannot score {BOX_LABELS[action]}; legal: {legal}")
                chosen = values[action]
                kind = "box"
            else:
                from yamblab.games.dice import hold_to_keep

                chosen = values[("keep", hold_to_keep(dice, action - 13))]
                kind = DECISIONS[0] if rl == 2 else DECISIONS[1]
            loss = best.expected_final - chosen.expected_final
            by[kind] += loss
            graded.append({"label": _label(action, dice), "decision": kind, "loss": loss,
                           "best": best.label})
            if action < 13:
                from yamblab.games.dice import histogram

                pts, state = score_box(state, histogram(dice), action, rules_obj)
                total += pts
                prev = None
            else:
                prev = (dice, rl, [i for i in range(5) if ((action - 13) >> i) & 1])
        out = {"rules": rules_obj.name, "decisions": graded, "loss_total": float(sum(by.values())),
               "loss_by_decision": by, "score": total}
        out["final"] = bool(state.is_terminal)
        return out

    # ------------------------------------------------------------------ target score
    def target_advice(self, rules, card, dice, rolls_left: int, target: int,
                      yahtzee_bonuses: int | None = None, top: int | None = None) -> dict:
        """Every legal action ranked by P(final score ≥ target) under target-maximising play.

        Raises:
            YamblabError: no target table on this server, another variant, a target beyond
                the table, or a bad position.
        """
        if self.target is None:
            raise UnknownVariantError("this server has no target-score table (start it with --target)")
        table = self.table(rules)
        if table.rules != self.target.rules:
            raise UnknownVariantError(f"the target-score table is built for rules {self.target.rules.name}, "
                                      f"not {table.rules.name}")
        state, so_far, _, _ = card_position(card, table.rules, yahtzee_bonuses)
        ranked = self.target.advise(state, validate_dice(dice), int(rolls_left), int(target) - so_far)
        ev = {(a.kind, a.box if a.kind == "box" else a.keep): a
              for a in advise(table, state, validate_dice(dice), int(rolls_left), so_far)}
        out = []
        for a in ranked:
            e = ev[(a.kind, a.box if a.kind == "box" else a.keep)]
            out.append({"kind": a.kind, "label": a.label,
                        "move": _move_of(a.box if a.kind == "box" else 13 + a.hold_mask),
                        "probability": a.probability, "probability_loss": a.loss,
                        "expected_final": e.expected_final, "expected_loss": e.loss})
        if top:
            out = out[:int(top)]
        return {"rules": table.rules.name, "target": int(target), "score_so_far": so_far, "actions": out}

    # ------------------------------------------------------------------ Yamb
    def yamb_oracle(self, preset: str, column: str):
        """The exact oracle of a served Yamb single-column game.

        Raises:
            UnknownVariantError: a preset or column not served here.
        """
        key = (str(preset).strip().lower(), str(column).strip().lower())
        if key not in self.yamb:
            served = ", ".join(f"{p}/{c}" for p, c in self.yamb) or "none"
            raise UnknownVariantError(f"no exact oracle for Yamb {key[0]}/{key[1]} here; served: {served}"
                                      + ("" if key[1] != "free" else " (start the server with --yamb-free)"))
        return self.yamb[key]

    def yamb_advice(self, preset: str, column: str, scores, dice, roll: int) -> dict:
        """Every action of a served Yamb single-column position ranked exactly
        (:func:`~yamblab.service.yamb.column_advice`)."""
        return column_advice(self.yamb_oracle(preset, column), preset, column, scores, dice, roll)

    def yamb_replay(self, preset: str, column: str, seed: int, moves: list, game: int = 0,
                    advice: bool = False) -> dict:
        """A served Yamb single-column game replayed and graded
        (:func:`~yamblab.service.yamb.column_replay`)."""
        return column_replay(self.yamb_oracle(preset, column), preset, column, seed, moves, game, advice)


def _make_agent(name: str, table: OracleTable, checkpoint: str | None):
    """Build a served agent: the one place that calls the agent registry."""
    from yamblab.agents.base import make_agent

    if name == "checkpoint":
        return make_agent("search", table.rules, table=table, valuation=checkpoint, depth="full_turn")
    return make_agent(name, table.rules, table=table, seed=0)


def _search_values(agent, batch) -> list[dict] | None:
    """Every legal action's value by the agent's own search (None for agents that do not search)."""
    search = getattr(agent, "search", None)
    values_fn = getattr(search, "action_values", None)
    if values_fn is None:
        return None
    box, hold, keeps = values_fn(batch)
    out, seen = [], set()
    for b in range(13):
        if np.isfinite(box[0, b]):
            out.append({"label": _label(b, batch.dice[0]), "move": _move_of(b), "value": float(box[0, b])})
    for h in range(32):
        k = int(keeps[0, h])
        if np.isfinite(hold[0, h]) and k not in seen:
            seen.add(k)
            out.append({"label": _label(13 + h, batch.dice[0]), "move": _move_of(13 + h), "value": float(hold[0, h])})
    out.sort(key=lambda a: -a["value"])
    return out
