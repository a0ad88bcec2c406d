# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Batched Yamb engine core: many games at once, seeded dice, legal-action masks.

Use :func:`yamblab.games.yamb.engine.new_yamb_batch`, which builds the rule tables from a
:class:`~yamblab.games.yamb.YambRules`. Action space (``C`` columns, ``R`` rows, ``n`` dice):
``c * R + r`` scores box (c, r); ``C*R + h`` rerolls the dice not held by hold mask ``h``
(0 .. 2**n - 1); ``C*R + 2**n + r`` announces row ``r`` of the announce column.

With ``pure_free`` (``YambRules.announce_free_on_pure_roll``) the open boxes of the announce
column are also legal without an announcement after a *pure* roll (the first roll, or a reroll
of every die, hold mask 0) while some box outside the announce and hand columns is open.

Dice are counter-based: the face on slot ``d`` at roll ``j`` of turn ``t`` of game ``g`` is a
fixed function of ``(seed, g, t, j, d)``, so every agent sees the same dice.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint64_t, int64_t, int32_t, int16_t, int8_t, uint8_t

cnp.import_array()

# column kinds (same order as yamblab.games.yamb.COLUMN_KINDS)
DEF K_DOWN = 0
DEF K_UP = 1
DEF K_FREE = 2
DEF K_ANNOUNCE = 3
DEF K_HAND = 4
DEF K_FROM_MIDDLE = 5
DEF K_TO_MIDDLE = 6
DEF MAXC = 8
DEF MAXR = 16


include "_splitmix.pxi"


cdef inline int8_t die_face(uint64_t seed, uint64_t game, int turn, int roll, int slot) noexcept nogil:
    cdef uint64_t x = splitmix(seed ^ splitmix(game * 0xD1B54A32D192ED03ULL
                                               + <uint64_t>((turn * 8 + roll) * 8 + slot)
                                               + 0x59616D6200000000ULL))
    return <int8_t>(1 + (((x >> 32) * 6) >> 32))


cdef inline bint _free_rest(const int16_t* card, int C, int R, const int8_t* kinds) noexcept nogil:
    """Some box outside the announce and hand columns is open (card: C*R, -1 open)."""
    cdef int c, r
    for c in range(C):
        if kinds[c] == K_ANNOUNCE or kinds[c] == K_HAND:
            continue
        for r in range(R):
            if card[c * R + r] < 0:
                return True
    return False


cdef void _placements(const int16_t* card, int C, int R, const int8_t* kinds, int ann_col,
                      bint first, bint pure_free_now, uint8_t* o) noexcept nogil:
    """Mark o[c * R + r] = 1 for every box where the dice may be scored without an announcement
    (o is zeroed by the caller): each column by its fill order, the hand column on the first
    roll only, and, when ``pure_free_now`` (a pure roll under the pure-roll rule while announcing
    is not compulsory), the open boxes of the announce column."""
    cdef int c, r, k, lo, hi
    for c in range(C):
        k = kinds[c]
        if k == K_ANNOUNCE:
            continue
        if k == K_HAND and not first:
            continue
        if k == K_FREE or k == K_HAND:
            for r in range(R):
                if card[c * R + r] < 0:
                    o[c * R + r] = 1
        elif k == K_DOWN:
            for r in range(R):
                if card[c * R + r] < 0:
                    o[c * R + r] = 1
                    break
        elif k == K_UP:
            for r in range(R - 1, -1, -1):
                if card[c * R + r] < 0:
                    o[c * R + r] = 1
                    break
        else:
            lo = -1
            hi = -1
            if k == K_FROM_MIDDLE:
                for r in range(6, -1, -1):
                    if card[c * R + r] < 0:
                        lo = r
                        break
                for r in range(7, R):
                    if card[c * R + r] < 0:
                        hi = r
                        break
            else:
                for r in range(0, 7):
                    if card[c * R + r] < 0:
                        lo = r
                        break
                for r in range(R - 1, 6, -1):
                    if card[c * R + r] < 0:
                        hi = r
                        break
            if lo >= 0:
                o[c * R + lo] = 1
            if hi >= 0:
                o[c * R + hi] = 1
    if pure_free_now and ann_col >= 0:
        for r in range(R):
            if card[ann_col * R + r] < 0:
                o[ann_col * R + r] = 1


