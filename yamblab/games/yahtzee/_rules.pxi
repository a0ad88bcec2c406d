# Yahtzee rules at C level, shared (textually included) by the batched engine and the oracle
# kernels. The readable statement of the same rules is yamblab/games/yahtzee/rules.py; tests check
# that both agree on every roll, box and joker situation.

from libc.stdint cimport int32_t

cdef enum:
    LOWER_MASK_C = 0x1FC0      # boxes 6..12
    BOX_YAHTZEE = 11
    BOX_FH = 8
    BOX_SS = 9
    BOX_LS = 10

# Tables filled once at import from yamblab.games.dice (see _init_rule_tables).
cdef int32_t ROLL_COUNTS[252][6]
cdef int32_t SCORE[252][13]        # base scores, no joker
cdef int32_t YFACE[252]            # face index 0..5 of a five-of-a-kind roll, else -1
cdef int32_t KEEP_ADD_C[462][6]
cdef int32_t KEEP_SUB_C[462][6]
cdef int32_t SUBK[252][32]         # distinct sub-keeps of each roll, ascending, -1 padded
cdef int32_t NSUBK[252]
cdef double PROLL[252]
cdef int32_t HOLD_KEEP[252][32]    # keep made by each hold mask over the roll's sorted dice


cdef void _init_rule_tables():
    from yamblab.games import dice as _d
    from yamblab.games.yahtzee.rules import base_score as _bs
    cdef int r, c, f
    for r in range(252):
        counts = [int(x) for x in _d.ROLLS[r]]
        YFACE[r] = -1
        for f in range(6):
            ROLL_COUNTS[r][f] = counts[f]
            if counts[f] == 5:
                YFACE[r] = f
        for c in range(13):
            SCORE[r][c] = _bs(counts, c)
        PROLL[r] = float(_d.P_ROLL[r])
        NSUBK[r] = int(_d.N_SUB_KEEPS[r])
        for c in range(32):
            SUBK[r][c] = int(_d.SUB_KEEPS[r, c])
            HOLD_KEEP[r][c] = int(_d.hold_keep_table()[r, c])
    for r in range(462):
        for f in range(6):
            KEEP_ADD_C[r][f] = int(_d.KEEP_ADD[r, f])
            KEEP_SUB_C[r][f] = int(_d.KEEP_SUB[r, f])


cdef inline int legal_box_mask(int face, int ys, int open13, int joker) noexcept nogil:
    """Legal boxes (13-bit) for a roll whose five-of-a-kind face is `face` (-1 if none).

    joker: 0 forced, 1 free, 2 priority, 3 none; ys: Yahtzee box 0 open, 1 zero, 2 fifty.
    """
    cdef int g
    if face < 0 or ys == 0 or joker == 1 or joker == 3:
        return open13
    if (open13 >> face) & 1:
        return 1 << face
    if joker == 0:
        g = open13 & LOWER_MASK_C
        return g if g else open13
    g = open13 & ((1 << 6) | (1 << 7))
    if g:
        return g
    g = open13 & ((1 << 12) | (1 << 8) | (1 << 9) | (1 << 10))
    if g:
        return g
    return open13


cdef inline bint joker_on(int face, int ys, int open13, int joker) noexcept nogil:
    """Whether Full House and the straights score full value for this roll."""
    if face < 0 or ys == 0 or joker == 3:
        return 0
    if joker == 1:
        return not ((open13 >> face) & 1)
    return 1


cdef inline int box_points(int r, int box, bint joker) noexcept nogil:
    """Points of roll r in box (the box's own score, no bonuses)."""
    if joker:
        if box == BOX_FH:
            return 25
        if box == BOX_SS:
            return 30
        if box == BOX_LS:
            return 40
    return SCORE[r][box]


cdef inline int mask13_to_12(int m13) noexcept nogil:
    """The 12-bit mask of non-Yahtzee boxes (Chance moves to bit 11)."""
    return (m13 & 0x7FF) | (((m13 >> 12) & 1) << 11)


cdef inline int mask12_to_13(int m12) noexcept nogil:
    return (m12 & 0x7FF) | (((m12 >> 11) & 1) << 12)


cdef inline int upper_step(int u, int s, bint upper_bonus, int* nu) noexcept nogil:
    """Scoring s points in an upper box at capped upper subtotal u: writes the next capped
    subtotal to nu (0 when the variant has no upper bonus: one lane) and returns the bonus
    earned now (35 when the subtotal reaches 63)."""
    if not upper_bonus:
        nu[0] = 0
        return 0
    nu[0] = 63 if u + s > 63 else u + s
    return 35 if (u < 63 and u + s >= 63) else 0
