# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Batched Yahtzee engine: many games at once, seeded dice, legal-action masks.

Action space (45 actions): 0..12 score that box (card order); 13 + h for h in 0..31 reroll
the dice not held by hold mask h (bit i holds die i). Scoring is legal at any roll; a hold
needs a roll left.

Dice are counter-based: the face that lands on die slot ``d`` at roll ``j`` of turn ``t`` of
game ``g`` is a fixed function of ``(seed, g, t, j, d)``. Two agents playing the same game
seed therefore see the same dice wherever they reroll the same slots (common random numbers),
and a game can be replayed from its seed alone.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint64_t, int64_t, int16_t, int8_t, int32_t

include "_rules.pxi"

from yamblab.errors import IllegalActionError

cnp.import_array()
_init_rule_tables()

cdef int16_t HIST_TO_KEEP[46656]     # base-6 code of a histogram -> keep index (or -1)


cdef void _init_codes():
    from yamblab.games import dice as _d
    cdef int i, f, code
    for i in range(46656):
        HIST_TO_KEEP[i] = -1
    for i in range(462):
        code = 0
        for f in range(6):
            code = code * 6 + int(_d.KEEPS[i, f])
        HIST_TO_KEEP[code] = i

_init_codes()

N_ACTIONS = 45
HOLD_OFFSET = 13


include "_splitmix.pxi"


cdef inline int8_t die_face(uint64_t seed, uint64_t game, int turn, int roll, int slot) noexcept nogil:
    cdef uint64_t x = splitmix(seed ^ splitmix(game * 0xD1B54A32D192ED03ULL
                                               + <uint64_t>((turn * 4 + roll) * 8 + slot)))
    return <int8_t>(1 + (((x >> 32) * 6) >> 32))


cdef inline int keep_of(const int8_t* d, int hold) noexcept nogil:
    cdef int cnt[6]
    cdef int i, code = 0
    for i in range(6):
        cnt[i] = 0
    for i in range(5):
        if (hold >> i) & 1:
            cnt[d[i] - 1] += 1
    for i in range(6):
        code = code * 6 + cnt[i]
    return HIST_TO_KEEP[code]


