"""Exact solver for one **free** Yamb column (rows filled in any order).

The single-column game of a free column (:mod:`yamblab.oracle.yamb.column` for the fixed-order
columns) has the boundary state (set of filled rows, upper sum capped at the bonus threshold
while upper rows remain, what the middle term Ones × (Max − Min) still needs). The solver
groups states by the mask of filled rows and runs the within-turn pass of "How The AI Works" once per
(mask, chunk of lanes) on contiguous lane vectors (the Cython kernel
:mod:`yamblab.oracle.yamb._free`; its docstring gives the lane layout). Row scoring comes from
:func:`yamblab.games.yamb.score_table` (the reference :func:`~yamblab.games.yamb.row_score`);
the kernel sees only per-row score indices, so it knows no rule.

The lanes are a product layout, a superset of the reachable states (counted exactly by
:func:`~yamblab.oracle.yamb.column.free_column_state_count`); work is about 10^4 simple
operations per lane, not a dense P(roll | keep) product per state. Each preset's state count,
table size, value and solve time: docs/yamb.md (``benchmarks/yamb_free_column.py``).

Sources: the "How The AI Works" page (backward induction, within-turn recurrences), the
YoloYamb post (the game), the lane technique of :mod:`yamblab.oracle.yahtzee._kernels`.
"""

from __future__ import annotations

import os
import time

import numpy as np

from yamblab.errors import ConfigError, UnreachablePositionError
from yamblab.games.dice6 import DiceTables, dice_tables
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, YambRules, get_preset
from yamblab.games.yamb.scoring import score_table
from yamblab.oracle.yamb.column import ActionAdvice

__all__ = ["FreeColumnOracle", "free_column_layout"]

DEFAULT_CHUNK = 64


def _keep_tables(t: DiceTables) -> tuple[np.ndarray, np.ndarray, int]:
    """(keep_add (koff, 6), keep_sub (n_keeps, 6), koff) as int32 for ``t``'s keep order."""
    index = {tuple(int(c) for c in k): i for i, k in enumerate(t.keeps)}
    koff = int(t.keep_offset[t.n_dice])
    add = np.zeros((koff, 6), dtype=np.int32)
    sub = np.full((t.n_keeps, 6), -1, dtype=np.int32)
    for i, k in enumerate(t.keeps):
        k = [int(c) for c in k]
        for f in range(6):
            if i < koff:
                k2 = list(k)
                k2[f] += 1
                add[i, f] = index[tuple(k2)]
            if k[f] > 0:
                k2 = list(k)
                k2[f] -= 1
                sub[i, f] = index[tuple(k2)]
    return add, sub, koff


