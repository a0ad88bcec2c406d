"""Yamb: rules as configuration with sourced presets (:mod:`.rules`) and the batched Cython
engine (:mod:`.engine`)."""
