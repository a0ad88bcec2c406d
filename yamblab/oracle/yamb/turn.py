"""The per-turn pass of Yamb against a box valuation (the within-turn recurrences
of "How The AI Works").

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

from yamblab.games.dice6 import dice_tables, keep_down, keep_up
from yamblab.games.yamb.engine import placement_masks
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, YambRules
from yamblab.games.yamb.scoring import score_table

NEG = -1e9

__all__ = ["TurnPlanner", "row_par", "NEG"]


@lru_cache(maxsize=16)
def row_par(rules: YambRules) -> np.ndarray:
    """Par of every row: expected points of one turn devoted to that row alone, float64 (R,).

    For Max this is the expected best sum, for Min the expected *lowest* sum (the turn is
    played to minimise it); for Ones … Sixes and the combinations the expected points.
    Computed exactly with the within-turn recurrences ("How The AI Works"), ``rules.rolls`` rolls.
    """
    tab = score_table(rules).astype(np.float64)
    out = np.zeros(rules.n_rows)
    for row in range(rules.n_rows):
        sign = -1.0 if row == MIN_ROW else 1.0
        best = sign * tab[:, row, :rules.rolls].T[None]        # (1, L, n_rolls)
        out[row] = sign * _turn_dp(rules, best)[1][0]
    return out


def _turn_dp(rules: YambRules, best: np.ndarray, best_pure: np.ndarray | None = None):
    """Within-turn DP over dice histograms (the recurrences of "How The AI Works").

    Args:
        best: float (B, L, n_rolls): the value of stopping at roll ``j`` (0-based) with each
            roll (order of :func:`~yamblab.games.dice6.dice_tables`), the best box then;
            row 0 is the first roll.
        best_pure: float (B, L, n_rolls) or ``None``: the same for a **pure** roll, one made by
            rerolling every die (the empty keep) — under ``announce_free_on_pure_roll`` it may
            also be scored in the announce column (JambNeuralNetwork's ``jamb_jax.py``,
            ``pure_hand``). The first roll is always pure: ``v0`` uses ``best_pure[:, 0]``.
            ``None``: pure rolls are worth what other rolls are (``best``).

    Returns:
        (K, v0): K float (B, L-1, n_keeps), the value of each keep after roll ``j`` (the empty
        keep, index 0, leads to a pure roll); v0 float (B,), the value before the first roll.
    """
    from yamblab.oracle.yamb._turn import turn_dp

    best = np.ascontiguousarray(best, dtype=np.float64)
    if best_pure is not None:
        if best_pure.shape != best.shape:
            raise ValueError(f"best_pure {best_pure.shape} must have the shape of best {best.shape}")
        best_pure = None if best_pure is best else np.ascontiguousarray(best_pure, dtype=np.float64)
    return turn_dp(best, best_pure, keep_up(rules.n_dice), keep_down(rules.n_dice),
                   _p_empty(rules.n_dice))


@lru_cache(maxsize=2)
def _p_empty(n_dice: int) -> np.ndarray:
    """float64 (n_rolls,): P(roll) of a throw of every die."""
    return np.ascontiguousarray(dice_tables(n_dice).p_roll_given_keep[0])


def _best_box(W: np.ndarray, S: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """The best box value of every roll at every roll number, over the legal boxes only.

    Args:
        W: float (B, C, R, smax + 1) box values; S: int (n_rolls, R, L) the score of each roll
            in each row at roll j; legal: bool (B, C, R, L) the boxes allowed at roll j.

    Returns:
        float64 (B, L, n_rolls): ``max`` over legal (c, r) of ``W[b, c, r, S[roll, r, j]]``,
        :data:`NEG` where no box is legal (equal to masking all C·R boxes; compiled loops visit
        only the legal ones).

    Raises:
        ValueError: a score outside the box values' last axis, or mismatched shapes.
    """
    from yamblab.oracle.yamb._turn import best_box

    ST = np.ascontiguousarray(np.asarray(S, np.int64).transpose(1, 2, 0))          # (R, L, n_rolls)
    if ST.size and (ST.min() < 0 or ST.max() >= W.shape[-1]):
        raise ValueError(f"scores must lie within 0..{W.shape[-1] - 1} (the box values' last axis)")
    return best_box(np.ascontiguousarray(W, dtype=np.float64), ST,
                    np.ascontiguousarray(legal, dtype=np.bool_).view(np.uint8), NEG)


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a float (b, m) array and each row's index among them: ``(uniq
    (u, m), inv int64 (b,))`` with ``uniq[inv] == a`` exactly.

    Rows are grouped by a random projection (a 1-D sort instead of ``np.unique(axis=0)``'s
    row sort) and the grouping is then checked; if two different rows ever shared a
    projection, every row is kept as its own.
    """
    a = np.asarray(a, np.float64)
    if a.shape[0] < 2:
        return a, np.arange(a.shape[0])
    proj = a @ np.random.default_rng(0x0A11).standard_normal(a.shape[1])
    _, first, inv = np.unique(proj, return_index=True, return_inverse=True)
    uniq = a[first]
    if not np.array_equal(uniq[inv], a):
        return a, np.arange(a.shape[0])
    return uniq, inv.reshape(-1)


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

    def reset(self, batch=None) -> None:
        """Forget the plans of the previous batch (called before a new batch)."""
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
    def _legal_by_roll(self, batch, games, L, pure: bool = False):
        """bool (B, C, R, L): boxes the rules allow at roll j (0-based) without an announcement.

        Roll 0 is the first roll (pure). ``pure``: the later rolls are pure ones (every die
        rerolled), which may also take the announce column under
        ``rules.announce_free_on_pure_roll`` (:func:`~yamblab.games.yamb.scoring.legal_boxes`).
        """
        r = self.rules
        card = batch.card[games]
        out = np.zeros((len(games), r.n_columns, r.n_rows, L), dtype=bool)
        out[..., 0] = placement_masks(r, card, first=True, pure=True)
        if L > 1:
            out[..., 1:] = placement_masks(r, card, first=False, pure=pure)[..., None]
        return out

    def _plan(self, batch, games: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Compute the keep values K for unannounced or announced play of ``games``.

        Returns float64 (len(games),): each game's value before the turn's first roll under
        this plan (without the option of announcing after the first roll).

        Games are planned in groups of equal turn length (``batch.rolls_max``: the last turn
        may have more rolls), each with its own horizon. Under
        ``rules.announce_free_on_pure_roll`` an unannounced roll made by rerolling every die
        may also be scored in the announce column: the DP carries it (``best_pure``).
        """
        r = self.rules
        rm = batch.rolls_max[games].astype(np.int64)
        ac = r.announce_column
        v_start = np.zeros(len(games))
        for L in np.unique(rm):
            L = int(L)
            sel = np.flatnonzero(rm == L)
            g = games[sel]
            S = self.S[:, :, :L]                                     # (n_rolls, R, L)
            Wg = W[sel]
            ann = batch.announced[g]
            legal = self._legal_by_roll(batch, g, L)
            pure = self._legal_by_roll(batch, g, L, pure=True) \
                if r.announce_free_on_pure_roll and L > 1 else None
            for bi in np.flatnonzero(ann >= 0):
                legal[bi] = False
                legal[bi, ac, ann[bi], :] = True
                if pure is not None:
                    pure[bi] = legal[bi]
            best = _best_box(Wg, S, legal)                                   # (B, L, n_rolls)
            best_pure = None
            if pure is not None:
                # A pure roll adds announce-column boxes to the legal ones (no others).
                extra = np.zeros_like(legal)
                extra[:, ac] = pure[:, ac] & ~legal[:, ac]
                best_pure = np.maximum(best, _best_box(Wg, S, extra))
            K, v0 = _turn_dp(r, best, best_pure)
            self._K[g, :K.shape[1]] = K
            v_start[sel] = v0
        self._key[games] = self._plan_key(batch, games)
        return v_start

    def _plan_key(self, batch, games):
        return batch.turn[games].astype(np.int64) * 64 + batch.announced[games].astype(np.int64) + 1

    def _announce_plans(self, batch, games, W, one_dp_per_horizon: bool = True):
        """The keep values after announcing each open row of the announce column, each distinct
        box valuation solved once.

        Args:
            W: float (B, C, R, smax + 1) box values of ``games``.
            one_dp_per_horizon: solve every row of a horizon in one DP call (what the bots and
                the search use); False: one call per row and horizon, the faster of the two
                for :meth:`start_values`' many distinct cards (a smaller working set).

        Returns:
            (opened, plans): opened maps a row to int64 positions in ``games`` where it is open;
            plans is a list of ``(row, part, L, Ku, inv)``: the games ``opened[row][part]``,
            all of horizon ``L`` (their ``batch.rolls_max``), have keep values
            ``Ku[inv]`` float64 (len(part), L - 1, n_keeps) after announcing ``row`` (``Ku``
            the distinct ones).
        """
        r = self.rules
        ac = r.announce_column
        rm = batch.rolls_max[games].astype(np.int64)
        opened = {}
        jobs = []                                   # (row, part, L, its DP input, inverse)
        for row in range(r.n_rows):
            idx = np.flatnonzero(batch.card[games, ac, row] < 0)
            if idx.size == 0:
                continue
            opened[row] = idx
            for L in np.unique(rm[idx]):
                L = int(L)
                part = np.flatnonzero(rm[idx] == L)
                # Many games value this box alike (e.g. a combination row): solve each once.
                uniq, inv = _unique_rows(W[idx[part], ac, row])
                jobs.append((row, part, L, uniq[:, self.S[:, row, :L].T], inv))
        if not one_dp_per_horizon:
            return opened, [(row, part, L, _turn_dp(r, best)[0], inv) for row, part, L, best, inv in jobs]
        plans = []
        for L in sorted({job[2] for job in jobs}):  # one DP for every row of a horizon
            group = [job for job in jobs if job[2] == L]
            K_all = _turn_dp(r, np.concatenate([job[3] for job in group]))[0]
            at = 0
            for row, part, _, best, inv in group:
                plans.append((row, part, L, K_all[at:at + best.shape[0]], inv))   # (u, L-1, n_keeps)
                at += best.shape[0]
        return opened, plans

    def _announce_values(self, batch, games, W, hold_keeps, ridx, plans: bool = True):
        """Value of announcing each row now (roll 1).

        Args:
            W: float (B, C, R, smax + 1) box values of ``games``; hold_keeps: int (B, 2**n)
            keep index of each hold mask; ridx: int (B,) roll index of the dice.
            plans: also return the keep values after each announcement (what playing the
                announcement needs; search's Q needs only the values).

        Returns:
            (values, Ks): values float (B, R), NEG where the row cannot be announced; Ks maps a
            row to (idx, K): the positions in ``games`` where it is open and their keep values
            after announcing it, float (len(idx), Lmax - 1, n_keeps), zero past a game's last
            roll (empty when ``plans`` is false). Each game's horizon is its own
            ``batch.rolls_max`` (the last turn may have more rolls).
        """
        ac = self.rules.announce_column
        rm = batch.rolls_max[games].astype(np.int64)
        out = np.full((len(games), self.rules.n_rows), NEG)
        opened, solved = self._announce_plans(batch, games, W)
        Ks = {}
        for row, idx in opened.items():
            if plans:
                Lmax = int(rm[idx].max())
                Ks[row] = (idx, np.zeros((len(idx), max(Lmax - 1, 0), self.tables.n_keeps)))
            out[idx, row] = W[idx, ac, row, self.S[ridx[idx], row, 0]]   # score the first roll
        for row, part, L, Ku, inv in solved:
            sub = opened[row][part]
            if plans:
                Ks[row][1][part, :L - 1] = Ku[inv]
            if L > 1:
                hv = np.take_along_axis(Ku[inv, 0], hold_keeps[sub], axis=1).max(axis=1)
                out[sub, row] = np.maximum(out[sub, row], hv)
        return out, Ks

    def start_values(self, batch, games: np.ndarray, W: np.ndarray) -> np.ndarray:
        """The value of each game before its turn's first roll, **with** the option of
        announcing a row after the first roll and any compulsory announcement of the rules:
        for each first roll (every die thrown) the better of playing on unannounced (score the
        roll now, or keep dice under the unannounced plan) and announcing an open row of the
        announce column (score it now, or keep dice with only that box to aim for), averaged
        over the first roll's outcomes. (:meth:`_plan`'s value is the unannounced plan's alone.)

        Args:
            batch: positions at a turn's start (no roll made, nothing announced).
            games: int64 (B,) the positions to value, unfinished.
            W: float (B, C, R, smax + 1) their box values.

        Returns:
            float64 (B,) expected points from the turn's start under the box valuation.

        Raises:
            ValueError: a finished game among ``games`` (it has no turn to start).

        The plans this planner is playing are left as they were.
        """
        r = self.rules
        t = self.tables
        games = np.asarray(games, np.int64)
        if batch.done[games].any():
            raise ValueError(f"{int(batch.done[games].sum())} finished game(s): no turn to start")
        playing = self._K, self._key
        self._K = np.zeros((batch.n, max(r.max_rolls - 1, 1), t.n_keeps))
        self._key = np.full(batch.n, -1, np.int64)
        try:
            self._plan(batch, games, W)
            K1 = self._K[games, 0]                                  # (B, n_keeps) after the first roll
        finally:
            self._K, self._key = playing
        rm = batch.rolls_max[games].astype(np.int64)
        # unannounced: the first roll scored now, or kept from under the unannounced plan
        first = placement_masks(r, batch.card[games], first=True, pure=True)    # (B, C, R)
        u = _best_box(W, self.S[:, :, :1], first[..., None])[:, 0]               # (B, n_rolls)
        more = rm > 1
        if more.any():
            u[more] = np.maximum(u[more], t.best_sub_keep(K1[more]))
        ac = r.announce_column
        if ac >= 0:
            if r.announce_compulsory == "always":
                u[(batch.card[games, ac] < 0).any(axis=1)] = NEG
            opened, solved = self._announce_plans(batch, games, W, one_dp_per_horizon=False)
            keeps = {}                                  # row -> [(part, its best keep's value)]
            for row, part, L, Ku, inv in solved:
                if L > 1:
                    keeps.setdefault(row, []).append((part, t.best_sub_keep(Ku[:, 0])[inv]))
            best = np.full_like(u, NEG)                 # the best announcement, every row at once
            for row, idx in opened.items():
                a = W[idx[:, None], ac, row, self.S[None, :, row, 0]]          # score it now,
                for part, kv in keeps.get(row, ()):                            # or keep for it
                    a[part] = np.maximum(a[part], kv)
                best[idx] = np.maximum(best[idx], a)
            np.maximum(u, best, out=u)
        return u @ _p_empty(r.n_dice)

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

    def scores_now(self, ridx: np.ndarray, rolls_used: np.ndarray) -> np.ndarray:
        """What each row would score with the dice showing, int64 (B, R) points.

        Args:
            ridx: int (B,) roll indices of the dice showing (``batch.roll_indices()``).
            rolls_used: int (B,) rolls made this turn, 1 or more (a row may score by the roll
                it is made on: straights in the rules that say so).
        """
        ru = np.asarray(rolls_used, np.int64)
        return np.take_along_axis(self.S[ridx], (ru - 1)[:, None, None].repeat(self.rules.n_rows, 1),
                                  axis=2)[:, :, 0]

    def _decide(self, batch, games, W, legal, hold_keeps, ridx, acts):
        r = self.rules
        P, H = batch.n_placements, batch.n_holds
        ru = batch.rolls_used[games].astype(np.int64)
        R = r.n_rows
        # score now
        s_now = self.scores_now(ridx, ru)                              # (B, R)
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
