"""The rules-of-thumb study (the Best Values post): named valuation formulas and their fits
(:mod:`.valuations`), their tuning for exact expected score (:mod:`.tuning`), the exact forward
occupancy of their agents (:mod:`.occupancy`) and its plots, all on Yahtzee's oracle."""