class _Layout:
    """Lane layout of the free column of ``rules`` (see :mod:`yamblab.oracle.yamb._free`)."""

    def __init__(self, rules: YambRules):
        tab = score_table(rules)
        R = rules.n_rows
        self.R = R
        self.xval = [np.unique(tab[:, c, :]).astype(np.int64) for c in range(R)]
        self.track = rules.upper_bonus > 0 and rules.upper_bonus_threshold > 0
        self.T = int(rules.upper_bonus_threshold)
        X, N = self.xval[MAX_ROW], self.xval[MIN_ROW]
        dlo, dhi = int(X.min() - N.max()), int(X.max() - N.min())
        if rules.middle_clamp:
            dlo, dhi = max(dlo, 0), max(dhi, 0)
        self.dlo, self.nD = dlo, dhi - dlo + 1
        self.clamp = bool(rules.middle_clamp)
        nO, nX, nN = len(self.xval[ONES_ROW]), len(X), len(N)
        self.nO, self.nX, self.nN = nO, nX, nN
        msize = {0: 1, 1: nO, 2: nX, 4: nN, 3: nO * nX, 5: nO * nN, 6: self.nD, 7: 1}
        masks = np.arange(1 << R)
        umax = np.zeros(1 << R, dtype=np.int64)
        for c in range(6):
            umax += ((masks >> c) & 1) * int(self.xval[c].max())
        if self.track:
            U = np.minimum(umax, self.T) + 1
            U[(masks & 63) == 63] = 1
        else:
            U = np.ones(1 << R, dtype=np.int64)
        mm = (masks & 1) | (((masks >> MAX_ROW) & 1) << 1) | (((masks >> MIN_ROW) & 1) << 2)
        M = np.array([msize[int(x)] for x in range(8)])[mm]
        self.U = U.astype(np.int32)
        self.M = M.astype(np.int32)
        self.lanes = (U * M).astype(np.int64)

    def mid_index(self, mask: int, s: list) -> int:
        """Middle-key index of a column with box scores ``s`` (filled rows in ``mask``)."""
        o, x, n = (mask >> ONES_ROW) & 1, (mask >> MAX_ROW) & 1, (mask >> MIN_ROW) & 1
        oi = int(np.searchsorted(self.xval[ONES_ROW], s[ONES_ROW])) if o else 0
        xi = int(np.searchsorted(self.xval[MAX_ROW], s[MAX_ROW])) if x else 0
        ni = int(np.searchsorted(self.xval[MIN_ROW], s[MIN_ROW])) if n else 0
        mm = o | (x << 1) | (n << 2)
        if mm in (0, 7):
            return 0
        if mm == 1:
            return oi
        if mm == 2:
            return xi
        if mm == 4:
            return ni
        if mm == 3:
            return oi * self.nX + xi
        if mm == 5:
            return oi * self.nN + ni
        d = s[MAX_ROW] - s[MIN_ROW]
        if self.clamp:
            d = max(d, 0)
        return d - self.dlo


def free_column_layout(rules: YambRules | str) -> dict:
    """The free column's lane count and table size (no solving).

    Returns:
        dict: ``lanes`` (boundary states the solver stores: a product layout, a superset of
        the reachable states), ``masks`` (2**rows), ``max_lanes_per_mask``, ``bytes_float64``.
    """
    if isinstance(rules, str):
        rules = get_preset(rules)
    lay = _Layout(rules)
    n = int(lay.lanes.sum())
    return {"lanes": n, "masks": 1 << rules.n_rows, "max_lanes_per_mask": int(lay.lanes.max()),
            "bytes_float64": 8 * n}


