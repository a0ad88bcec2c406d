"""yamblab: an experiment platform for AlphaZero-style agents that play Yahtzee and Yamb.

Every decision an agent makes can be graded against an exact solver (the oracle).
See README.md for a tour of the package.
"""

__version__ = "0.1.0"
