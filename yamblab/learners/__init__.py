"""Training: the training config, self-play for any game, the losses, the EMA player, the learner,
and the probes and health metrics that watch a network in training."""
