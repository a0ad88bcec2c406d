"""Sweeps of training runs (ablation grids, tuning studies): the spec's schema (:mod:`.spec`), the
driver (:mod:`.driver`), the trial actor (:mod:`.trial`), the statistics (:mod:`.stats`), the
report (:mod:`.report`) and branched sweeps (:mod:`.branch`)."""
