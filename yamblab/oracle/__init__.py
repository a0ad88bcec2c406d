"""The exact solvers, one folder per game: Yahtzee's (:mod:`.yahtzee`) and Yamb's single-column
oracles (:mod:`.yamb`), and what grading reports for any game (:mod:`.report`)."""
