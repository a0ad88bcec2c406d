"""The table of "The Best Values Aren't the Averages" as the post published it: each row's
title and figures, which ``yamblab valuation table`` prints beside its exact ones."""

#: The Best Values post's figures for each row of its table: (exact score, upper-bonus rate or None)
PUBLISHED = {
    "zero": (217.38, 0.031), "average": (235.00, 0.204), "average-step": (232.32, None),
    "average-ramp": (243.20, 0.596), "fit": (241.14, None), "fit-stages": (239.09, None),
    "tuned-ramp": (251.82, 0.637),
}
PUBLISHED_FIT = {"fit": 5.16, "fit-stages": 2.53}
ROW_TITLES = {
    "zero": "greedy (zero valuation)",
    "average": "average values",
    "average-step": "+ bonus as a 35-point step",
    "average-ramp": "+ bonus as a ramp, + 9 for a Yahtzee",
    "fit": "least-squares fit (visited states)",
    "fit-stages": "the same fitted per stage",
    "tuned-ramp": "tuned ramp (17 parameters)",
    "staged-ramp": "staged ramp (per third of the game)",
}
