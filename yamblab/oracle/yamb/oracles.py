"""The exact oracle of a single-column Yamb game, built once per process.

A game of one ``down`` or ``up`` column is solved by
:class:`~yamblab.oracle.yamb.column.ColumnOracle` (seconds), one ``free`` column by
:class:`~yamblab.oracle.yamb.free.FreeColumnOracle` (about 20 s on two cores for croatian,
~100 MB). Cards of several columns have no exact oracle.
"""

from __future__ import annotations

from functools import lru_cache

from yamblab.errors import UnknownVariantError
from yamblab.games.yamb.rules import YambRules


@lru_cache(maxsize=8)
def column_oracle(rules: YambRules):
    """The exact oracle of the single-column game ``rules`` (cached per process).

    Args:
        rules: a rule set with exactly one column, ``down``, ``up`` or ``free``.

    Returns:
        a ``ColumnOracle`` or ``FreeColumnOracle`` whose ``rules`` play the same game.

    Raises:
        UnknownVariantError: a card of several columns, or of a column kind with no oracle.
    """
    if len(rules.columns) != 1 or rules.columns[0] not in ("down", "up", "free"):
        raise UnknownVariantError(
            f"no exact oracle for a card of columns {', '.join(rules.columns)}: the oracles solve a "
            "single down, up or free column (play e.g. `columns: [free]`)")
    base = rules.replace(columns=("down", "up", "free", "announce"), name=rules.name)
    if rules.columns[0] == "free":
        from yamblab.oracle.yamb.free import FreeColumnOracle

        return FreeColumnOracle(base)
    from yamblab.oracle.yamb.column import ColumnOracle

    return ColumnOracle(base, rules.columns[0])


__all__ = ["column_oracle"]
