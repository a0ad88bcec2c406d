"""Learning: the search and training settings, every training idea a switch a sweep can turn off
(:mod:`.config`); self-play for any game, the losses, the EMA player, the learner, and the health
metrics that watch a network in training."""
