# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled dice-lattice kernels for :mod:`yamblab.games.dice6` (five or six dice)."""

import numpy as np


def best_sub_keep(const double[:, ::1] values, const long long[:, ::1] down, Py_ssize_t first_roll):
    """For every keep, the best value over its sub-keeps, on the keep lattice.

    Args:
        values: float64 (B, n_keeps) value of each keep, keeps ordered by size (so every keep
            one die smaller comes earlier).
        down: int64 (n_keeps, 6) the keep with one die of each face fewer (the empty keep 0
            where there is no such die).
        first_roll: index of the first full-size keep (the rolls).

    Returns:
        float64 (B, n_keeps - first_roll): the best sub-keep value of every roll.
    """
    cdef Py_ssize_t B = values.shape[0], K = values.shape[1], b, k, f
    if down.shape[0] != K or down.shape[1] != 6 or not 0 <= first_roll <= K:
        raise ValueError(f"down must be ({K}, 6) and first_roll within 0..{K}")
    out = np.empty((B, K - first_roll), dtype=np.float64)
    cdef double[:, ::1] o = out
    best_arr = np.empty(K, dtype=np.float64)
    cdef double[::1] best = best_arr
    cdef double m, x
    with nogil:
        for b in range(B):
            best[0] = values[b, 0]
            for k in range(1, K):
                m = values[b, k]
                for f in range(6):
                    x = best[down[k, f]]
                    if x > m:
                        m = x
                best[k] = m
            for k in range(first_roll, K):
                o[b, k - first_roll] = best[k]
    return out
