"""The exact solvers: Yahtzee's oracle table and per-turn pass, advice, grading, exact policy
evaluation, rules of thumb and their tuning, the target-score table; Yamb's column oracles."""
