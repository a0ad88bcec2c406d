"""Yahtzee's exact solver: the oracle table and its Cython kernels (backward pass, exact policy
evaluation, forward occupancy), the per-turn pass, advice, grading, the oracle service, the probes and the target-score
table."""
