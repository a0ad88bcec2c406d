"""Ray actors of a training run (:mod:`.actors`): the oracle service, self-play workers, the replay
buffer, the learner and the evaluator; the buffer itself (:mod:`.replay`); starting Ray
(:mod:`.cluster`)."""
