# Lane-blocked turn of the Yahtzee oracle's kernels (textually included by _kernels.pyx and
# _occupancy.pyx, after their RuleParams, LMAX and the rules tables): the final roll's plan of a
# (mask12, ystate) group, and one turn on a block of 8 upper subtotals (_blocked_turn.h).

cdef extern from "stdlib.h" nogil:
    void* aligned_alloc(size_t alignment, size_t size)

cdef extern from "_blocked_turn.h" nogil:
    void yb_final_roll_max(double* aw, const double* gw, const int* nbox, const int (*src)[13],
                           const double (*add)[13], const double* ybon)
    void yb_keep_stage_max(double* aw, const int32_t (*kadd)[6], const int32_t (*ksub)[6])
    void yb_average_to_empty(double* aw, const int32_t (*kadd)[6], double* out, int n)
    void yb_final_roll(double* aw, double* at, const double* gw, const double* gt,
                       const int* nbox, const int (*src)[13], const double (*add)[13],
                       const double* ybon)
    void yb_keep_stage(double* aw, double* at, double* ib, const int32_t (*kadd)[6],
                       const int32_t (*ksub)[6])
    void yb_first_roll(const double* at, const double* proll, double* out, int n)

cdef enum:
    BLOCK = 8            # lanes per vector block (_blocked_turn.h)
    NSRC = 44            # source rows of the final roll: 36 upper (box, count) + 8 lower


cdef struct TurnPlan:
    # The final roll's choices of one (mask12, ystate) group, shared by its lane blocks.
    int nbox[252]        # legal boxes of each roll
    int src[252][13]     # their source rows: upper box c with n dice -> 6c + n; lower -> 36 + slot
    double add[252][13]  # points added to the source (lower boxes; upper rows include them)
    double ybon[252]     # Yahtzee bonus of the roll
    int ubase[6]         # offset of the next state's row of each open upper box, -1 closed
    int lbase[8]         # offset of each lower slot's next-state row, -1 unused


cdef void make_plan(int m12, int ys, RuleParams rp, TurnPlan* p) noexcept nogil:
    """Legal boxes, points and next-state rows of every final roll of group (m12, ys).

    Lower slots: box c in 6..12 (not the Yahtzee box) -> slot c - 6; the Yahtzee box scored 0 ->
    slot 5, scored 50 -> slot 7. Boxes are listed in card order, so ties go to the first box."""
    cdef int open13 = (~mask12_to_13(m12)) & 0x1FFF
    cdef int r, c, face, lm, pts, n
    cdef bint jk
    if ys != 0:
        open13 &= ~(1 << BOX_YAHTZEE)
    for c in range(6):
        p.ubase[c] = ((m12 | (1 << c)) * 3 + ys) * LMAX if (open13 >> c) & 1 else -1
    for c in range(8):
        p.lbase[c] = -1
    for c in range(6, 13):
        if c != BOX_YAHTZEE and (open13 >> c) & 1:
            p.lbase[c - 6] = ((m12 | (1 << (c if c < 12 else 11))) * 3 + ys) * LMAX
    if ys == 0:
        p.lbase[5] = (m12 * 3 + 1) * LMAX
        p.lbase[7] = (m12 * 3 + 2) * LMAX
    for r in range(252):
        face = YFACE[r]
        lm = legal_box_mask(face, ys, open13, rp.joker)
        jk = joker_on(face, ys, open13, rp.joker)
        p.ybon[r] = 100.0 if (face >= 0 and ys == 2 and rp.yahtzee_bonus) else 0.0
        n = 0
        for c in range(13):
            if not (lm >> c) & 1:
                continue
            pts = box_points(r, c, jk)
            if c < 6:
                p.src[r][n] = c * 6 + pts // (c + 1)
                p.add[r][n] = 0.0
            elif c == BOX_YAHTZEE:
                p.src[r][n] = 36 + (7 if pts == 50 else 5)
                p.add[r][n] = <double>pts
            else:
                p.src[r][n] = 36 + c - 6
                p.add[r][n] = <double>pts
            n += 1
        p.nbox[r] = n


cdef void fill_sources(const double* V, int j0, RuleParams rp, const TurnPlan* p, double* G) noexcept nogil:
    """The final roll's source rows for lanes j0..j0+7 from table V: points + next value of each
    open upper box for each count of its face (rows 6c + n), next value of each lower slot
    (rows 36 + slot). Lanes past the group's largest upper subtotal are read too (every group
    has 64 lanes in the table) and dropped by the caller."""
    cdef int c, n, j, s, nu, bonus
    cdef double* g
    for c in range(6):
        if p.ubase[c] < 0:
            continue
        for n in range(6):
            s = (c + 1) * n
            g = G + (c * 6 + n) * BLOCK
            for j in range(BLOCK):
                bonus = upper_step(j0 + j, s, rp.upper_bonus, &nu)
                g[j] = <double>(s + bonus) + V[p.ubase[c] + nu]
    for c in range(8):
        if p.lbase[c] < 0:
            continue
        g = G + (36 + c) * BLOCK
        for j in range(BLOCK):
            g[j] = V[p.lbase[c] + j0 + j]


cdef void block_eval(const double* W, const double* T, int j0, RuleParams rp, const TurnPlan* p,
                     double* AW, double* AT, double* IB, double* GW, double* GT,
                     double* out, int nout) noexcept nogil:
    """One turn of the turn-perfect agent of W for lanes j0..j0+7 of a group, valued by the true
    rewards + T; writes the expected points still to come of the first ``nout`` lanes to out."""
    fill_sources(W, j0, rp, p, GW)
    fill_sources(T, j0, rp, p, GT)
    yb_final_roll(AW, AT, GW, GT, p.nbox, p.src, p.add, p.ybon)
    yb_keep_stage(AW, AT, IB, KEEP_ADD_C, KEEP_SUB_C)      # second keep (one roll left)
    yb_keep_stage(AW, AT, IB, KEEP_ADD_C, KEEP_SUB_C)      # first keep (two rolls left)
    yb_first_roll(AT, PROLL, out, nout)


cdef void block_build(const double* V, int j0, RuleParams rp, const TurnPlan* p, double* A, double* G,
                      double* out, int nout) noexcept nogil:
    """The oracle's turn for lanes j0..j0+7 of a group (best keeps and boxes by V itself): the
    value before rolling of the first ``nout`` lanes to out, with the arithmetic of
    ``_kernels.group_pass`` (so the same numbers, bit for bit)."""
    fill_sources(V, j0, rp, p, G)
    yb_final_roll_max(A, G, p.nbox, p.src, p.add, p.ybon)
    yb_keep_stage_max(A, KEEP_ADD_C, KEEP_SUB_C)
    yb_keep_stage_max(A, KEEP_ADD_C, KEEP_SUB_C)
    yb_average_to_empty(A, KEEP_ADD_C, out, nout)
