"""Search over exact dice chance nodes: the valuation protocol, expectimax for Yahtzee and Yamb
(none / one-step / full-turn), policy targets, and the oracle-graded decision set."""
