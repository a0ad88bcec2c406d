"""Yahtzee's exact solver: the oracle table and its Cython kernels (backward pass, exact policy
evaluation, forward occupancy), the per-turn pass, advice, grading and the target-score table."""
