# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled dice-lattice kernels for :mod:`yamblab.games.dice6` (five or six dice)."""

import numpy as np

include "_lattice.pxi"


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
    cdef Py_ssize_t B = values.shape[0], K = values.shape[1], b, k
    if down.shape[0] != K or down.shape[1] != 6 or not 0 <= first_roll <= K:
        raise ValueError(f"down must be ({K}, 6) and first_roll within 0..{K}")
    out = np.empty((B, K - first_roll), dtype=np.float64)
    cdef double[:, ::1] o = out
    best_arr = np.empty(K, dtype=np.float64)
    cdef double[::1] best = best_arr
    with nogil:
        for b in range(B):
            lattice_best(&values[b, 0], &down[0, 0], &best[0], K)
            for k in range(first_roll, K):
                o[b, k - first_roll] = best[k]
    return out


def keep_average(const double[:, ::1] values, const long long[:, ::1] up, Py_ssize_t first_roll):
    """For every keep, the average of ``values`` over the rolls it leads to, on the keep lattice.

    A keep of m dice rerolls the others; rolling them one die at a time, its value is the mean
    over the next die's face of the keep one die larger (6 additions per keep, where the sparse
    ``P(roll | keep)`` has 12,376 terms for six dice and 4,368 for five).

    Args:
        values: float64 (B, n_rolls) value of each roll (the full-size keeps).
        up: int64 (first_roll, 6) the keep with one die of each face more, for every keep
            smaller than a roll (keeps ordered by size, so the larger keep comes later).
        first_roll: index of the first full-size keep (the rolls).

    Returns:
        float64 (B, first_roll + n_rolls): the value of every keep (the rolls' own values last).

    Raises:
        ValueError: ``up`` of the wrong shape.
    """
    cdef Py_ssize_t B = values.shape[0], R = values.shape[1], K, b, k, f
    if up.shape[0] != first_roll or up.shape[1] != 6:
        raise ValueError(f"up must be ({first_roll}, 6), got ({up.shape[0]}, {up.shape[1]})")
    K = first_roll + R
    for k in range(first_roll):
        for f in range(6):
            if not k < up[k, f] < K:
                raise ValueError("up must point from every keep to a larger one")
    out = np.empty((B, K), dtype=np.float64)
    cdef double[:, ::1] o = out
    if B == 0 or K == 0:
        return out
    with nogil:
        for b in range(B):
            for k in range(R):
                o[b, first_roll + k] = values[b, k]
            lattice_average(&o[b, 0], &up[0, 0] if first_roll > 0 else NULL, first_roll)
    return out
