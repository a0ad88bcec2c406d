"""Plots of where turn-perfect agents lose their points, exactly (issue 10; the Best Values post's figure).

:func:`breakdown_figure` draws the exact expected regret per game of several valuations side
by side: by decision kind (first keep, second keep, box) and, for the box decisions, by the box
chosen. The numbers are those of :func:`yamblab.rules_of_thumb.occupancy.forward_occupancy` with the
oracle table (no sampling); the Best Values post drew the same figure from 200,000 sampled games.
"""

from __future__ import annotations

import numpy as np

from yamblab.games.yahtzee.rules import BOX_LABELS
from yamblab.rules_of_thumb.occupancy import DECISIONS, Occupancy

__all__ = ["breakdown_figure"]


def breakdown_figure(results: dict[str, Occupancy], title: str | None = None):
    """Grouped bars of the exact regret per game of several valuations' agents.

    Args:
        results: label -> :class:`~yamblab.rules_of_thumb.occupancy.Occupancy` computed *with* the
            oracle table (its ``regret_by_decision`` and ``regret_by_box`` filled), in the
            order to draw them.
        title: the figure's title (default: the rule variant).

    Returns:
        a matplotlib ``Figure`` (Agg backend) with two panels: regret by decision (points per
        game) and regret of box decisions by box (points per game); each label in the legend
        carries the agent's exact expected score and total regret.

    Raises:
        ValueError: no results, or an occupancy computed without the oracle table.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not results:
        raise ValueError("no valuations to plot")
    for label, occ in results.items():
        if not occ.regret_by_decision:
            raise ValueError(f"{label}: the occupancy was computed without the oracle table (no regrets)")
    n = len(results)
    width = 0.8 / n
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [1, 3]})
    x1 = np.arange(len(DECISIONS))
    x2 = np.arange(len(BOX_LABELS))
    for i, (label, occ) in enumerate(results.items()):
        off = (i - (n - 1) / 2) * width
        name = f"{label}: {occ.expected_score:.2f} (regret {occ.regret:.2f})"
        ax1.bar(x1 + off, [occ.regret_by_decision[d] for d in DECISIONS], width, label=name)
        ax2.bar(x2 + off, [occ.regret_by_box[b] for b in BOX_LABELS], width, label=name)
    ax1.set_xticks(x1, list(DECISIONS))
    ax1.set_ylabel("exact expected regret (points / game)")
    ax1.set_title("by decision")
    ax2.set_xticks(x2, list(BOX_LABELS), rotation=40, ha="right")
    ax2.set_title("box decisions, by the box chosen")
    ax2.legend(fontsize=8)
    rules = next(iter(results.values())).rules
    fig.suptitle(title or f"Where the points go, exactly ({rules.name})")
    fig.tight_layout()
    return fig
