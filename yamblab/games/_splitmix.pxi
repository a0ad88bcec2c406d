# SplitMix64's finaliser (Steele, Lea & Flood 2014): the counter-based dice of both engines.
from libc.stdint cimport uint64_t


cdef inline uint64_t splitmix(uint64_t x) noexcept nogil:
    x += 0x9E3779B97F4A7C15ULL
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL
    return x ^ (x >> 31)