cdef class YahtzeeBatch:
    """``n`` solitaire Yahtzee games played in lockstep-free batches.

    Args:
        n: number of games.
        joker, upper_bonus, yahtzee_bonus: the rule variant (joker 0 forced, 1 free,
            2 priority, 3 none); use :func:`yamblab.games.yahtzee.engine.new_batch` to pass a
            :class:`~yamblab.games.yahtzee.YahtzeeRules`.
        seed: the dice seed (uint64).
        first_game: the game number of game 0; game ``i`` is game ``first_game + i``.

    Arrays (numpy views, shape (n,) unless noted): ``dice`` int8 (n, 5), ``rolls_left`` int8,
    ``turn`` int8 (13 when done), ``filled`` int16 13-bit mask, ``box_scores`` int16 (n, 13)
    (-1 while open), ``upper_raw`` int16 (uncapped upper subtotal), ``ystate`` int8,
    ``yahtzee_bonuses`` int16, ``total`` int32 (all points, bonuses included).
    """

    cdef readonly int n, joker
    cdef readonly bint upper_bonus, yahtzee_bonus
    cdef readonly uint64_t seed, first_game
    cdef readonly cnp.ndarray dice, rolls_left, turn, filled, box_scores, upper_raw
    cdef readonly cnp.ndarray ystate, yahtzee_bonuses, total
    cdef int8_t[:, ::1] _dice
    cdef int8_t[::1] _rl, _turn, _ys
    cdef int16_t[::1] _filled, _up, _yb
    cdef int16_t[:, ::1] _boxes
    cdef int32_t[::1] _total

    def __init__(self, int n, int joker=0, bint upper_bonus=True, bint yahtzee_bonus=True,
                 uint64_t seed=0, uint64_t first_game=0):
        if n < 0:
            raise ValueError(f"number of games {n} must not be negative")
        if not 0 <= joker <= 3:
            raise ValueError(f"joker code {joker} must be 0..3")
        self.n = n
        self.joker = joker
        self.upper_bonus = upper_bonus
        self.yahtzee_bonus = yahtzee_bonus
        self.seed = seed
        self.first_game = first_game
        self.dice = np.zeros((n, 5), dtype=np.int8)
        self.rolls_left = np.zeros(n, dtype=np.int8)
        self.turn = np.zeros(n, dtype=np.int8)
        self.filled = np.zeros(n, dtype=np.int16)
        self.box_scores = np.full((n, 13), -1, dtype=np.int16)
        self.upper_raw = np.zeros(n, dtype=np.int16)
        self.ystate = np.zeros(n, dtype=np.int8)
        self.yahtzee_bonuses = np.zeros(n, dtype=np.int16)
        self.total = np.zeros(n, dtype=np.int32)
        self._dice = self.dice
        self._rl = self.rolls_left
        self._turn = self.turn
        self._filled = self.filled
        self._boxes = self.box_scores
        self._up = self.upper_raw
        self._ys = self.ystate
        self._yb = self.yahtzee_bonuses
        self._total = self.total
        cdef Py_ssize_t i
        with nogil:
            for i in range(n):
                self._new_turn(i)

    cdef inline void _new_turn(self, Py_ssize_t i) noexcept nogil:
        cdef int s
        for s in range(5):
            self._dice[i, s] = die_face(self.seed, self.first_game + i, self._turn[i], 0, s)
        self._rl[i] = 2

    cdef inline int _roll_index(self, Py_ssize_t i) noexcept nogil:
        return keep_of(&self._dice[i, 0], 31) - 210

    cdef inline int _legal_boxes(self, Py_ssize_t i) noexcept nogil:
        cdef int r = self._roll_index(i)
        cdef int open13 = (~self._filled[i]) & 0x1FFF
        return legal_box_mask(YFACE[r], self._ys[i], open13, self.joker)

    @property
    def done(self):
        """bool (n,): games whose 13 boxes are all filled."""
        return self.turn >= 13

    def legal_actions(self):
        """Legal-action mask, bool (n, 45); all False for finished games."""
        out = np.zeros((self.n, 45), dtype=np.bool_)
        cdef cnp.npy_bool[:, ::1] o = out
        cdef Py_ssize_t i
        cdef int lm, c
        with nogil:
            for i in range(self.n):
                if self._turn[i] >= 13:
                    continue
                lm = self._legal_boxes(i)
                for c in range(13):
                    o[i, c] = (lm >> c) & 1
                if self._rl[i] > 0:
                    for c in range(32):
                        o[i, 13 + c] = 1
        return out

    def roll_indices(self):
        """int64 (n,): the roll index (0..251) of each game's dice."""
        out = np.empty(self.n, dtype=np.int64)
        cdef int64_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                o[i] = self._roll_index(i)
        return out

    def hold_keeps(self):
        """int32 (n, 32): the keep index (0..461) each hold mask makes from each game's dice."""
        out = np.empty((self.n, 32), dtype=np.int32)
        cdef int32_t[:, ::1] o = out
        cdef Py_ssize_t i
        cdef int h
        with nogil:
            for i in range(self.n):
                for h in range(32):
                    o[i, h] = keep_of(&self._dice[i, 0], h)
        return out

    def boundary_states(self):
        """int64 (n, 3): (mask12, ystate, capped upper subtotal) of each game's scorecard."""
        out = np.empty((self.n, 3), dtype=np.int64)
        cdef int64_t[:, ::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                o[i, 0] = mask13_to_12(self._filled[i])
                o[i, 1] = self._ys[i]
                o[i, 2] = self._up[i] if self._up[i] < 63 else 63
        return out

    def step(self, actions):
        """Apply one action per game (ignored for finished games).

        Args:
            actions: int array (n,) of action indices 0..44.

        Raises:
            IllegalActionError: an action that is not legal for its game; nothing is applied.
        """
        cdef cnp.ndarray[cnp.int64_t, ndim=1] acts = np.ascontiguousarray(actions, dtype=np.int64)
        if acts.shape[0] != self.n:
            raise IllegalActionError(f"expected {self.n} actions, got {acts.shape[0]}")
        cdef int64_t[::1] a = acts
        cdef Py_ssize_t i, bad = -1
        cdef int lm
        with nogil:
            for i in range(self.n):
                if self._turn[i] >= 13:
                    continue
                if a[i] < 0 or a[i] >= 45:
                    bad = i
                    break
                if a[i] < 13:
                    lm = self._legal_boxes(i)
                    if not (lm >> a[i]) & 1:
                        bad = i
                        break
                elif self._rl[i] <= 0:
                    bad = i
                    break
        if bad >= 0:
            raise IllegalActionError(self._explain(bad, int(a[bad])))
        with nogil:
            for i in range(self.n):
                if self._turn[i] >= 13:
                    continue
                if a[i] < 13:
                    self._score(i, <int>a[i])
                else:
                    self._reroll(i, <int>a[i] - 13)

    def _explain(self, Py_ssize_t i, int a):
        from yamblab.games.yahtzee.rules import BOX_LABELS
        if a < 0 or a >= 45:
            return f"game {i}: action {a} is not 0..44 (0..12 boxes, 13..44 holds)"
        if a >= 13:
            return f"game {i}: cannot reroll, no rolls left this turn"
        lm = self._legal_boxes(i)
        why = "is already filled" if (self._filled[i] >> a) & 1 else "is not allowed by the joker rule"
        legal = ", ".join(BOX_LABELS[c] for c in range(13) if (lm >> c) & 1)
        return f"game {i}: cannot score {BOX_LABELS[a]} with dice {list(self.dice[i])}: it {why}; legal: {legal}"

    cdef inline void _reroll(self, Py_ssize_t i, int hold) noexcept nogil:
        cdef int s, j = 3 - self._rl[i]
        for s in range(5):
            if not (hold >> s) & 1:
                self._dice[i, s] = die_face(self.seed, self.first_game + i, self._turn[i], j, s)
        self._rl[i] -= 1

    cdef inline void _score(self, Py_ssize_t i, int c) noexcept nogil:
        cdef int r = self._roll_index(i)
        cdef int face = YFACE[r]
        cdef int ys = self._ys[i]
        cdef int open13 = (~self._filled[i]) & 0x1FFF
        cdef int pts = box_points(r, c, joker_on(face, ys, open13, self.joker))
        cdef int gain = pts
        cdef int before
        if face >= 0 and ys == 2 and self.yahtzee_bonus:
            gain += 100
            self._yb[i] += 1
        if c < 6:
            before = self._up[i]
            self._up[i] += pts
            if self.upper_bonus and before < 63 and self._up[i] >= 63:
                gain += 35
        if c == BOX_YAHTZEE:
            self._ys[i] = 2 if pts == 50 else 1
        self._boxes[i, c] = pts
        self._filled[i] |= (1 << c)
        self._total[i] += gain
        self._turn[i] += 1
        if self._turn[i] < 13:
            self._new_turn(i)
        else:
            self._rl[i] = 0

    def random_actions(self, uint64_t seed, int step):
        """A uniformly random legal action per game (0 for finished games), int64 (n,).

        The choice is a fixed function of (seed, game, step), so it is reproducible.
        """
        out = np.zeros(self.n, dtype=np.int64)
        cdef int64_t[::1] o = out
        cdef Py_ssize_t i
        cdef int lm, nlegal, k, c, pick
        cdef uint64_t x
        with nogil:
            for i in range(self.n):
                if self._turn[i] >= 13:
                    continue
                lm = self._legal_boxes(i)
                nlegal = 0
                for c in range(13):
                    nlegal += (lm >> c) & 1
                if self._rl[i] > 0:
                    nlegal += 32
                x = splitmix(seed ^ splitmix((self.first_game + i) * 0x9E3779B97F4A7C15ULL + <uint64_t>step))
                pick = <int>(((x >> 32) * <uint64_t>nlegal) >> 32)
                k = 0
                for c in range(13):
                    if (lm >> c) & 1:
                        if k == pick:
                            o[i] = c
                            break
                        k += 1
                else:
                    o[i] = 13 + (pick - k)
        return out
