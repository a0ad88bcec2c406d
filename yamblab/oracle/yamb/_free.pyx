# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Hot loops of the free-column Yamb oracle: the within-turn pass over lanes of one filled-row mask.

Boundary states of a single free column are grouped by the mask of filled rows. Inside a group
the **lanes** are the other state dimensions, laid out ``lane = mid * U[mask] + upper``:

* ``upper``: the upper sum so far, capped at the bonus threshold ``T`` (0..U-1; ``U = 1`` once
  every upper row is filled or when the bonus is not tracked);
* ``mid``: what the middle term Ones × (Max − Min) still needs, by which of Ones (bit 0),
  Max (bit 1), Min (bit 2) are filled (``mm``): nothing (1), the Ones index (nO), the Max index
  (nX), the Min index (nN), Ones × Max (nO·nX, ``o * nX + x``), Ones × Min (``o * nN + n``),
  the difference Max − Min (``d - dlo``, nD values; clamped at 0 when the middle term is), or
  settled (1).

The within-turn pass ("How The AI Works") runs once per (mask, chunk of lanes) on contiguous lane vectors,
as in :mod:`yamblab.oracle.yahtzee._kernels`: keep values are averaged one die at a time (6 additions
per keep, ``keep_add``) and the best keep inside a roll comes from the recursion
``B[k] = max(A[k], max_f B[k - f])`` over sub-keeps (``keep_sub``). The kernel knows no row's
scoring: the caller passes, per row, the sorted distinct scores (``xval``) and per roll number
and roll the index of the roll's score (``xi``), built from the reference scoring.

Table layout: one float64 vector ``V``, the lanes of mask ``m`` at ``V[off[m] : off[m] + U[m] *
M[m]]`` (``off[m] = -1`` for masks not solved); values are expected points still to come.
"""

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY

cnp.import_array()


cdef struct Params:
    int R
    int n_rolls
    int n_keeps
    int koff            # first full keep (= the rolls, in roll order)
    int* keep_add       # (koff, 6): keep + one die of face f
    int* keep_sub       # (n_keeps, 6): keep - one die of face f, -1 if none
    double* p0          # (n_rolls,): P(roll) when every die is thrown
    int* xi             # (max_rolls, n_rolls, R): index of the roll's score in xval[row]
    int max_rolls
    int* xval           # (R, XMAX): sorted distinct scores of each row
    int XMAX
    int* nx             # (R,)
    int* gbase          # (R,): first G row of each row's scores
    int n_g
    int* varies         # (R,): 1 if the row's score depends on the roll number
    int rolls
    int last_rolls
    int T
    int bonus
    int track           # whether the upper sum is tracked (bonus > 0)
    int nO
    int nX
    int nN
    int dlo
    int clamp
    long long* off
    int* U
    int* M


cdef inline int popcount(int m) noexcept nogil:
    cdef int c = 0
    while m:
        m &= m - 1
        c += 1
    return c


cdef inline double next_value(const Params* p, const double* V, int mask, int c, int xi_,
                              int m, int u) noexcept nogil:
    """Points earned by scoring the row's score number xi_ in row c, plus V of the next state."""
    cdef int nm = mask | (1 << c)
    cdef int x = p.xval[c * p.XMAX + xi_]
    cdef int Un = p.U[nm]
    cdef int mm = (mask & 1) | (((mask >> 6) & 1) << 1) | (((mask >> 7) & 1) << 2)
    cdef int pts = 0, nu = 0, nmid = m, o_i = 0, x_i = 0, n_i = 0, d = 0, newmm, mid
    if c < 6 or c > 7:
        pts += x                        # upper and combination rows count; Max, Min do not
    if c < 6:
        if p.track and u < p.T and u + x >= p.T:
            pts += p.bonus
    if p.track and Un > 1:
        nu = u + (x if c < 6 else 0)
        if nu > p.T:
            nu = p.T
    if c == 0 or c == 6 or c == 7:
        if mm == 1:
            o_i = m
        elif mm == 2:
            x_i = m
        elif mm == 4:
            n_i = m
        elif mm == 3:
            o_i = m // p.nX
            x_i = m % p.nX
        elif mm == 5:
            o_i = m // p.nN
            n_i = m % p.nN
        elif mm == 6:
            d = p.dlo + m
        if c == 0:
            o_i = xi_
            newmm = mm | 1
        elif c == 6:
            x_i = xi_
            newmm = mm | 2
        else:
            n_i = xi_
            newmm = mm | 4
        if (newmm & 6) == 6 and mm != 6 and mm != 7:
            d = p.xval[6 * p.XMAX + x_i] - p.xval[7 * p.XMAX + n_i]
            if p.clamp and d < 0:
                d = 0
        if newmm == 1:
            nmid = o_i
        elif newmm == 2:
            nmid = x_i
        elif newmm == 4:
            nmid = n_i
        elif newmm == 3:
            nmid = o_i * p.nX + x_i
        elif newmm == 5:
            nmid = o_i * p.nN + n_i
        elif newmm == 6:
            nmid = d - p.dlo
        else:
            nmid = 0
            mid = p.xval[o_i] * d
            if p.clamp and mid < 0:
                mid = 0
            pts += mid
    return <double>pts + V[p.off[nm] + nmid * Un + nu]


