# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Hot loops of the Yahtzee oracle: the within-turn pass over lanes of upper subtotals.

Table layout (float64, C order): ``V[mask12, ystate, upper]`` of shape (4096, 3, 64): the
expected points still to come from a boundary state, where ``mask12`` holds the 12
non-Yahtzee boxes (Chance at bit 11), ``ystate`` the Yahtzee box (0 open, 1 zero, 2 fifty)
and ``upper`` the upper subtotal capped at 63.

The within-turn pass ("How The AI Works") for one (mask12, ystate) group runs on a vector of lanes,
one per upper subtotal, stored contiguously (the fast layout: the compiler vectorises the
inner loops). Keep values are averaged one die at a time (6 additions per keep), and the best keep
inside a roll is found by the recursion ``M[k] = max(E[k], max_f M[k - f])`` over sub-keeps.
"""

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY

include "yahtzee/_rules.pxi"

cnp.import_array()
_init_rule_tables()

cdef enum:
    LMAX = 64
    KOFF5 = 210


cdef struct RuleParams:
    int joker
    int upper_bonus
    int yahtzee_bonus


cdef inline int upper_max(int m12) noexcept nogil:
    """Largest capped upper subtotal reachable with the filled upper boxes of m12."""
    cdef int f, s = 0
    for f in range(6):
        if (m12 >> f) & 1:
            s += 5 * (f + 1)
    return 63 if s > 63 else s


cdef void f_stage(const double* V, int m12, int ys, int u0, int L, RuleParams rp,
                  double* F, double* G) noexcept nogil:
    """Final-roll values F[r*L + j] = max over legal boxes (points + value of next state)."""
    cdef int open13 = (~mask12_to_13(m12)) & 0x1FFF
    cdef int c, n, j, r, s, b, nu, u, face, lm, pts, ybon
    cdef bint jk
    cdef const double* Vn
    cdef const double* Vlow[13]
    cdef const double* Vy0 = NULL
    cdef const double* Vy50 = NULL
    cdef double* row
    cdef double* g
    cdef double v
    if ys != 0:
        open13 &= ~(1 << BOX_YAHTZEE)
    else:
        Vy0 = V + (m12 * 3 + 1) * LMAX
        Vy50 = V + (m12 * 3 + 2) * LMAX
    # Upper boxes: the shifted next-state vectors for each count of the face.
    for c in range(6):
        if not (open13 >> c) & 1:
            continue
        Vn = V + ((m12 | (1 << c)) * 3 + ys) * LMAX
        for n in range(6):
            s = (c + 1) * n
            g = G + (c * 6 + n) * L
            for j in range(L):
                u = u0 + j
                b = 0
                if rp.upper_bonus:
                    nu = u + s
                    if u < 63 and nu >= 63:
                        b = 35
                    if nu > 63:
                        nu = 63
                else:
                    nu = 0
                g[j] = <double>(s + b) + Vn[nu]
    for c in range(6, 13):
        if c != BOX_YAHTZEE and (open13 >> c) & 1:
            Vlow[c] = V + ((m12 | (1 << (c if c < 12 else 11))) * 3 + ys) * LMAX + u0
    for r in range(252):
        row = F + r * L
        for j in range(L):
            row[j] = -INFINITY
        face = YFACE[r]
        lm = legal_box_mask(face, ys, open13 | ((1 << BOX_YAHTZEE) if ys == 0 else 0), rp.joker)
        jk = joker_on(face, ys, open13, rp.joker)
        ybon = 100 if (face >= 0 and ys == 2 and rp.yahtzee_bonus) else 0
        for c in range(13):
            if not (lm >> c) & 1:
                continue
            pts = box_points(r, c, jk)
            if c < 6:
                g = G + (c * 6 + pts // (c + 1)) * L
                for j in range(L):
                    if g[j] > row[j]:
                        row[j] = g[j]
            elif c == BOX_YAHTZEE:
                Vn = (Vy50 if pts == 50 else Vy0) + u0
                for j in range(L):
                    v = <double>pts + Vn[j]
                    if v > row[j]:
                        row[j] = v
            else:
                Vn = Vlow[c]
                for j in range(L):
                    v = <double>pts + Vn[j]
                    if v > row[j]:
                        row[j] = v
        if ybon:
            for j in range(L):
                row[j] += ybon


cdef inline void average_keeps(double* A, int L) noexcept nogil:
    """A[k] = mean over the next die's face of A[k + f], for keeps of 4 dice down to 0."""
    cdef int k, j
    cdef double* a
    cdef double* p0
    cdef double* p1
    cdef double* p2
    cdef double* p3
    cdef double* p4
    cdef double* p5
    for k in range(KOFF5 - 1, -1, -1):
        a = A + k * L
        p0 = A + KEEP_ADD_C[k][0] * L
        p1 = A + KEEP_ADD_C[k][1] * L
        p2 = A + KEEP_ADD_C[k][2] * L
        p3 = A + KEEP_ADD_C[k][3] * L
        p4 = A + KEEP_ADD_C[k][4] * L
        p5 = A + KEEP_ADD_C[k][5] * L
        for j in range(L):
            a[j] = (p0[j] + p1[j] + p2[j] + p3[j] + p4[j] + p5[j]) / 6.0


