# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Hot loops of the target-score objective: per boundary state, P(at least s more points).

The distribution objective of timpalpant/yahtzee: the value of a boundary state is a vector ``T[s]`` = the
probability of scoring at least ``s`` more points under the play that maximises that very
probability (a separate optimal policy for every ``s``). Three operations combine vectors:
scoring ``p`` points **shifts** (``T_before[s] = T_after[s - p]``, 1 where ``s <= p``),
rolling **averages** (probability-weighted add), choosing takes the **element-wise max**.

Storage (float32, one flat array): group ``g = mask12 * 3 + ystate`` (the layout of
:mod:`yamblab.oracle.yahtzee._kernels`) starts at ``off[g]`` and holds ``L`` lanes (upper subtotal
0..L-1, ``L = 1`` without an upper bonus) of ``width[g]`` entries ``s = 0 .. width[g] - 1``.
``width[g] - 1`` is the smaller of the table's ``max_points`` and an upper bound on the points
still to come from the group, so entries past a vector's end are exactly 0 (or beyond the
table). Truncating every vector at ``max_points`` is exact for the entries kept: a shift only
reads lower entries.

The within-turn pass is the expected-value kernel's (keeps averaged one die at a time,
the best keep by a recursion over sub-keeps) on vectors of a window of entries
``t0 .. t0 + W - 1``: the whole vector when building, one entry (``W = 1``) when playing
for one target.
"""

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t

include "yahtzee/_rules.pxi"

cnp.import_array()
_init_rule_tables()

cdef enum:
    KOFF5 = 210

cdef int BOX_MAX[13]
BOX_MAX[:] = [5, 10, 15, 20, 25, 30, 30, 30, 25, 30, 40, 50, 30]


cdef struct RP:
    int joker
    int upper_bonus
    int yahtzee_bonus


cdef inline int upper_max(int m12) noexcept nogil:
    cdef int f, s = 0
    for f in range(6):
        if (m12 >> f) & 1:
            s += 5 * (f + 1)
    return 63 if s > 63 else s


def max_points_left(int m12, int ys, bint upper_bonus, bint yahtzee_bonus):
    """An upper bound on the points still to come from group (mask12, ystate), int."""
    cdef int open13 = (~mask12_to_13(m12)) & 0x1FFF
    cdef int c, n = 0, s = 0, up = 0
    if ys != 0:
        open13 &= ~(1 << BOX_YAHTZEE)
    for c in range(13):
        if (open13 >> c) & 1:
            n += 1
            s += BOX_MAX[c]
            if c < 6:
                up = 1
    if upper_bonus and up:
        s += 35
    if yahtzee_bonus:
        if ys == 2:
            s += 100 * n
        elif ys == 0 and n > 1:
            s += 100 * (n - 1)
    return s


cdef inline void shifted_max(float* row, const float* base, int Wn, int d, int W) noexcept nogil:
    """row[i] = max(row[i], v(d + i)) with v(e) = 1 for e <= 0, base[e] for 0 < e < Wn, else 0."""
    cdef int i, i1, i2
    i1 = 1 - d
    if i1 < 0:
        i1 = 0
    if i1 > W:
        i1 = W
    for i in range(i1):
        row[i] = 1.0
    i2 = Wn - d
    if i2 > W:
        i2 = W
    for i in range(i1, i2):
        if base[d + i] > row[i]:
            row[i] = base[d + i]


cdef void f_stage(const float* T, const int64_t* off, const int* wid, RP rp, int m12, int ys, int u,
                  int t0, int W, float* F) noexcept nogil:
    """Final roll: F[r*W + i] = max over legal boxes of P(>= t0 + i more | score the box)."""
    cdef int open13 = (~mask12_to_13(m12)) & 0x1FFF
    cdef int r, c, i, face, lm, pts, ybon, b, nu, g, p
    cdef bint jk
    cdef float* row
    if ys != 0:
        open13 &= ~(1 << BOX_YAHTZEE)
    for r in range(252):
        row = F + r * W
        for i in range(W):
            row[i] = 0.0
        face = YFACE[r]
        lm = legal_box_mask(face, ys, open13, rp.joker)
        jk = joker_on(face, ys, open13, rp.joker)
        ybon = 100 if (face >= 0 and ys == 2 and rp.yahtzee_bonus) else 0
        for c in range(13):
            if not (lm >> c) & 1:
                continue
            pts = box_points(r, c, jk)
            nu = u
            b = 0
            if c < 6:
                if rp.upper_bonus:
                    nu = u + pts
                    if u < 63 and nu >= 63:
                        b = 35
                    if nu > 63:
                        nu = 63
                else:
                    nu = 0
                g = (m12 | (1 << c)) * 3 + ys
            elif c == BOX_YAHTZEE:
                g = m12 * 3 + (2 if pts == 50 else 1)
            else:
                g = (m12 | (1 << (c if c < 12 else 11))) * 3 + ys
            p = pts + b + ybon
            shifted_max(row, T + off[g] + nu * wid[g], wid[g], t0 - p, W)


cdef inline void average_keeps(float* A, int W) noexcept nogil:
    cdef int k, j
    cdef float* a
    cdef float* p0
    cdef float* p1
    cdef float* p2
    cdef float* p3
    cdef float* p4
    cdef float* p5
    for k in range(KOFF5 - 1, -1, -1):
        a = A + k * W
        p0 = A + KEEP_ADD_C[k][0] * W
        p1 = A + KEEP_ADD_C[k][1] * W
        p2 = A + KEEP_ADD_C[k][2] * W
        p3 = A + KEEP_ADD_C[k][3] * W
        p4 = A + KEEP_ADD_C[k][4] * W
        p5 = A + KEEP_ADD_C[k][5] * W
        for j in range(W):
            a[j] = (p0[j] + p1[j] + p2[j] + p3[j] + p4[j] + p5[j]) * <float>(1.0 / 6.0)


cdef inline void best_subkeep(const float* A, float* B, int W) noexcept nogil:
    cdef int k, f, j
    cdef float* b
    cdef const float* a
    cdef const float* s
    for j in range(W):
        B[j] = A[j]
    for k in range(1, 462):
        b = B + k * W
        a = A + k * W
        for j in range(W):
            b[j] = a[j]
        for f in range(6):
            if KEEP_SUB_C[k][f] >= 0:
                s = B + KEEP_SUB_C[k][f] * W
                for j in range(W):
                    if s[j] > b[j]:
                        b[j] = s[j]


cdef void state_pass(const float* T, const int64_t* off, const int* wid, RP rp, int m12, int ys, int u,
                     int t0, int W, float* A, float* B, float* E2out, float* E1out, float* out) noexcept nogil:
    """One turn from state (m12, ys, u) for entries t0..t0+W-1; writes the start-of-turn vector."""
    cdef int i
    f_stage(T, off, wid, rp, m12, ys, u, t0, W, A + KOFF5 * W)
    average_keeps(A, W)
    if E2out != NULL:
        for i in range(462 * W):
            E2out[i] = A[i]
    best_subkeep(A, B, W)
    for i in range(KOFF5 * W, 462 * W):
        A[i] = B[i]
    average_keeps(A, W)
    if E1out != NULL:
        for i in range(462 * W):
            E1out[i] = A[i]
    best_subkeep(A, B, W)
    for i in range(KOFF5 * W, 462 * W):
        A[i] = B[i]
    average_keeps(A, W)
    for i in range(W):
        out[i] = A[i]


def layout(bint upper_bonus, bint yahtzee_bonus, int max_points):
    """Offsets and widths of every group: ``(off int64 (12288,), width int32 (12288,), size)``."""
    off = np.zeros(4096 * 3, dtype=np.int64)
    wid = np.zeros(4096 * 3, dtype=np.int32)
    cdef int64_t pos = 0
    cdef int m, ys, L, w
    for m in range(4096):
        for ys in range(3):
            L = (upper_max(m) + 1) if upper_bonus else 1
            w = max_points_left(m, ys, upper_bonus, yahtzee_bonus)
            if w > max_points:
                w = max_points
            w += 1
            off[m * 3 + ys] = pos
            wid[m * 3 + ys] = w
            pos += L * w
    return off, wid, int(pos)


def solve(int joker, bint upper_bonus, bint yahtzee_bonus, int max_points, int n_threads=0,
          progress=None, int down_to=0):
    """Build the tail table by backward induction over layers of filled boxes.

    Args:
        joker: 0 forced, 1 free, 2 priority, 3 none; upper_bonus, yahtzee_bonus: as the rules.
        max_points: the largest ``s`` kept (targets up to this many points still to come).
        n_threads: OpenMP threads (0: every core this process may use).
        progress: optional callable(n_states_done) after each layer.
        down_to: solve layers of ``down_to`` .. 12 filled boxes only (0: the whole game;
            groups of lower layers are left 0; for tests).

    Returns:
        ``(table float32 (size,), off int64 (12288,), width int32 (12288,))``.
    """
    off_a, wid_a, size = layout(upper_bonus, yahtzee_bonus, max_points)
    table = np.zeros(size, dtype=np.float32)
    cdef float[::1] tv = table
    cdef int64_t[::1] off = off_a
    cdef int[::1] wid = wid_a
    cdef float* T = &tv[0]
    cdef RP rp
    rp.joker = joker
    rp.upper_bonus = upper_bonus
    rp.yahtzee_bonus = yahtzee_bonus
    cdef int n, i, m12, ys, u, L, g, ni
    cdef int WMAX = max_points + 1
    cdef float* A = NULL
    cdef float* B = NULL
    cdef int[:, ::1] items
    if n_threads <= 0:
        import os
        n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    from yamblab.oracle.yahtzee._kernels import layer_groups
    # the full card: nothing more to come, P(>= 0 more) = 1
    for ys in (1, 2):
        g = 4095 * 3 + ys
        L = 64 if upper_bonus else 1
        for u in range(L):
            T[off[g] + u * wid[g]] = 1.0
    for n in range(12, down_to - 1, -1):
        groups = layer_groups(n)
        its = []
        for m, y in groups.tolist():
            L = (upper_max(m) + 1) if upper_bonus else 1
            its.extend((m, y, uu) for uu in range(L))
        items = np.array(its, dtype=np.int32).reshape(-1, 3)
        ni = items.shape[0]
        with nogil, parallel(num_threads=n_threads):
            A = <float*> malloc(462 * WMAX * sizeof(float))
            B = <float*> malloc(462 * WMAX * sizeof(float))
            for i in prange(ni, schedule="dynamic", chunksize=8):
                m12 = items[i, 0]
                ys = items[i, 1]
                u = items[i, 2]
                g = m12 * 3 + ys
                state_pass(T, &off[0], &wid[0], rp, m12, ys, u, 0, wid[g], A, B, NULL, NULL,
                           T + off[g] + u * wid[g])
            free(A)
            free(B)
        if progress is not None:
            progress(ni)
    return table, off_a, wid_a


def turn_probabilities(const float[::1] table, const int64_t[::1] off, const int[::1] wid,
                       int joker, bint upper_bonus, bint yahtzee_bonus,
                       const long long[:, ::1] states, const long long[::1] need):
    """Keep values of a turn for one target per state: P(at least need[i] more points).

    Args:
        table, off, wid: a table from :func:`solve`.
        states: int64 (n, 3) boundary states (mask12, ystate, capped upper subtotal).
        need: int64 (n,) points still needed (targets minus points so far; <= max_points).

    Returns:
        ``(E1, E2, start)``: float32 (n, 462) probability after each keep with two / one
        rolls left, and float32 (n,) the probability at the start of the turn.
    """
    cdef Py_ssize_t n = states.shape[0], i
    E1 = np.empty((n, 462), dtype=np.float32)
    E2 = np.empty((n, 462), dtype=np.float32)
    start = np.empty(n, dtype=np.float32)
    cdef float[:, ::1] e1 = E1
    cdef float[:, ::1] e2 = E2
    cdef float[::1] st = start
    cdef RP rp
    rp.joker = joker
    rp.upper_bonus = upper_bonus
    rp.yahtzee_bonus = yahtzee_bonus
    cdef float A[462]
    cdef float B[462]
    cdef int u
    with nogil:
        for i in range(n):
            u = <int>states[i, 2] if upper_bonus else 0
            state_pass(&table[0], &off[0], &wid[0], rp, <int>states[i, 0], <int>states[i, 1], u,
                       <int>need[i], 1, A, B, &e2[i, 0], &e1[i, 0], &st[i])
    return E1, E2, start


def box_probabilities(const float[::1] table, const int64_t[::1] off, const int[::1] wid,
                      int joker, bint upper_bonus, bint yahtzee_bonus,
                      const long long[:, ::1] states, const long long[::1] rolls,
                      const long long[::1] need):
    """P(at least need[i] more points) after scoring roll ``rolls[i]`` in each box.

    Returns:
        float32 (n, 13): the probability, -1 where the box is not legal.
    """
    cdef Py_ssize_t n = states.shape[0], i
    out = np.full((n, 13), -1.0, dtype=np.float32)
    cdef float[:, ::1] o = out
    cdef int m12, ys, u, r, c, face, lm, open13, pts, b, nu, g, ybon
    cdef bint jk
    cdef float v[1]
    cdef const float* T = &table[0]
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
            jk = joker_on(face, ys, open13, joker)
            ybon = 100 if (face >= 0 and ys == 2 and yahtzee_bonus) else 0
            for c in range(13):
                if not (lm >> c) & 1:
                    continue
                pts = box_points(r, c, jk)
                nu = u
                b = 0
                if c < 6:
                    if upper_bonus:
                        nu = u + pts
                        if u < 63 and nu >= 63:
                            b = 35
                        if nu > 63:
                            nu = 63
                    else:
                        nu = 0
                    g = (m12 | (1 << c)) * 3 + ys
                elif c == BOX_YAHTZEE:
                    g = m12 * 3 + (2 if pts == 50 else 1)
                else:
                    g = (m12 | (1 << (c if c < 12 else 11))) * 3 + ys
                v[0] = 0.0
                shifted_max(v, T + off[g] + nu * wid[g], wid[g], <int>need[i] - (pts + b + ybon), 1)
                o[i, c] = v[0]
    return out