def placement_masks(const int16_t[:, :, ::1] card, kinds, int ann_col, bint first, bint pure,
                    bint pure_free):
    """Boxes where the dice may be scored without an announcement, for cards at a given roll.

    The engine's own rule (the placements of its legal-action mask; the reference is
    ``rules.legal_boxes(rules, card, 1 if first else 2, None, pure)``).

    Args:
        card: int16 (B, C, R) cards, -1 open; kinds: int8 (C,) column kinds; ann_col: the
            announce column or -1; first: the first roll of the turn (the hand column is open
            to it); pure: the roll threw every die; pure_free: the rules'
            ``announce_free_on_pure_roll``.

    Returns:
        bool (B, C, R).

    Raises:
        ValueError: ``kinds`` not of length C.
    """
    cdef const int8_t[::1] kv = np.ascontiguousarray(kinds, dtype=np.int8)
    cdef Py_ssize_t B = card.shape[0], C = card.shape[1], R = card.shape[2], i
    if kv.shape[0] != C:
        raise ValueError(f"kinds has {kv.shape[0]} columns, the cards {C}")
    out = np.zeros((B, C, R), dtype=np.bool_)
    if B == 0 or C == 0 or R == 0:
        return out
    cdef uint8_t[:, :, ::1] o = out.view(np.uint8)
    cdef bint free_now
    with nogil:
        for i in range(B):
            free_now = pure_free and pure and _free_rest(&card[i, 0, 0], C, R, &kv[0])
            _placements(&card[i, 0, 0], C, R, &kv[0], ann_col, first, free_now, &o[i, 0, 0])
    return out