cdef inline void best_subkeep(const double* A, double* B, int L) noexcept nogil:
    """B[k] = max over sub-keeps k' of k of A[k'] (B of a roll is the best keep's value)."""
    cdef int k, f, j
    cdef double* b
    cdef const double* a
    cdef const double* s
    for j in range(L):
        B[j] = A[j]
    for k in range(1, 462):
        b = B + k * L
        a = A + k * L
        for j in range(L):
            b[j] = a[j]
        for f in range(6):
            if KEEP_SUB_C[k][f] >= 0:
                s = B + KEEP_SUB_C[k][f] * L
                for j in range(L):
                    if s[j] > b[j]:
                        b[j] = s[j]


cdef void group_pass(const double* V, int m12, int ys, int u0, int L, RuleParams rp,
                     double* A, double* B, double* G, double* E2out, double* E1out,
                     double* out) noexcept nogil:
    """One turn for lanes u0..u0+L-1 of group (m12, ys); writes the value before rolling to out.

    If E2out / E1out are not NULL, copies the keep values of the second and first keep
    decisions there (462 * L each).
    """
    cdef int i, j
    f_stage(V, m12, ys, u0, L, rp, A + KOFF5 * L, G)
    average_keeps(A, L)                     # A: value of each keep with one roll left
    if E2out != NULL:
        for i in range(462 * L):
            E2out[i] = A[i]
    best_subkeep(A, B, L)                   # B rolls: K2 (best after the second roll)
    for i in range(KOFF5 * L, 462 * L):
        A[i] = B[i]
    average_keeps(A, L)                     # A: value of each keep with two rolls left
    if E1out != NULL:
        for i in range(462 * L):
            E1out[i] = A[i]
    best_subkeep(A, B, L)                   # B rolls: K1 (best after the first roll)
    for i in range(KOFF5 * L, 462 * L):
        A[i] = B[i]
    average_keeps(A, L)                     # A[0]: the empty keep = value before rolling
    for j in range(L):
        out[j] = A[j]


def layer_groups(int n_filled):
    """The (mask12, ystate) groups whose card has n_filled boxes filled, as int32 (n, 2)."""
    out = []
    for m in range(4096):
        pc = bin(m).count("1")
        if pc == n_filled:
            out.append((m, 0))
        if pc + 1 == n_filled:
            out.append((m, 1))
            out.append((m, 2))
    return np.array(out, dtype=np.int32).reshape(-1, 2)


include "_blocked_turn.pxi"


