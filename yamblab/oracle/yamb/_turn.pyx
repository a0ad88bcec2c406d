# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled loops of Yamb's per-turn pass (:mod:`yamblab.oracle.yamb.turn`): the best box of
every roll, and the within-turn recursion over the dice lattice (5 or 6 dice).

Keeps are ordered by size (the rolls, the full-size keeps, last), as in
:func:`yamblab.games.dice6.dice_tables`. The lattice tables come from :mod:`yamblab.games.dice6`:
``up[k, f]`` the keep one die of face f larger (keeps smaller than a roll), ``down[k, f]`` the keep
one die of face f smaller (the empty keep where there is no such die); the recursions over them
are the ones its kernels use (``games/_lattice.pxi``).
"""

import numpy as np

include "_lattice.pxi"


def best_box(const double[:, :, :, ::1] W, const long long[:, :, ::1] ST, const unsigned char[:, :, :, ::1] legal,
             double neg):
    """The best box value of every roll at every roll number, over the legal boxes only.

    Args:
        W: float64 (B, C, R, smax + 1) box values; ST: int64 (R, L, n_rolls) the score of each roll
            in each row at roll j (within 0..smax); legal: bool as uint8 (B, C, R, L).
        neg: the value where no box is legal.

    Returns:
        float64 (B, L, n_rolls): max over legal (c, r) of ``W[b, c, r, ST[r, j, roll]]``.

    Raises:
        ValueError: mismatched shapes.
    """
    cdef Py_ssize_t B = W.shape[0], C = W.shape[1], R = W.shape[2], NS = W.shape[3]
    cdef Py_ssize_t L = ST.shape[1], NR = ST.shape[2], b, c, r, j, q
    if ST.shape[0] != R or legal.shape[0] != B or legal.shape[1] != C or legal.shape[2] != R \
            or legal.shape[3] != L:
        raise ValueError("W (B, C, R, s), ST (R, L, n_rolls) and legal (B, C, R, L) do not match")
    out = np.full((B, L, NR), neg, dtype=np.float64)
    cdef double[:, :, ::1] o = out
    cdef const double* w
    cdef const long long* s
    cdef double* row
    cdef double x
    with nogil:
        for b in range(B):
            for c in range(C):
                for r in range(R):
                    w = &W[b, c, r, 0]
                    for j in range(L):
                        if not legal[b, c, r, j]:
                            continue
                        s = &ST[r, j, 0]
                        row = &o[b, j, 0]
                        for q in range(NR):
                            x = w[s[q]]
                            if x > row[q]:
                                row[q] = x
    return out


def turn_dp(const double[:, :, ::1] best, best_pure, const long long[:, ::1] up, const long long[:, ::1] down,
            const double[::1] p_empty):
    """Within-turn recursion ("How The AI Works") for B games at once; see ``turn._turn_dp``.

    Args:
        best: float64 (B, L, n_rolls) value of stopping at roll j with each roll.
        best_pure: float64 (B, L, n_rolls) the same for a pure roll (every die rerolled), or None.
        up, down: the lattice tables (module docstring); p_empty: float64 (n_rolls,) P(roll) of a
            throw of every die.

    Returns:
        (K float64 (B, L - 1, n_keeps), v0 float64 (B,)): the keep values after each roll but the
        last (the empty keep leads to a pure roll) and the value before the first roll (a pure
        one).

    Raises:
        ValueError: mismatched shapes.
    """
    cdef Py_ssize_t B = best.shape[0], L = best.shape[1], NR = best.shape[2]
    cdef Py_ssize_t F = up.shape[0], NK = F + NR, b, j, q
    if down.shape[0] != NK or up.shape[1] != 6 or down.shape[1] != 6 or p_empty.shape[0] != NR:
        raise ValueError("up (n_keeps - n_rolls, 6), down (n_keeps, 6) and p_empty (n_rolls,) must match best")
    cdef bint has_pure = best_pure is not None
    cdef const double[:, :, ::1] bp = best_pure if has_pure else best
    if has_pure and (bp.shape[0] != B or bp.shape[1] != L or bp.shape[2] != NR):
        raise ValueError("best_pure must have the shape of best")
    K = np.empty((B, L - 1 if L > 1 else 0, NK), dtype=np.float64)
    v0 = np.empty(B, dtype=np.float64)
    cdef double[:, :, ::1] Kv = K
    cdef double[::1] v0v = v0
    if B == 0:
        return K, v0
    buf = np.empty(2 * NR + NK, dtype=np.float64)
    cdef double[::1] bv = buf
    cdef double* v = &bv[0]
    cdef double* vp = &bv[NR]
    cdef double* bs = &bv[2 * NR]          # best sub-keep of every keep
    cdef double* sub = bs + F              # ... of every roll
    cdef const long long* upp = &up[0, 0] if F > 0 else NULL
    cdef double* Kj
    cdef double s, x
    with nogil:
        for b in range(B):
            for q in range(NR):
                v[q] = best[b, L - 1, q]
                vp[q] = bp[b, L - 1, q]
            for j in range(L - 2, -1, -1):
                Kj = &Kv[b, j, 0]
                for q in range(NR):
                    Kj[F + q] = v[q]
                lattice_average(Kj, upp, F)
                if has_pure:
                    s = 0.0
                    for q in range(NR):
                        s = s + vp[q] * p_empty[q]
                    Kj[0] = s
                lattice_best(Kj, &down[0, 0], bs, NK)
                for q in range(NR):
                    x = best[b, j, q]
                    v[q] = x if x > sub[q] else sub[q]
                    if has_pure:
                        x = bp[b, j, q]
                        vp[q] = x if x > sub[q] else sub[q]
                    else:
                        vp[q] = v[q]
            s = 0.0
            for q in range(NR):
                s = s + vp[q] * p_empty[q]
            v0v[b] = s
    return K, v0