cdef inline void average_keeps(const Params* p, double* A, int nl) noexcept nogil:
    """A[k] = mean over the next die's face of A[k + f], for keeps of n-1 dice down to 0."""
    cdef int k, j
    cdef double* a
    cdef double* q0
    cdef double* q1
    cdef double* q2
    cdef double* q3
    cdef double* q4
    cdef double* q5
    cdef int* ka
    for k in range(p.koff - 1, -1, -1):
        ka = p.keep_add + 6 * k
        a = A + k * nl
        q0 = A + ka[0] * nl
        q1 = A + ka[1] * nl
        q2 = A + ka[2] * nl
        q3 = A + ka[3] * nl
        q4 = A + ka[4] * nl
        q5 = A + ka[5] * nl
        for j in range(nl):
            a[j] = (q0[j] + q1[j] + q2[j] + q3[j] + q4[j] + q5[j]) * (1.0 / 6.0)


cdef inline void best_subkeep(const Params* p, const double* A, double* B, int nl) noexcept nogil:
    """B[k] = max over sub-keeps k' of k of A[k'] (B of a roll is its best keep's value)."""
    cdef int k, f, j, s
    cdef double* b
    cdef const double* a
    cdef const double* q
    for j in range(nl):
        B[j] = A[j]
    for k in range(1, p.n_keeps):
        b = B + k * nl
        a = A + k * nl
        for j in range(nl):
            b[j] = a[j]
        for f in range(6):
            s = p.keep_sub[6 * k + f]
            if s >= 0:
                q = B + s * nl
                for j in range(nl):
                    b[j] = q[j] if q[j] > b[j] else b[j]


cdef void group_pass(const Params* p, const double* V, int mask, int l0, int nl,
                     double* A, double* B, double* G, double* Kout, double* out) noexcept nogil:
    """One turn for lanes l0..l0+nl-1 of ``mask``; the value before the first roll goes to out.

    A, B: (n_keeps * nl) scratch; G: (n_g * nl) scratch, left holding the value of every
    (row, score) for the lanes. Kout (or NULL): the keep values of every keep decision,
    (rolls - 1, n_keeps, nl), decision s = after roll s + 1.
    """
    cdef int Uc = p.U[mask]
    cdef int c, x, j, r, s, L, lane, m, u, k
    cdef double* g
    cdef double* row
    cdef double* b
    cdef double acc
    cdef int* xir
    for c in range(p.R):
        if (mask >> c) & 1:
            continue
        for x in range(p.nx[c]):
            g = G + (p.gbase[c] + x) * nl
            for j in range(nl):
                lane = l0 + j
                m = lane // Uc
                u = lane - m * Uc
                g[j] = next_value(p, V, mask, c, x, m, u)
    L = p.last_rolls if popcount(mask) == p.R - 1 else p.rolls
    # Last roll: the best row for every roll.
    for r in range(p.n_rolls):
        row = A + (p.koff + r) * nl
        for j in range(nl):
            row[j] = -INFINITY
        xir = p.xi + ((L - 1) * p.n_rolls + r) * p.R
        for c in range(p.R):
            if (mask >> c) & 1:
                continue
            g = G + (p.gbase[c] + xir[c]) * nl
            for j in range(nl):
                row[j] = g[j] if g[j] > row[j] else row[j]
    for s in range(L - 2, -1, -1):
        average_keeps(p, A, nl)
        if Kout != NULL:
            for k in range(p.n_keeps * nl):
                Kout[s * p.n_keeps * nl + k] = A[k]
        best_subkeep(p, A, B, nl)
        for r in range(p.n_rolls):
            row = A + (p.koff + r) * nl
            b = B + (p.koff + r) * nl
            for j in range(nl):
                row[j] = b[j]
            xir = p.xi + (s * p.n_rolls + r) * p.R
            for c in range(p.R):
                if ((mask >> c) & 1) or not p.varies[c]:
                    continue
                g = G + (p.gbase[c] + xir[c]) * nl
                for j in range(nl):
                    row[j] = g[j] if g[j] > row[j] else row[j]
    for j in range(nl):
        out[j] = 0.0
    for r in range(p.n_rolls):
        row = A + (p.koff + r) * nl
        acc = p.p0[r]
        for j in range(nl):
            out[j] += acc * row[j]