def solve(int joker, bint upper_bonus, bint yahtzee_bonus, int n_threads=0, progress=None):
    """Build the exact table for a Yahtzee variant by backward induction over boundary states.

    Args:
        joker: 0 forced, 1 free, 2 priority, 3 none.
        upper_bonus, yahtzee_bonus: whether those bonuses are paid.
        n_threads: OpenMP threads (0: all cores).
        progress: optional callable(n_groups_done) called after each layer.

    Returns:
        float64 array (4096, 3, 64): expected points still to come (entries beyond the largest
        reachable upper subtotal of a mask are NaN).
    """
    cdef cnp.ndarray[cnp.float64_t, ndim=3] table = np.full((4096, 3, 64), np.nan)
    cdef double* V = <double*> table.data
    cdef RuleParams rp
    rp.joker = joker
    rp.upper_bonus = upper_bonus
    rp.yahtzee_bonus = yahtzee_bonus
    cdef int[:, :] groups
    cdef int n, i, m12, ys, L, ng, j, b
    cdef double* A = NULL
    cdef double* G = NULL
    cdef TurnPlan* plan = NULL
    if n_threads <= 0:
        import os
        n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # Full card: nothing left to earn.
    table[4095, 1:, :] = 0.0
    for n in range(12, -1, -1):
        groups = layer_groups(n)
        ng = groups.shape[0]
        with nogil, parallel(num_threads=n_threads):
            # 64-byte aligned rows of 8 doubles (the vector type's alignment)
            A = <double*> aligned_alloc(64, 462 * BLOCK * sizeof(double))
            G = <double*> aligned_alloc(64, NSRC * BLOCK * sizeof(double))
            plan = <TurnPlan*> malloc(sizeof(TurnPlan))
            for i in prange(ng, schedule="dynamic", chunksize=4):
                m12 = groups[i, 0]
                ys = groups[i, 1]
                L = (upper_max(m12) + 1) if upper_bonus else 1
                make_plan(m12, ys, rp, plan)
                b = 0
                while b < L:
                    block_build(V, b, rp, plan, A, G, V + (m12 * 3 + ys) * LMAX + b,
                                (L - b) if L - b < BLOCK else BLOCK)
                    b = b + BLOCK
                if not upper_bonus:
                    for j in range(1, 64):
                        V[(m12 * 3 + ys) * LMAX + j] = V[(m12 * 3 + ys) * LMAX]
            free(A)
            free(G)
            free(plan)
        if progress is not None:
            progress(ng)
    return table


def turn_solutions(const double[:, :, ::1] V, int joker, bint upper_bonus, bint yahtzee_bonus,
                   const long long[:, ::1] states, double[::1] start_values=None):
    """Keep values of the two keep decisions of a turn, for many boundary states.

    Args:
        V: valuation table (4096, 3, 64) float64 (the oracle table, or any valuation).
        states: int64 (n, 3) of (mask12, ystate, upper).
        start_values: optional float64 (n,) filled with the value of each turn before its
            first roll (``Σ_r P(r) · max_k E1[k]``, the pass's last step).

    Returns:
        ``(E1, E2)``: float64 arrays (n, 462). ``E1[i, k]`` is the expected points still to
        come (this turn included) after holding keep ``k`` with two rolls left;
        ``E2[i, k]`` the same with one roll left.

    Raises:
        ValueError: ``start_values`` of another length than ``states``.
    """
    if start_values is not None and start_values.shape[0] != states.shape[0]:
        raise ValueError(f"start_values has {start_values.shape[0]} entries for {states.shape[0]} states")
    cdef Py_ssize_t n = states.shape[0], i
    E1 = np.empty((n, 462), dtype=np.float64)
    E2 = np.empty((n, 462), dtype=np.float64)
    cdef double[:, ::1] e1 = E1
    cdef double[:, ::1] e2 = E2
    cdef RuleParams rp
    rp.joker = joker
    rp.upper_bonus = upper_bonus
    rp.yahtzee_bonus = yahtzee_bonus
    cdef double* A = <double*> malloc(462 * sizeof(double))
    cdef double* B = <double*> malloc(462 * sizeof(double))
    cdef double* G = <double*> malloc(36 * sizeof(double))
    cdef double out[1]
    cdef int u
    try:
        with nogil:
            for i in range(n):
                u = <int>states[i, 2] if upper_bonus else 0
                group_pass(&V[0, 0, 0], <int>states[i, 0], <int>states[i, 1], u, 1, rp,
                           A, B, G, &e2[i, 0], &e1[i, 0], out)
                if start_values is not None:
                    start_values[i] = out[0]
    finally:
        free(A)
        free(B)
        free(G)
    return E1, E2


