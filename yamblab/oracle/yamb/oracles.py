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


def column_optima(rules: YambRules) -> dict[str, float]:
    """The optimal expected score of each column of ``rules``'s card that an oracle solves
    (down, up, free), each played alone under the same rules: a yardstick for the points an
    agent of the whole card makes in that column (the card's other columns give it choices a
    column alone lacks, so it can beat it). Solves each column (seconds to minutes; not cached).

    Returns:
        column kind → expected points of a new single-column game, float.
    """
    out = {}
    for kind in rules.columns:
        if kind in ("down", "up", "free"):
            one = rules.replace(columns=(kind,), name=f"{rules.name}[{kind}]", announce_compulsory="rest_full")
            out[kind] = float(column_oracle(one).state_value([-1] * rules.n_rows))
    return out


__all__ = ["column_oracle", "column_optima"]
