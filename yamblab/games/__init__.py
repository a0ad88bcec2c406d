"""The games: the batched game protocol, the shared network encoding, the dice tables, and
Yahtzee and Yamb (:mod:`.yahtzee`, :mod:`.yamb`)."""
