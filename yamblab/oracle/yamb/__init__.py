"""Yamb's exact oracles of a single column: down and up (:mod:`.column`), free (:mod:`.free` and
its kernel), the per-turn pass against a box valuation (:mod:`.turn`), grading, and solving a
column for ``yamblab oracle build`` (:mod:`.build`)."""