def box_values(const double[:, :, ::1] V, int joker, bint upper_bonus, bint yahtzee_bonus,
               const long long[:, ::1] states, const long long[::1] rolls):
    """Value of scoring each box: points now plus the table's value of the next state.

    Args:
        V: valuation table (4096, 3, 64) float64.
        states: int64 (n, 3) of (mask12, ystate, upper); rolls: int64 (n,) roll indices.

    Returns:
        float64 (n, 13): points (with bonuses) plus ``V`` of the next state; ``-inf`` where the
        box is not legal.
    """
    cdef Py_ssize_t n = states.shape[0], i
    out = np.full((n, 13), -np.inf)
    cdef double[:, ::1] o = out
    cdef int m12, ys, u, r, c, face, lm, open13, pts, s, b, nu, nm, nys, ybon
    cdef bint jk
    with nogil:
        for i in range(n):
            m12 = <int>states[i, 0]
            ys = <int>states[i, 1]
            u = <int>states[i, 2] if upper_bonus else 0
            r = <int>rolls[i]
            open13 = (~mask12_to_13(m12)) & 0x1FFF
            if ys != 0:
                open13 &= ~(1 << BOX_YAHTZEE)
            face = YFACE[r]
            lm = legal_box_mask(face, ys, open13, joker)
            jk = joker_on(face, ys, open13 & ~(1 << BOX_YAHTZEE), joker)
            ybon = 100 if (face >= 0 and ys == 2 and yahtzee_bonus) else 0
            for c in range(13):
                if not (lm >> c) & 1:
                    continue
                pts = box_points(r, c, jk)
                if c < 6:
                    b = 0
                    if upper_bonus:
                        nu = u + pts
                        if u < 63 and nu >= 63:
                            b = 35
                        if nu > 63:
                            nu = 63
                    else:
                        nu = 0
                    o[i, c] = (<double>(pts + b) + V[m12 | (1 << c), ys, nu]) + ybon
                elif c == BOX_YAHTZEE:
                    o[i, c] = (<double>pts + V[m12, 2 if pts == 50 else 1, u]) + ybon
                else:
                    nm = m12 | (1 << (c if c < 12 else 11))
                    o[i, c] = (<double>pts + V[nm, ys, u]) + ybon
    return out