cdef class Tables:
    """The arrays a pass reads (kept alive here; ``params`` points into them)."""
    cdef Params params
    cdef object keep
    cdef public int n_g

    def __init__(self, int R, int[:, ::1] keep_add, int[:, ::1] keep_sub, double[::1] p0,
                 int[:, :, ::1] xi, int[:, ::1] xval, int[::1] nx, int[::1] gbase, int[::1] varies,
                 int rolls, int last_rolls, int T, int bonus, int track, int nO, int nX, int nN,
                 int dlo, int clamp, long long[::1] off, int[::1] U, int[::1] M):
        self.keep = (keep_add, keep_sub, p0, xi, xval, nx, gbase, varies, off, U, M)
        p = &self.params
        p.R = R
        p.n_keeps = keep_sub.shape[0]
        p.koff = keep_add.shape[0]
        p.n_rolls = p.n_keeps - p.koff
        p.keep_add = &keep_add[0, 0]
        p.keep_sub = &keep_sub[0, 0]
        p.p0 = &p0[0]
        p.max_rolls = xi.shape[0]
        p.xi = &xi[0, 0, 0]
        p.XMAX = xval.shape[1]
        p.xval = &xval[0, 0]
        p.nx = &nx[0]
        p.gbase = &gbase[0]
        p.n_g = int(np.asarray(nx).sum())
        self.n_g = p.n_g
        p.varies = &varies[0]
        p.rolls = rolls
        p.last_rolls = last_rolls
        p.T = T
        p.bonus = bonus
        p.track = track
        p.nO = nO
        p.nX = nX
        p.nN = nN
        p.dlo = dlo
        p.clamp = clamp
        p.off = &off[0]
        p.U = &U[0]
        p.M = &M[0]


def solve(Tables tables, double[::1] V, int[:, ::1] items, long long[::1] layer_ends,
          int chunk, int n_threads=1, progress=None):
    """Fill ``V`` by backward induction, one layer of filled-row masks at a time.

    Args:
        tables: the rule tables and the layout.
        V: float64 (n_lanes,) value table; the full column's lane must hold 0 already.
        items: int32 (n_items, 3) of (mask, first lane, lane count ≤ chunk), layers in order
            (most rows filled first).
        layer_ends: int64 (n_layers,) end of each layer in ``items``.
        chunk: the largest lane count of an item.
        n_threads: OpenMP threads (≥ 1).
        progress: optional callable(layer number) after each layer.
    """
    cdef Params* p = &tables.params
    cdef double* Vp = &V[0]
    cdef Py_ssize_t li, start = 0, end, i
    cdef int mask, l0, nl
    cdef double* A = NULL
    cdef double* B = NULL
    cdef double* G = NULL
    cdef int nk = p.n_keeps, ng = p.n_g
    for li in range(layer_ends.shape[0]):
        end = layer_ends[li]
        with nogil, parallel(num_threads=n_threads):
            A = <double*> malloc(nk * chunk * sizeof(double))
            B = <double*> malloc(nk * chunk * sizeof(double))
            G = <double*> malloc(ng * chunk * sizeof(double))
            for i in prange(start, end, schedule="dynamic", chunksize=1):
                mask = items[i, 0]
                l0 = items[i, 1]
                nl = items[i, 2]
                group_pass(p, Vp, mask, l0, nl, A, B, G, NULL, Vp + p.off[mask] + l0)
            free(A)
            free(B)
            free(G)
        start = end
        if progress is not None:
            progress(li)


def lane_pass(Tables tables, const double[::1] V, int mask, int lane):
    """The turn of one boundary state: row values and keep values.

    Returns:
        ``(value, G, K)``: the value before the first roll (float); float64 (n_g,) points
        plus value after for every (row, score) (rows filled: garbage); float64
        (rolls - 1, n_keeps) keep values per keep decision (expected points still to come).
    """
    cdef Params* p = &tables.params
    cdef int L = p.last_rolls if popcount(mask) == p.R - 1 else p.rolls
    A = np.empty(p.n_keeps)
    B = np.empty(p.n_keeps)
    G = np.zeros(p.n_g)
    K = np.empty((max(L - 1, 0), p.n_keeps))
    cdef double[::1] a = A, b = B, g = G
    cdef double[:, ::1] k = K
    cdef double out = 0.0
    cdef double* kp = &k[0, 0] if L > 1 else NULL
    group_pass(p, &V[0], mask, lane, 1, &a[0], &b[0], &g[0], kp, &out)
    return out, G, K
