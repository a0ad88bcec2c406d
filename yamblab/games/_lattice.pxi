# The dice-lattice recursions (five or six dice), textually included by the compiled kernels of
# yamblab.games.dice6 and of Yamb's per-turn pass. Keeps are ordered by size, the rolls (the
# full-size keeps) last from index F; up: int64 (F, 6) C order, the keep one die of face f larger;
# down: int64 (n_keeps, 6) C order, the keep one die of face f smaller (0, the empty keep, where
# there is no such die).


cdef inline void lattice_average(double* K, const long long* up, Py_ssize_t F) noexcept nogil:
    """K[0..F): each keep's mean over the next die of the keep one die larger, from the roll
    values already in K[F..] (rerolling the missing dice one at a time; sum left to right, / 6)."""
    cdef Py_ssize_t k, f
    cdef double s
    for k in range(F - 1, -1, -1):
        s = 0.0
        for f in range(6):
            s = s + K[up[k * 6 + f]]
        K[k] = s / 6.0


cdef inline void lattice_best(const double* K, const long long* down, double* best, Py_ssize_t NK) noexcept nogil:
    """best[k] = max over the sub-keeps of keep k of K (the keep itself included): the better of
    K[k] and the best of the keeps one die smaller, which come earlier."""
    cdef Py_ssize_t k, f
    cdef double m, x
    best[0] = K[0]
    for k in range(1, NK):
        m = K[k]
        for f in range(6):
            x = best[down[k * 6 + f]]
            if x > m:
                m = x
        best[k] = m