cdef class YambCore:
    """``n`` Yamb games (see the module docstring for the action space).

    Arrays (numpy views): ``dice`` int8 (n, n_dice); ``rolls_used`` int8 (n,) rolls made this
    turn (1..); ``rolls_max`` int8 (n,) rolls allowed this turn; ``turn`` int16 (n,)
    (``n_turns`` when done); ``card`` int16 (n, C, R), -1 while open; ``announced`` int8
    (n,) announced row or -1; ``pure`` int8 (n,) 1 when the current roll threw every die (the
    first roll, or a reroll with hold mask 0); ``col_total`` int32 (n, C); ``total`` int32
    (n,) points so far.
    """

    cdef readonly int n, C, R, nd, A, P, H, rolls, last_rolls, n_turns, ann_col, mode
    cdef readonly int threshold, bonus, clamp, max_rolls, pure_free
    cdef readonly uint64_t seed, first_game
    cdef readonly cnp.ndarray dice, rolls_used, rolls_max, turn, card, announced, col_total, total, pure
    cdef readonly cnp.ndarray kinds, score_tab, code_to_roll
    cdef int8_t[:, ::1] _dice
    cdef int8_t[::1] _ru, _rm, _ann, _pure
    cdef int16_t[::1] _turn
    cdef int16_t[:, :, ::1] _card
    cdef int32_t[:, ::1] _ct
    cdef int32_t[::1] _total
    cdef int8_t[::1] _kinds
    cdef int16_t[:, :, ::1] _score
    cdef int16_t[::1] _c2r

    def __init__(self, int n, kinds, int R, int n_dice, int rolls, int last_rolls, int ann_mode,
                 int threshold, int bonus, bint clamp, score_tab, code_to_roll,
                 uint64_t seed=0, uint64_t first_game=0, bint pure_free=False):
        if n < 0:
            raise ValueError(f"number of games {n} must not be negative")
        self.n = n
        self.kinds = np.array(kinds, dtype=np.int8, order="C", copy=True)
        self.C = self.kinds.shape[0]
        self.R = R
        self.nd = n_dice
        self.rolls = rolls
        self.last_rolls = last_rolls
        self.max_rolls = max(rolls, last_rolls)
        self.n_turns = self.C * R
        self.mode = ann_mode
        self.threshold = threshold
        self.bonus = bonus
        self.clamp = clamp
        self.pure_free = pure_free
        self.P = self.C * R
        self.H = 1 << n_dice
        self.A = self.P + self.H + R
        self.ann_col = -1
        cdef int c
        for c in range(self.C):
            if self.kinds[c] == K_ANNOUNCE:
                self.ann_col = c
        self.seed = seed
        self.first_game = first_game
        self.score_tab = np.array(score_tab, dtype=np.int16, order="C", copy=True)
        self.code_to_roll = np.array(code_to_roll, dtype=np.int16, order="C", copy=True)
        self.dice = np.zeros((n, n_dice), dtype=np.int8)
        self.rolls_used = np.zeros(n, dtype=np.int8)
        self.rolls_max = np.zeros(n, dtype=np.int8)
        self.turn = np.zeros(n, dtype=np.int16)
        self.card = np.full((n, self.C, R), -1, dtype=np.int16)
        self.announced = np.full(n, -1, dtype=np.int8)
        self.pure = np.zeros(n, dtype=np.int8)
        self.col_total = np.zeros((n, self.C), dtype=np.int32)
        self.total = np.zeros(n, dtype=np.int32)
        self._dice = self.dice
        self._ru = self.rolls_used
        self._rm = self.rolls_max
        self._ann = self.announced
        self._pure = self.pure
        self._turn = self.turn
        self._card = self.card
        self._ct = self.col_total
        self._total = self.total
        self._kinds = self.kinds
        self._score = self.score_tab
        self._c2r = self.code_to_roll
        cdef Py_ssize_t i
        with nogil:
            for i in range(n):
                self._new_turn(i)

    cdef inline void _new_turn(self, Py_ssize_t i) noexcept nogil:
        cdef int s
        for s in range(self.nd):
            self._dice[i, s] = die_face(self.seed, self.first_game + i, self._turn[i], 0, s)
        self._ru[i] = 1
        self._rm[i] = self.last_rolls if self._turn[i] == self.n_turns - 1 else self.rolls
        self._ann[i] = -1
        self._pure[i] = 1

    cdef inline int _roll_index(self, Py_ssize_t i) noexcept nogil:
        cdef int cnt[7]
        cdef int s, code = 0
        for s in range(7):
            cnt[s] = 0
        for s in range(self.nd):
            cnt[self._dice[i, s]] += 1
        for s in range(1, 7):
            code = code * 7 + cnt[s]
        return self._c2r[code]

    cdef inline bint _can_reroll_unannounced(self, Py_ssize_t i) noexcept nogil:
        # Some box outside the announce and hand columns is open.
        return _free_rest(&self._card[i, 0, 0], self.C, self.R, &self._kinds[0])

    cdef inline bint _announce_open(self, Py_ssize_t i) noexcept nogil:
        cdef int r
        if self.ann_col < 0:
            return False
        for r in range(self.R):
            if self._card[i, self.ann_col, r] < 0:
                return True
        return False

    cdef int _legal(self, Py_ssize_t i, uint8_t* o) noexcept nogil:
        """Fill o[0..A) with the legal mask of game i; return the number of legal actions."""
        cdef int a, r, n_legal = 0
        cdef int ru = self._ru[i], ann = self._ann[i]
        cdef bint first = ru == 1
        cdef bint must_announce = False, free_rest
        for a in range(self.A):
            o[a] = 0
        if self._turn[i] >= self.n_turns:
            return 0
        if ann >= 0:
            o[self.ann_col * self.R + ann] = 1
            n_legal = 1
            if ru < self._rm[i]:
                for a in range(self.H):
                    o[self.P + a] = 1
                n_legal += self.H
            return n_legal
        if first and self.mode == 1 and self._announce_open(i):
            must_announce = True
        if not must_announce:
            free_rest = self._can_reroll_unannounced(i)
            # A pure roll may be written in the announce column unannounced while announcing
            # is not compulsory (the condition of an unannounced reroll).
            _placements(&self._card[i, 0, 0], self.C, self.R, &self._kinds[0], self.ann_col, first,
                        self.pure_free and self._pure[i] and free_rest, o)
            for a in range(self.P):
                n_legal += o[a]
            if ru < self._rm[i] and free_rest:
                for a in range(self.H):
                    o[self.P + a] = 1
                n_legal += self.H
        if first and self.ann_col >= 0:
            for r in range(self.R):
                if self._card[i, self.ann_col, r] < 0:
                    o[self.P + self.H + r] = 1
                    n_legal += 1
        return n_legal

    @property
    def done(self):
        """bool (n,): games whose card is full."""
        return self.turn >= self.n_turns

    def legal_actions(self):
        """Legal-action mask, bool (n, A); all False for finished games."""
        out = np.zeros((self.n, self.A), dtype=np.uint8)
        cdef uint8_t[:, ::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                self._legal(i, &o[i, 0])
        return out.view(np.bool_)

    def roll_indices(self):
        """int64 (n,): the roll index of each game's dice (order of ``dice_tables(n_dice)``)."""
        out = np.empty(self.n, dtype=np.int64)
        cdef int64_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                o[i] = self._roll_index(i)
        return out

    def hold_keep_codes(self):
        """int32 (n, 2**n_dice): base-7 histogram code of the dice each hold mask keeps."""
        out = np.empty((self.n, self.H), dtype=np.int32)
        cdef int32_t[:, ::1] o = out
        cdef Py_ssize_t i
        cdef int h, s, f, code
        cdef int cnt[7]
        with nogil:
            for i in range(self.n):
                for h in range(self.H):
                    for f in range(7):
                        cnt[f] = 0
                    for s in range(self.nd):
                        if (h >> s) & 1:
                            cnt[self._dice[i, s]] += 1
                    code = 0
                    for f in range(1, 7):
                        code = code * 7 + cnt[f]
                    o[i, h] = code
        return out

    def first_illegal(self, actions):
        """Index of the first game whose action is illegal (-1 for none); -1 actions skip."""
        cdef int64_t[::1] a = np.ascontiguousarray(actions, dtype=np.int64)
        cdef Py_ssize_t i, bad = -1
        cdef uint8_t buf[256]
        with nogil:
            for i in range(self.n):
                if a[i] == -1 or self._turn[i] >= self.n_turns:
                    continue
                if a[i] < 0 or a[i] >= self.A:
                    bad = i
                    break
                self._legal(i, buf)
                if not buf[a[i]]:
                    bad = i
                    break
        return bad

    def apply(self, actions):
        """Apply already-validated actions (-1 = leave that game as it is)."""
        cdef int64_t[::1] a = np.ascontiguousarray(actions, dtype=np.int64)
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                if a[i] < 0 or self._turn[i] >= self.n_turns:
                    continue
                self._apply(i, <int>a[i])

    cdef inline void _apply(self, Py_ssize_t i, int a) noexcept nogil:
        cdef int s, j
        if a < self.P:
            self._place(i, a // self.R, a % self.R)
        elif a < self.P + self.H:
            a -= self.P
            j = self._ru[i]
            for s in range(self.nd):
                if not (a >> s) & 1:
                    self._dice[i, s] = die_face(self.seed, self.first_game + i, self._turn[i], j, s)
            self._ru[i] += 1
            self._pure[i] = 1 if a == 0 else 0
        else:
            self._ann[i] = a - self.P - self.H

    cdef inline int _column_total(self, Py_ssize_t i, int c) noexcept nogil:
        """Column c's points: upper sum + bonus, the middle term Ones x (Max - Min), lower rows."""
        cdef int up = 0, low = 0, mid = 0, t
        for t in range(6):
            if self._card[i, c, t] > 0:
                up += self._card[i, c, t]
        for t in range(8, self.R):
            if self._card[i, c, t] > 0:
                low += self._card[i, c, t]
        if self._card[i, c, 0] >= 0 and self._card[i, c, 6] >= 0 and self._card[i, c, 7] >= 0:
            mid = self._card[i, c, 0] * (self._card[i, c, 6] - self._card[i, c, 7])
            if self.clamp and mid < 0:
                mid = 0
        return up + (self.bonus if up >= self.threshold else 0) + mid + low

    cdef inline void _place(self, Py_ssize_t i, int c, int r) noexcept nogil:
        cdef int ri = self._roll_index(i)
        cdef int pts = self._score[ri, r, self._ru[i] - 1]
        cdef int old
        self._card[i, c, r] = pts
        old = self._ct[i, c]
        self._ct[i, c] = self._column_total(i, c)
        self._total[i] += self._ct[i, c] - old
        self._turn[i] += 1
        if self._turn[i] < self.n_turns:
            self._new_turn(i)
        else:
            self._ru[i] = 0
            self._rm[i] = 0
            self._ann[i] = -1
            self._pure[i] = 0

    def random_actions(self, uint64_t seed, int step):
        """A uniformly random legal action per game (-1 for finished games), int64 (n,).

        The choice is a fixed function of (seed, game, step), so it is reproducible.
        """
        out = np.full(self.n, -1, dtype=np.int64)
        cdef int64_t[::1] o = out
        cdef Py_ssize_t i
        cdef int nl, a, k, pick
        cdef uint64_t x
        cdef uint8_t buf[256]
        with nogil:
            for i in range(self.n):
                nl = self._legal(i, buf)
                if nl == 0:
                    continue
                x = splitmix(seed ^ splitmix((self.first_game + i) * 0x9E3779B97F4A7C15ULL + <uint64_t>step))
                pick = <int>(((x >> 32) * <uint64_t>nl) >> 32)
                k = 0
                for a in range(self.A):
                    if buf[a]:
                        if k == pick:
                            o[i] = a
                            break
                        k += 1
        return out

    def set_state(self, Py_ssize_t i, card, dice, int turn, int rolls_used, int announced, pure=None):
        """Put game ``i`` in a given position (for tests and advice); totals are recomputed.

        ``pure``: whether the current roll threw every die; ``None`` means ``rolls_used == 1``.
        """
        cdef int c, r, s
        arr = np.asarray(card, dtype=np.int16)
        for c in range(self.C):
            for r in range(self.R):
                self._card[i, c, r] = arr[c, r]
        for s in range(self.nd):
            self._dice[i, s] = int(dice[s])
        self._turn[i] = turn
        self._ru[i] = rolls_used
        self._rm[i] = self.last_rolls if turn == self.n_turns - 1 else self.rolls
        self._ann[i] = announced
        self._pure[i] = (rolls_used == 1) if pure is None else bool(pure)
        self._total[i] = 0
        for c in range(self.C):
            self._ct[i, c] = self._column_total(i, c)
            self._total[i] += self._ct[i, c]


def write_cards(const int16_t[:, :, ::1] card, float[:, :, :, ::1] columns, float[:, :, ::1] features,
                int ones_row, int max_row, int min_row, int threshold, bint middle_clamp,
                float score_scale):
    """The card part of the shared encoding, in one pass (see ``encoding.write_yamb_card``).

    Args:
        card: int16 (m, C, R) box scores in points, -1 open.
        columns: float32 (m, 8, 16, 2), written at [:, :C, :R]: filled flag, score / score_scale.
        features: float32 (m, 8, 4), written at [:, :C]: upper sum / 60, points still missing
            to the upper bonus threshold / 60, the middle term (Ones × (Max − Min), clamped at 0
            under ``middle_clamp``, 0 until all three are filled) / 60, Ones / 5.

    Raises:
        ValueError: arrays of mismatched sizes.
    """
    cdef Py_ssize_t m = card.shape[0], C = card.shape[1], R = card.shape[2], i, c, r
    if columns.shape[0] < m or features.shape[0] < m or columns.shape[1] < C or columns.shape[2] < R \
            or columns.shape[3] != 2 or features.shape[1] < C or features.shape[2] != 4 or R < 8:
        raise ValueError("columns (m, >=C, >=R, 2) and features (m, >=C, 4) must hold the cards")
    cdef int v, up, o, mx, mn
    cdef float mid
    with nogil:
        for i in range(m):
            for c in range(C):
                up = 0
                for r in range(R):
                    v = card[i, c, r]
                    if v >= 0:
                        columns[i, c, r, 0] = 1.0
                        columns[i, c, r, 1] = <float>v / score_scale
                        if r < 6:
                            up = up + v
                    else:
                        columns[i, c, r, 0] = 0.0
                        columns[i, c, r, 1] = 0.0
                features[i, c, 0] = <float>up / 60.0
                features[i, c, 1] = <float>(threshold - up if threshold > up else 0) / 60.0
                o, mx, mn = card[i, c, ones_row], card[i, c, max_row], card[i, c, min_row]
                mid = 0.0
                if o >= 0 and mx >= 0 and mn >= 0:
                    mid = <float>(o * (mx - mn))
                    if middle_clamp and mid < 0:
                        mid = 0.0
                features[i, c, 2] = mid / 60.0
                features[i, c, 3] = <float>(o if o > 0 else 0) / 5.0
