"""Exact solver for one fixed-order Yamb column (down or up), and the free-column state count.

A **single-column game** is the preset's game restricted to one column: ``R`` turns, the
column's fill order fixing which row each turn takes, the preset's rolls (and its extra rolls
on the last turn), scoring and bonuses. Because the order is fixed, the boundary state before
turn ``k`` is small: the upper sum so far (capped at the threshold, while upper rows remain)
and what the middle term Ones × (Max − Min) still needs (the Ones box, Max, Min, or Max − Min,
whichever are known). The solver runs the within-turn recurrences of "How The AI Works" on histograms
(rolls and keeps, :mod:`yamblab.games.dice6`) for every state of a layer at once:

    V_last(roll) = Q(score(roll))
    K_j(keep)    = Σ_roll P(roll | keep) · V_{j+1}(roll)
    V_j(roll)    = max(Q(score(roll, j)), max_{keep ⊆ roll} K_j(keep))

where ``Q(x)`` is the points the box adds now (bonus and middle term included) plus the value
of the next boundary state. Values are float64 expected points.

A **free column** has no fixed order: its boundary state adds the set of filled rows, so its
state space is far larger (about 12 M states for croatian: docs/yamb.md);
:func:`free_column_state_count` counts it exactly, and
:class:`yamblab.oracle.yamb.free.FreeColumnOracle` solves it by averaging keeps one die at a
time over lanes of states with the same filled rows.

Sources: the "How The AI Works" page (backward induction, within-turn recurrences), the
YoloYamb post (the game).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from yamblab.errors import IllegalActionError, UnknownVariantError, UnreachablePositionError
from yamblab.games.dice6 import DiceTables, dice_tables
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, YambRules, get_preset
from yamblab.games.yamb.scoring import score_table

DONE = ("done",)          # middle term settled (or known to be 0)
START = ("none",)         # nothing of Ones / Max / Min known yet


def _mid_update(rules: YambRules, key: tuple, row: int, x: int) -> tuple[tuple, int]:
    """New middle key and the middle-term points earned by scoring ``x`` in ``row``."""
    if row not in (ONES_ROW, MAX_ROW, MIN_ROW) or key == DONE:
        return key, 0
    o = mx = mn = d = None
    if key[0] == "d":
        d = key[1]
    elif key != START:
        o, mx, mn = key[1], key[2], key[3]
    if row == ONES_ROW:
        o = x
    elif row == MAX_ROW:
        mx = x
    else:
        mn = x
    if d is None and mx is not None and mn is not None:
        d = mx - mn
    if o is not None and d is not None:
        m = o * d
        return DONE, (max(0, m) if rules.middle_clamp else m)
    if o == 0 or (rules.middle_clamp and d is not None and d <= 0):
        return DONE, 0
    if d is not None:
        return ("d", d), 0
    return ("k", o, mx, mn), 0


@dataclass
class _Layer:
    row: int
    states: list
    index: dict
    n_rolls_turn: int
    x_values: np.ndarray            # distinct scores of this row (sorted)
    q: np.ndarray                   # (S, X) points now + value after, float64
    keep_values: np.ndarray         # (S, L-1, n_keeps) K_j, float64
    value: np.ndarray = field(default=None)  # (S,) value at the start of the turn


class ActionAdvice:
    """Advice and regret from ``action_values(column_scores, dice, roll) -> {action: value}``
    (shared by the fixed-order and free column oracles)."""

    def advice(self, column_scores, dice, roll: int) -> tuple[str, float]:
        """The best action (``"score"``/``"score:<row>"`` or ``"hold:<h>"``) and its value in points."""
        q = self.action_values(column_scores, dice, roll)
        best = max(q, key=q.get)
        return best, q[best]

    def regret(self, column_scores, dice, roll: int, action: str) -> float:
        """Expected points lost by ``action`` against the best action (≥ 0).

        Raises:
            IllegalActionError: an action that is not available here.
        """
        q = self.action_values(column_scores, dice, roll)
        if action not in q:
            raise IllegalActionError(f"action {action!r} is not available; choose from {', '.join(q)}")
        return max(q.values()) - q[action]


class ColumnOracle(ActionAdvice):
    """Exact values and advice for the single-column game of a fixed-order column.

    Args:
        rules: a rule set (or a preset name).
        column: ``"down"`` or ``"up"``.

    Attributes:
        order: the rows in the order they are filled.
        value: expected points of a new single-column game under optimal play (float).

    Raises:
        UnknownVariantError: an unknown preset or a column that is not ``down``/``up``.
    """

    def __init__(self, rules: YambRules | str, column: str = "down"):
        if isinstance(rules, str):
            rules = get_preset(rules)
        column = str(column).strip().lower()
        if column not in ("down", "up"):
            raise UnknownVariantError(
                f"column {column!r} has no fixed order; the exact column oracle solves 'down' "
                "or 'up' (yamblab.oracle.yamb.free.FreeColumnOracle solves a free column)")
        self.full_rules = rules
        self.column = column
        self.rules = rules.replace(columns=(column,), announce_compulsory="rest_full",
                                   name=f"{rules.name}:{column}")
        R = rules.n_rows
        self.order = list(range(R)) if column == "down" else list(range(R - 1, -1, -1))
        self.tables: DiceTables = dice_tables(rules.n_dice)
        self._scores = score_table(rules)
        self._solve()

    # ------------------------------------------------------------------ state handling
    def _start(self):
        return (0, START)

    def _next(self, state, row: int, x: int) -> tuple[tuple, int]:
        """(next state, points earned now) for scoring ``x`` in ``row`` from ``state``."""
        r = self.rules
        up, mid = state
        pts = 0
        if row < 6:
            new_up = up + x
            pts += x
            if up < r.upper_bonus_threshold <= new_up:
                pts += r.upper_bonus
            up = min(new_up, r.upper_bonus_threshold)
        elif row >= 8:
            pts += x
        mid, m = _mid_update(r, mid, row, x)
        pts += m
        k = self.order.index(row) + 1
        if all(rr >= 6 for rr in self.order[k:]) or k == len(self.order):
            up = 0      # no upper rows left: the bonus is settled
        return (up, mid), pts

    # ------------------------------------------------------------------ solve
    def _solve(self) -> None:
        r, t = self.rules, self.tables
        R = r.n_rows
        layers_states = [[self._start()]]
        for k in range(R):
            row = self.order[k]
            xs = np.unique(self._scores[:, row, :]).tolist()
            nxt = {}
            for s in layers_states[k]:
                for x in xs:
                    ns, _ = self._next(s, row, x)
                    nxt[ns] = None
            layers_states.append(list(nxt))
        P = t.p_roll_given_keep              # (n_keeps, n_rolls)
        self.layers: list[_Layer] = [None] * R
        v_next = np.zeros(1)
        idx_next = {s: i for i, s in enumerate(layers_states[R])}
        for k in range(R - 1, -1, -1):
            row = self.order[k]
            states = layers_states[k]
            xs = np.unique(self._scores[:, row, :])
            q = np.empty((len(states), len(xs)))
            for i, s in enumerate(states):
                for j, x in enumerate(xs.tolist()):
                    ns, pts = self._next(s, row, x)
                    q[i, j] = pts + v_next[idx_next[ns]]
            L = r.last_turn_rolls if k == R - 1 else r.rolls
            xi = np.searchsorted(xs, self._scores[:, row, :L])     # (n_rolls, L)
            v = q[:, xi[:, L - 1]]                                 # (S, n_rolls)
            kv = np.empty((len(states), max(L - 1, 0), t.n_keeps))
            for j in range(L - 2, -1, -1):
                kj = t.keep_average(v)                             # (S, n_keeps)
                kv[:, j] = kj
                v = np.maximum(q[:, xi[:, j]], t.best_sub_keep(kj))
            value = v @ P[0]
            self.layers[k] = _Layer(row=row, states=states, index={s: i for i, s in enumerate(states)},
                                    n_rolls_turn=L, x_values=xs, q=q, keep_values=kv, value=value)
            v_next, idx_next = value, self.layers[k].index
        self.value = float(self.layers[0].value[0])

    # ------------------------------------------------------------------ positions
    def state_of(self, column_scores) -> tuple[int, tuple]:
        """(layer k, boundary state) of a column given its box scores (open = negative).

        Raises:
            UnreachablePositionError: boxes filled out of the column's order, or scores no
                roll can make.
        """
        s = [int(x) for x in column_scores]
        if len(s) != self.rules.n_rows:
            raise UnreachablePositionError(f"a column has {self.rules.n_rows} rows, got {len(s)}")
        k = sum(1 for x in s if x >= 0)
        if any(s[row] < 0 for row in self.order[:k]) or any(s[row] >= 0 for row in self.order[k:]):
            raise UnreachablePositionError(
                f"column {s}: a {self.column} column fills rows in order {self.order}")
        state = self._start()
        for row in self.order[:k]:
            if s[row] not in self.layers[self.order.index(row)].x_values:
                raise UnreachablePositionError(f"no roll scores {s[row]} in row {self.rules.rows[row]}")
            state, _ = self._next(state, row, s[row])
        return k, state

    def state_value(self, column_scores) -> float:
        """Expected points still to come (optimal play) from a boundary position."""
        k, state = self.state_of(column_scores)
        if k == self.rules.n_rows:
            return 0.0
        return float(self.layers[k].value[self.layers[k].index[state]])

    def action_values(self, column_scores, dice, roll: int) -> dict[str, float]:
        """Q of every action in a position of the single-column game.

        Args:
            column_scores: the column's box scores (open = negative).
            dice: the ``n_dice`` faces showing.
            roll: the roll number of the turn (1-based).

        Returns:
            dict with ``"score"`` → points now + value after, and ``"hold:<h>"`` for every
            hold mask ``h`` when a roll is left → expected value of rerolling the rest
            (expected points from this position to the end of the game; add the points
            already on the card for a total).

        Raises:
            UnreachablePositionError, InvalidDiceError: bad position or dice.
        """
        k, state = self.state_of(column_scores)
        if k == self.rules.n_rows:
            raise UnreachablePositionError("the column is full: no decision left")
        layer = self.layers[k]
        i = layer.index[state]
        t = self.tables
        roll_idx = t.roll_index(dice)
        L = layer.n_rolls_turn
        if not 1 <= int(roll) <= L:
            raise UnreachablePositionError(f"roll {roll} is not 1..{L} on this turn")
        x = int(self._scores[roll_idx, layer.row, int(roll) - 1])
        out = {"score": float(layer.q[i, np.searchsorted(layer.x_values, x)])}
        if int(roll) < L:
            for h in range(t.n_holds):
                held = [0] * 6
                for d in range(t.n_dice):
                    if (h >> d) & 1:
                        held[int(dice[d]) - 1] += 1
                kidx = t.keep_index(held)
                out[f"hold:{h}"] = float(layer.keep_values[i, int(roll) - 1, kidx])
        return out

    @property
    def n_states(self) -> int:
        """Boundary states over all layers."""
        return sum(len(layer.states) for layer in self.layers)


def free_column_state_count(rules: YambRules | str) -> dict:
    """Count the boundary states of a single free column exactly (no solving).

    A state is (set of filled rows, upper sum capped at the threshold while upper rows remain,
    what the middle term still needs). The combination rows carry nothing but their filled bit,
    so the count is (reachable states of the 8 upper/Max/Min rows) × 2**(number of
    combination rows).

    Returns:
        dict: ``states`` (int), ``core_states`` (the 8-row part), ``lower_masks``,
        ``bytes_float64`` (one value per state), ``turn_work`` (states × open rows × rolls,
        a measure of the solve's work).
    """
    if isinstance(rules, str):
        rules = get_preset(rules)
    tab = score_table(rules)
    xs = {row: np.unique(tab[:, row, :]).tolist() for row in range(8)}
    T = rules.upper_bonus_threshold
    n_rolls = dice_tables(rules.n_dice).n_rolls
    n_lower = rules.n_rows - 8

    @lru_cache(maxsize=None)
    def up_sums(mask5: int) -> frozenset:
        """Capped sums of the filled rows among Twos … Sixes (bit i = row i + 1)."""
        sums = {0}
        for i in range(5):
            if (mask5 >> i) & 1:
                sums = {min(a + x, T) for a in sums for x in xs[i + 1]}
        return frozenset(sums)

    core = 0
    per_mask = {}
    for mask in range(256):
        has_ones, has_max, has_min = mask & 1, (mask >> MAX_ROW) & 1, (mask >> MIN_ROW) & 1
        mask5 = (mask >> 1) & 31
        all_upper = (mask & 63) == 63
        pairs = set()
        for o in (xs[ONES_ROW] if has_ones else [None]):
            mids = {START}
            if o is not None:
                mids = {_mid_update(rules, START, ONES_ROW, o)[0]}
            if has_max:
                mids = {_mid_update(rules, k, MAX_ROW, x)[0] for k in mids for x in xs[MAX_ROW]}
            if has_min:
                mids = {_mid_update(rules, k, MIN_ROW, x)[0] for k in mids for x in xs[MIN_ROW]}
            ups = {0} if all_upper else {min(u + (o or 0), T) for u in up_sums(mask5)}
            pairs.update((u, k) for u in ups for k in mids)
        per_mask[mask] = len(pairs)
        core += len(pairs)
    work = 0
    for mask, cnt in per_mask.items():
        filled_core = bin(mask).count("1")
        for lm in range(1 << n_lower):
            work += cnt * (rules.n_rows - filled_core - bin(lm).count("1")) * n_rolls
    states = core * (1 << n_lower)
    total_core = core
    return {"states": int(states), "core_states": int(total_core), "lower_masks": 1 << n_lower,
            "bytes_float64": int(states) * 8, "turn_work": int(work)}


__all__ = ["ColumnOracle", "free_column_state_count"]


class ColumnOracleAgent:
    """Plays a single-column game (``oracle.rules``) with the oracle's advice: optimal play.

    ``act(batch)`` returns int64 (n,) engine actions for a batch of ``oracle.rules``.
    """

    name = "oracle"

    def __init__(self, oracle: ColumnOracle):
        self.oracle = oracle

    def reset(self, batch=None) -> None:
        """Nothing to forget between batches."""

    def act(self, batch) -> np.ndarray:
        out = np.full(batch.n, -1, dtype=np.int64)
        for i in np.flatnonzero(~batch.done):
            best, _ = self.oracle.advice(batch.card[i, 0].tolist(), batch.dice[i].tolist(),
                                         int(batch.rolls_used[i]))
            row = self.oracle.order[int(batch.turn[i])]
            out[i] = row if best == "score" else batch.hold_offset + int(best.split(":")[1])
        return out


def decision_regrets(oracle: ColumnOracle, batch, actions) -> np.ndarray:
    """Regret (expected points lost, ≥ 0) of each game's action in a single-column batch.

    Args:
        oracle: the column's oracle; ``batch`` must play ``oracle.rules``.
        actions: int64 (n,) engine actions about to be applied (-1 = none).

    Returns:
        float64 (n,), 0 for games without an action.

    Raises:
        IllegalActionError: an action that is neither the column's next box nor a hold.
    """
    out = np.zeros(batch.n)
    for i in np.flatnonzero(np.asarray(actions) >= 0):
        a = int(actions[i])
        if batch.done[i]:
            continue
        if a < batch.n_placements:
            name = "score"
        elif a < batch.announce_offset:
            name = f"hold:{a - batch.hold_offset}"
        else:
            raise IllegalActionError(f"game {i}: a single {oracle.column} column has no announcements")
        out[i] = oracle.regret(batch.card[i, 0].tolist(), batch.dice[i].tolist(),
                               int(batch.rolls_used[i]), name)
    return out


__all__ += ["ColumnOracleAgent", "decision_regrets"]