cdef void f_stage_eval(const double* W, const double* T, int m12, int ys, int L, RuleParams rp,
                       double* FW, double* FT, double* GW, double* GT) noexcept nogil:
    """Final roll of a turn-perfect agent: box chosen by W (ties to the first box in card
    order), valued by T. Lanes are upper subtotals 0..L-1."""
    cdef int open13 = (~mask12_to_13(m12)) & 0x1FFF
    cdef int c, n, j, r, s, b, nu, face, lm, pts, ybon, off
    cdef bint jk
    cdef const double* Wn
    cdef const double* Tn
    cdef double* rw
    cdef double* rt
    cdef double* gw
    cdef double* gt
    cdef double wv
    if ys != 0:
        open13 &= ~(1 << BOX_YAHTZEE)
    for c in range(6):
        if not (open13 >> c) & 1:
            continue
        off = ((m12 | (1 << c)) * 3 + ys) * LMAX
        for n in range(6):
            s = (c + 1) * n
            gw = GW + (c * 6 + n) * L
            gt = GT + (c * 6 + n) * L
            for j in range(L):
                b = 0
                if rp.upper_bonus:
                    nu = j + s
                    if j < 63 and nu >= 63:
                        b = 35
                    if nu > 63:
                        nu = 63
                else:
                    nu = 0
                gw[j] = <double>(s + b) + W[off + nu]
                gt[j] = <double>(s + b) + T[off + nu]
    for r in range(252):
        rw = FW + r * L
        rt = FT + r * L
        for j in range(L):
            rw[j] = -INFINITY
            rt[j] = -INFINITY
        face = YFACE[r]
        lm = legal_box_mask(face, ys, open13, rp.joker)
        jk = joker_on(face, ys, open13, rp.joker)
        ybon = 100 if (face >= 0 and ys == 2 and rp.yahtzee_bonus) else 0
        for c in range(13):
            if not (lm >> c) & 1:
                continue
            pts = box_points(r, c, jk)
            if c < 6:
                gw = GW + (c * 6 + pts // (c + 1)) * L
                gt = GT + (c * 6 + pts // (c + 1)) * L
                for j in range(L):
                    if gw[j] > rw[j]:
                        rw[j] = gw[j]
                        rt[j] = gt[j]
            else:
                if c == BOX_YAHTZEE:
                    off = (m12 * 3 + (2 if pts == 50 else 1)) * LMAX
                else:
                    off = ((m12 | (1 << (c if c < 12 else 11))) * 3 + ys) * LMAX
                for j in range(L):
                    wv = <double>pts + W[off + j]
                    if wv > rw[j]:
                        rw[j] = wv
                        rt[j] = <double>pts + T[off + j]
        if ybon:
            for j in range(L):
                rw[j] += ybon
                rt[j] += ybon


cdef void choose_keeps(const double* AW, const double* AT, double* BW, double* BT, int L) noexcept nogil:
    """For each roll, the keep with the best W value (ties to the lowest keep index), valued by T.
    Writes the results into the roll rows (210 + r) of BW / BT."""
    cdef int r, i, k, j
    cdef double* bw
    cdef double* bt
    cdef const double* aw
    cdef const double* at
    for r in range(252):
        bw = BW + (KOFF5 + r) * L
        bt = BT + (KOFF5 + r) * L
        for j in range(L):
            bw[j] = -INFINITY
            bt[j] = -INFINITY
        for i in range(NSUBK[r]):
            k = SUBK[r][i]
            aw = AW + k * L
            at = AT + k * L
            for j in range(L):
                if aw[j] > bw[j]:
                    bw[j] = aw[j]
                    bt[j] = at[j]


def evaluate_policy(const double[:, :, ::1] W, int joker, bint upper_bonus, bint yahtzee_bonus,
                    int n_threads=0, progress=None):
    """Exact policy evaluation of the turn-perfect agent against valuation W (the Best Values post).

    The agent plays every turn exactly for the valuation W (every keep and box maximises
    points now plus W of the next boundary state; ties go to the first box in card order and
    to the lowest keep index); this backward pass follows its choices with the true rewards.

    Args:
        W: float64 (4096, 3, 64) valuation (the oracle table, zeros for greedy, a formula...).

    Returns:
        float64 (4096, 3, 64): the agent's exact expected points still to come.
    """
    cdef cnp.ndarray[cnp.float64_t, ndim=3] table = np.full((4096, 3, 64), np.nan)
    cdef double* T = <double*> table.data
    cdef const double* Wp = &W[0, 0, 0]
    cdef RuleParams rp
    rp.joker = joker
    rp.upper_bonus = upper_bonus
    rp.yahtzee_bonus = yahtzee_bonus
    cdef int[:, :] groups
    cdef int n, i, m12, ys, L, ng, j, stage
    cdef double* AW = NULL
    cdef double* AT = NULL
    cdef double* BW = NULL
    cdef double* BT = NULL
    cdef double* GW = NULL
    cdef double* GT = NULL
    if n_threads <= 0:
        import os
        n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    table[4095, 1:, :] = 0.0
    for n in range(12, -1, -1):
        groups = layer_groups(n)
        ng = groups.shape[0]
        with nogil, parallel(num_threads=n_threads):
            AW = <double*> malloc(462 * LMAX * sizeof(double))
            AT = <double*> malloc(462 * LMAX * sizeof(double))
            BW = <double*> malloc(462 * LMAX * sizeof(double))
            BT = <double*> malloc(462 * LMAX * sizeof(double))
            GW = <double*> malloc(36 * LMAX * sizeof(double))
            GT = <double*> malloc(36 * LMAX * sizeof(double))
            for i in prange(ng, schedule="dynamic", chunksize=4):
                m12 = groups[i, 0]
                ys = groups[i, 1]
                L = (upper_max(m12) + 1) if upper_bonus else 1
                f_stage_eval(Wp, T, m12, ys, L, rp, AW + KOFF5 * L, AT + KOFF5 * L, GW, GT)
                for stage in range(2):
                    average_keeps(AW, L)
                    average_keeps(AT, L)
                    choose_keeps(AW, AT, BW, BT, L)
                    for j in range(KOFF5 * L, 462 * L):
                        AW[j] = BW[j]
                        AT[j] = BT[j]
                average_keeps(AT, L)
                for j in range(L):
                    T[(m12 * 3 + ys) * LMAX + j] = AT[j]
                if not upper_bonus:
                    for j in range(1, 64):
                        T[(m12 * 3 + ys) * LMAX + j] = AT[0]
            free(AW)
            free(AT)
            free(BW)
            free(BT)
            free(GW)
            free(GT)
        if progress is not None:
            progress(ng)
    return table
