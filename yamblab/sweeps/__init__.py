"""Sweeps of training runs (ablation grids, tuning studies): the spec's schema (:mod:`.spec`), the
driver with its trial actor, statistics and report (:mod:`.driver`), and branched sweeps
(:mod:`.branch`)."""
