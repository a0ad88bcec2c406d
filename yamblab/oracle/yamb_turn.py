"""The per-turn pass of Yamb against a box valuation (seed 001's within-turn recurrences).

A :class:`TurnPlanner` solves each game's current turn exactly — every reroll, every box, and
whether to announce after the first roll — against a **box valuation**: a number of points for
scoring ``s`` in box (column, row) now (the points the box adds, plus whatever the valuation
says the card it leaves is worth). The recurrences run over dice histograms
(:func:`yamblab.games.dice6.dice_tables`): the value of a keep is the average, over the outcomes
of the rerolled dice, of the best choice with the roll that follows; the last turn of a game
may have more rolls (``rules.last_turn_rolls``).

The greedy and heuristic bots (:mod:`yamblab.agents.yamb_bots`) and the full-turn search of a
network (:mod:`yamblab.search.expectimax`) are turn planners with different valuations.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from yamblab.games.dice6 import dice_tables
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, YambRules, legal_boxes, score_table

NEG = -1e9

__all__ = ["TurnPlanner", "row_par", "NEG"]


@lru_cache(maxsize=16)
def row_par(rules: YambRules) -> np.ndarray:
    """Par of every row: expected points of one turn devoted to that row alone, float64 (R,).

    For Max this is the expected best sum, for Min the expected *lowest* sum (the turn is
    played to minimise it); for Ones … Sixes and the combinations the expected points.
    Computed exactly with the within-turn recurrences (seed 001), ``rules.rolls`` rolls.
    """
    tab = score_table(rules).astype(np.float64)
    out = np.zeros(rules.n_rows)
    for row in range(rules.n_rows):
        sign = -1.0 if row == MIN_ROW else 1.0
        best = sign * tab[:, row, :rules.rolls].T[None]        # (1, L, n_rolls)
        out[row] = sign * _turn_dp(rules, best)[1][0]
    return out


def _turn_dp(rules: YambRules, best: np.ndarray):
    """Within-turn DP. best: (B, L, n_rolls) value of stopping at roll j with each roll.

    Returns (K, v0): K (B, L-1, n_keeps) values of each keep after roll j; v0 (B,) value
    before the first roll.
    """
    t = dice_tables(rules.n_dice)
    B, L, _ = best.shape
    PT = t.p_roll_given_keep.T
    K = np.empty((B, max(L - 1, 0), t.n_keeps))
    v = best[:, L - 1]
    for j in range(L - 2, -1, -1):
        kj = v @ PT
        K[:, j] = kj
        v = np.maximum(best[:, j], kj[:, t.sub_keeps].max(axis=2))
    return K, v @ t.p_roll_given_keep[0]


class TurnPlanner:
    """Base of the greedy and heuristic agents (see the module docstring).

    Subclasses define :meth:`box_values`.
    """

    name = "planner"

    def __init__(self, rules: YambRules, seed: int = 0):
        self.rules = rules
        self.tables = dice_tables(rules.n_dice)
        self.S = score_table(rules).astype(np.int64)               # (n_rolls, R, Lmax)
        self.smax = int(self.S.max())
        self._K = None
        self._key = None

    # ------------------------------------------------------------------ valuation
    def box_values(self, batch, games: np.ndarray) -> np.ndarray:
        """Points-equivalent of scoring ``s`` in each box: float64 (len(games), C, R, smax + 1)."""
        raise NotImplementedError

    def _immediate_gain(self, batch, games) -> np.ndarray:
        """Exact change of the card total for scoring ``s`` in each box (points)."""
        r = self.rules
        card = batch.card[games].astype(np.int64)                  # (B, C, R)
        B, C, R = card.shape
        s = np.arange(self.smax + 1, dtype=np.int64)
        filled = card >= 0
        sc = np.where(filled, card, 0)
        up = sc[:, :, :6].sum(2)                                    # (B, C)
        had = up >= r.upper_bonus_threshold
        g = np.zeros((B, C, R, self.smax + 1))
        for row in range(6):
            new = (up[:, :, None] + s) >= r.upper_bonus_threshold
            g[:, :, row] = s + r.upper_bonus * (new & ~had[:, :, None])
        g[:, :, 8:] = s
        o, mx, mn = sc[:, :, ONES_ROW, None], sc[:, :, MAX_ROW, None], sc[:, :, MIN_ROW, None]
        fo, fx, fn = filled[:, :, ONES_ROW, None], filled[:, :, MAX_ROW, None], filled[:, :, MIN_ROW, None]

        def term(a, b, c):
            m = a * (b - c)
            return np.maximum(m, 0) if r.middle_clamp else m

        g[:, :, ONES_ROW] += np.where(fx & fn, term(s, mx, mn), 0)
        g[:, :, MAX_ROW] = np.where(fo & fn, term(o, s, mn), 0)
        g[:, :, MIN_ROW] = np.where(fo & fx, term(o, mx, s), 0)
        return g

    # ------------------------------------------------------------------ planning
    def _legal_by_roll(self, batch, games, L):
        """bool (B, C, R, L): boxes the order allows at roll j without an announcement."""
        r = self.rules
        out = np.zeros((len(games), r.n_columns, r.n_rows, L), dtype=bool)
        for bi, g in enumerate(games):
            card = batch.card[g].tolist()
            first = legal_boxes(r, card, 1, None)
            later = legal_boxes(r, card, 2, None) if L > 1 else []
            for c, row in first:
                out[bi, c, row, 0] = True
            for c, row in later:
                out[bi, c, row, 1:] = True
        return out

    def _plan(self, batch, games: np.ndarray, W: np.ndarray) -> None:
        """Compute the keep values K for unannounced or announced play of ``games``."""
        r = self.rules
        L = int(batch.rolls_max[games].max())
        S = self.S[:, :, :L]                                         # (n_rolls, R, L)
        rows = np.arange(r.n_rows)[:, None, None]
        Wr = W[:, :, rows, S.transpose(1, 2, 0)]                    # (B, C, R, L, n_rolls)
        ann = batch.announced[games]
        legal = self._legal_by_roll(batch, games, L)
        ac = r.announce_column
        for bi in np.flatnonzero(ann >= 0):
            legal[bi] = False
            legal[bi, ac, ann[bi], :] = True
        Wr = np.where(legal[..., None], Wr, NEG)
        best = Wr.max(axis=(1, 2))                                   # (B, L, n_rolls)
        # games whose turn is shorter than L: later rolls are never reached
        K, _ = _turn_dp(r, best)
        self._K[games, :K.shape[1]] = K
        self._key[games] = self._plan_key(batch, games)

    def _plan_key(self, batch, games):
        return batch.turn[games].astype(np.int64) * 64 + batch.announced[games].astype(np.int64) + 1

    def _announce_values(self, batch, games, W, hold_keeps, ridx):
        """Value of announcing each row now (roll 1): float (B, R), NEG where not possible."""
        r = self.rules
        ac = r.announce_column
        L = r.rolls
        S = self.S[:, :, :L]
        out = np.full((len(games), r.n_rows), NEG)
        Ks = {}
        for row in range(r.n_rows):
            openg = batch.card[games, ac, row] < 0
            if not openg.any():
                continue
            idx = np.flatnonzero(openg)
            # Many games value this box alike (e.g. a combination row): solve each value once.
            uniq, inv = np.unique(W[idx, ac, row], axis=0, return_inverse=True)
            K = _turn_dp(r, uniq[:, S[:, row, :].T])[0][inv.reshape(-1)]   # (b, L-1, n_keeps)
            now = W[idx, ac, row, S[ridx[idx], row, 0]]
            val = now
            if L > 1:
                hv = np.take_along_axis(K[:, 0], hold_keeps[idx], axis=1).max(axis=1)
                val = np.maximum(now, hv)
            out[idx, row] = val
            Ks[row] = (idx, K)
        return out, Ks

    # ------------------------------------------------------------------ acting
    def act(self, batch) -> np.ndarray:
        r = self.rules
        n = batch.n
        if self._K is None or self._K.shape[0] != n:
            self._K = np.zeros((n, r.max_rolls - 1 if r.max_rolls > 1 else 1, self.tables.n_keeps))
            self._key = np.full(n, -1, dtype=np.int64)
        acts = np.full(n, -1, dtype=np.int64)
        live = np.flatnonzero(~batch.done)
        if live.size == 0:
            return acts
        legal = batch.legal_actions()
        hold_keeps = batch.hold_keeps()
        ridx = batch.roll_indices()
        for start in range(0, live.size, 128):
            games = live[start:start + 128]
            W = self.box_values(batch, games)
            stale = self._key[games] != self._plan_key(batch, games)
            if stale.any():
                self._plan(batch, games[stale], W[stale])
            self._decide(batch, games, W, legal[games], hold_keeps[games], ridx[games], acts)
        return acts

    def _decide(self, batch, games, W, legal, hold_keeps, ridx, acts):
        r = self.rules
        P, H = batch.n_placements, batch.n_holds
        ru = batch.rolls_used[games].astype(np.int64)
        R = r.n_rows
        # score now
        srow = self.S[ridx][:, :, :]                                   # (B, R, Lmax)
        s_now = np.take_along_axis(srow, (ru - 1)[:, None, None].repeat(R, 1), axis=2)[:, :, 0]
        place_val = W[np.arange(len(games))[:, None, None], np.arange(r.n_columns)[None, :, None],
                      np.arange(R)[None, None, :], s_now[:, None, :]]  # (B, C, R)
        place_val = np.where(legal[:, :P].reshape(len(games), r.n_columns, R), place_val, NEG)
        pflat = place_val.reshape(len(games), -1)
        best_p = pflat.argmax(1)
        val_p = pflat[np.arange(len(games)), best_p]
        # hold
        jj = np.clip(ru - 1, 0, self._K.shape[1] - 1)
        Kg = self._K[games, jj]                                        # (B, n_keeps)
        hv = np.take_along_axis(Kg, hold_keeps, axis=1)
        hv = np.where(legal[:, P:P + H], hv, NEG)
        best_h = hv.argmax(1)
        val_h = hv[np.arange(len(games)), best_h]
        choice = np.where(val_p >= val_h - 1e-9, best_p, P + best_h)
        best_val = np.maximum(val_p, val_h)
        # announce
        can_ann = legal[:, P + H:].any(1)
        if can_ann.any():
            ia = np.flatnonzero(can_ann)
            av, Ks = self._announce_values(batch, games[ia], W[ia], hold_keeps[ia], ridx[ia])
            av = np.where(legal[ia, P + H:], av, NEG)
            ba = av.argmax(1)
            va = av[np.arange(len(ia)), ba]
            take = va > best_val[ia] + 1e-9
            for k in np.flatnonzero(take):
                g = games[ia[k]]
                choice[ia[k]] = P + H + ba[k]
                idx, K = Ks[int(ba[k])]
                pos = int(np.flatnonzero(idx == k)[0])
                self._K[g, :K.shape[1]] = K[pos]
                self._key[g] = int(batch.turn[g]) * 64 + int(ba[k]) + 1
        acts[games] = choice
