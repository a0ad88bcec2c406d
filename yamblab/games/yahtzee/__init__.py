"""Yahtzee: the rules and rule variants (:mod:`.rules`) and the batched Cython engine (:mod:`.engine`)."""