class FreeColumnOracle(ActionAdvice):
    """Exact values and advice for the single-column game of a free column.

    Args:
        rules: a rule set (or a preset name); only its rows, dice, rolls, scoring and bonuses
            matter (the game is one free column).
        start: the column's box scores to solve from (row order, open = negative or
            ``None``); only positions whose filled rows include ``start``'s are solved (a
            reduced problem). ``None``: the empty column (the whole game).
        n_threads: OpenMP threads (0: every core this process may use).
        chunk: lanes per work item (scratch is (keeps + scores) × chunk float64 per thread).
        progress: optional callable(layer number) after each layer of masks.

    Attributes:
        value: expected points of the single-column game from ``start`` under optimal play
            (float; points still to come, the card's current total not included).
        n_states: lanes solved (boundary states, product layout).
        solve_seconds: wall time of the backward induction (s).
        table_bytes: size of the value table (bytes).

    Raises:
        UnknownVariantError: an unknown preset.
        UnreachablePositionError: a ``start`` column no game can reach.
        ConfigError: ``chunk`` < 1 or ``n_threads`` < 0.
    """

    def __init__(self, rules: YambRules | str, start=None, n_threads: int = 0,
                 chunk: int = DEFAULT_CHUNK, progress=None):
        from yamblab.oracle.yamb import _free

        if isinstance(rules, str):
            rules = get_preset(rules)
        if int(chunk) < 1:
            raise ConfigError(f"chunk={chunk} must be at least 1 lane")
        if int(n_threads) < 0:
            raise ConfigError(f"n_threads={n_threads} must be ≥ 0 (0: every core)")
        if int(n_threads) == 0:
            n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.full_rules = rules
        self.rules = rules.replace(columns=("free",), announce_compulsory="rest_full",
                                   name=f"{rules.name}:free")
        R = rules.n_rows
        self.tables: DiceTables = dice_tables(rules.n_dice)
        self._scores = score_table(rules)            # int16 (n_rolls, R, max_rolls)
        self._lay = lay = _Layout(rules)
        start_scores = [-1] * R if start is None else self._clean(start)
        self.start_mask = base = sum(1 << c for c in range(R) if start_scores[c] >= 0)
        for c in range(R):
            if start_scores[c] >= 0:
                self._check_score(c, start_scores[c])

        # Masks to solve: supersets of base, most rows filled first.
        free_bits = [c for c in range(R) if not (base >> c) & 1]
        sup = np.full(1, base, dtype=np.int64)
        for c in free_bits:
            sup = np.concatenate([sup, sup | (1 << c)])
        pc = np.array([bin(int(m)).count("1") for m in sup])
        order = np.lexsort((sup, -pc))
        sup, pc = sup[order], pc[order]
        off = np.full(1 << R, -1, dtype=np.int64)
        lanes = lay.lanes[sup]
        off[sup] = np.concatenate([[0], np.cumsum(lanes)[:-1]])
        self._off = off
        self.n_states = int(lanes.sum())
        self.table_bytes = 8 * self.n_states
        V = np.zeros(self.n_states, dtype=np.float64)
        items, ends = [], []
        for k in range(R - 1, bin(base).count("1") - 1, -1):
            for m in sup[pc == k].tolist():
                n = int(lay.lanes[m])
                for l0 in range(0, n, int(chunk)):
                    items.append((m, l0, min(int(chunk), n - l0)))
            ends.append(len(items))
        items = np.array(items, dtype=np.int32).reshape(-1, 3)

        # Rule tables for the kernel.
        t = self.tables
        add, sub, _ = _keep_tables(t)
        XMAX = max(len(x) for x in lay.xval)
        xval = np.zeros((R, XMAX), dtype=np.int32)
        nx = np.array([len(x) for x in lay.xval], dtype=np.int32)
        for c in range(R):
            xval[c, :nx[c]] = lay.xval[c]
        gbase = np.concatenate([[0], np.cumsum(nx)[:-1]]).astype(np.int32)
        xi = np.empty((rules.max_rolls, t.n_rolls, R), dtype=np.int32)
        for c in range(R):
            xi[:, :, c] = np.searchsorted(lay.xval[c], self._scores[:, c, :]).T
        varies = np.array([int((self._scores[:, c, :] != self._scores[:, c, :1]).any())
                           for c in range(R)], dtype=np.int32)
        self._xval, self._gbase, self._xi = xval, gbase, xi
        self._kt = _free.Tables(
            R, add, sub, np.array(t.p_roll_given_keep[0], dtype=np.float64), xi, xval, nx, gbase, varies,
            int(rules.rolls), int(rules.last_turn_rolls), lay.T, int(rules.upper_bonus),
            int(lay.track), lay.nO, lay.nX, lay.nN, lay.dlo, int(lay.clamp), off, lay.U, lay.M)
        t0 = time.perf_counter()
        if len(items):
            _free.solve(self._kt, V, items, np.array(ends, dtype=np.int64), int(chunk),
                             int(n_threads), progress)
        self.solve_seconds = time.perf_counter() - t0
        self._V = V
        self.value = self.state_value(start_scores)

    # ------------------------------------------------------------------ positions
    def _clean(self, column_scores) -> list[int]:
        s = [-1 if x is None else int(x) for x in column_scores]
        if len(s) != self.rules.n_rows:
            raise UnreachablePositionError(f"a column has {self.rules.n_rows} rows, got {len(s)}")
        return [x if x >= 0 else -1 for x in s]

    def _check_score(self, row: int, x: int) -> None:
        if x not in self._lay.xval[row]:
            raise UnreachablePositionError(f"no roll scores {x} in row {self.rules.rows[row]}")

    def state_of(self, column_scores) -> tuple[int, int]:
        """(filled-row mask, lane) of a column given its box scores (open = negative/None).

        Raises:
            UnreachablePositionError: a wrong length, a score no roll can make in its row, or
                a position outside the solved part (filled rows not including ``start``'s).
        """
        s = self._clean(column_scores)
        mask = 0
        for c, x in enumerate(s):
            if x >= 0:
                self._check_score(c, x)
                mask |= 1 << c
        if mask & self.start_mask != self.start_mask:
            raise UnreachablePositionError(
                "this oracle was solved from a start position whose filled rows this column "
                "does not include")
        lay = self._lay
        u = 0
        if lay.track and lay.U[mask] > 1:
            u = min(sum(x for x in s[:6] if x >= 0), lay.T)
        return mask, lay.mid_index(mask, s) * int(lay.U[mask]) + u

    def state_value(self, column_scores) -> float:
        """Expected points still to come (optimal play) from a boundary position."""
        mask, lane = self.state_of(column_scores)
        if mask == (1 << self.rules.n_rows) - 1:
            return 0.0
        return float(self._V[self._off[mask] + lane])

    def action_values(self, column_scores, dice, roll: int) -> dict[str, float]:
        """Q of every action in a position of the single free-column game.

        Args:
            column_scores: the column's box scores (open = negative or ``None``).
            dice: the ``n_dice`` faces showing.
            roll: the roll number of the turn (1-based).

        Returns:
            dict: ``"score:<row name>"`` for every open row → points now (bonus and middle
            term included) + value after; ``"hold:<h>"`` for every hold mask ``h`` (bit i
            holds the i-th die of ``dice`` in the given order) when a roll is left →
            expected value of rerolling the rest. Values are expected points still to come.

        Raises:
            UnreachablePositionError, InvalidDiceError: a bad position, roll number or dice.
        """
        from yamblab.oracle.yamb import _free

        mask, lane = self.state_of(column_scores)
        R = self.rules.n_rows
        if mask == (1 << R) - 1:
            raise UnreachablePositionError("the column is full: no decision left")
        t = self.tables
        r = t.roll_index(dice)
        L = self.rules.last_turn_rolls if bin(mask).count("1") == R - 1 else self.rules.rolls
        if not 1 <= int(roll) <= L:
            raise UnreachablePositionError(f"roll {roll} is not 1..{L} on this turn")
        _, G, K = _free.lane_pass(self._kt, self._V, mask, lane)
        out = {}
        for c in range(R):
            if not (mask >> c) & 1:
                out[f"score:{self.rules.rows[c]}"] = float(
                    G[self._gbase[c] + self._xi[int(roll) - 1, r, c]])
        if int(roll) < L:
            for h in range(t.n_holds):
                held = [0] * 6
                for d in range(t.n_dice):
                    if (h >> d) & 1:
                        held[int(dice[d]) - 1] += 1
                out[f"hold:{h}"] = float(K[int(roll) - 1, t.keep_index(held)])
        return out


class FreeColumnOracleAgent:
    """Plays the single free-column game (``oracle.rules``) with the oracle's advice.

    ``act(batch)`` returns int64 (n,) engine actions (row index to score, or
    ``hold_offset + h``; -1 for finished games) for a :class:`~yamblab.games.yamb.engine.YambBatch`
    of ``oracle.rules``.
    """

    name = "oracle"

    def __init__(self, oracle: FreeColumnOracle):
        self.oracle = oracle

    def reset(self, batch=None) -> None:
        """Nothing to forget between batches."""

    def act(self, batch) -> np.ndarray:
        out = np.full(batch.n, -1, dtype=np.int64)
        rows = self.oracle.rules.rows
        for i in np.flatnonzero(~batch.done):
            best, _ = self.oracle.advice(batch.card[i, 0].tolist(), batch.dice[i].tolist(),
                                         int(batch.rolls_used[i]))
            kind, arg = best.split(":")
            out[i] = rows.index(arg) if kind == "score" else batch.hold_offset + int(arg)
        return out


__all__ += ["FreeColumnOracleAgent"]
