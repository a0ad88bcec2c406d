"""The exact solvers, one folder per game: Yahtzee's (:mod:`.yahtzee`) and Yamb's single-column
oracles (:mod:`.yamb`); what grading reports for any game (:mod:`.report`); the rules of thumb
and their tuning (valuations, tuning, occupancy)."""
