"""``yamblab oracle build --game yamb --preset P --column down|up|free``: solve a single Yamb column.

(Grading Yamb agents is :func:`yamblab.oracle.yamb.grading.grade_yamb`, the same evaluator
training uses; ``yamblab grade --game yamb`` calls it.)
"""

from __future__ import annotations

from yamblab.games.yamb.rules import get_preset

__all__ = ["build_column_oracle"]


def build_column_oracle(preset: str, column: str = "down") -> float:
    """Solve the single-column game of one column exactly; its value in points.

    ``down`` and ``up`` use :class:`~yamblab.oracle.yamb.column.ColumnOracle` (seconds);
    ``free`` uses :class:`~yamblab.oracle.yamb.free.FreeColumnOracle` on every core (about a
    minute of one core for croatian, ~150 MB; see that module for each preset's size).

    Raises:
        UnknownVariantError: an unknown preset, or a column other than ``down``/``up``/``free``.
    """
    from yamblab.oracle.yamb.column import ColumnOracle

    rules = get_preset(preset)
    if str(column).strip().lower() == "free":
        from yamblab.oracle.yamb.free import FreeColumnOracle

        return FreeColumnOracle(rules).value
    return ColumnOracle(rules, column).value
