"""What grading any game's agent reports: :class:`GradeReport` (scores, regret by decision and by
box, or a paired comparison with a bot where a card has no exact oracle) and :func:`mean_ci`, the
mean with its Student-t interval, and :func:`play_scores`, any agent's seeded scores. Each game's grading (:mod:`yamblab.oracle.yahtzee.grading`,
:mod:`yamblab.oracle.yamb.grading`) fills them in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of a sample: ``(mean, low, high)``.

    A sample of one (or a constant sample) gets a zero-width interval.
    """
    x = np.asarray(x, dtype=np.float64)
    m = float(x.mean())
    if x.size < 2 or float(x.std()) == 0.0:
        return m, m, m
    lo, hi = stats.t.interval(level, x.size - 1, loc=m, scale=stats.sem(x))
    return m, float(lo), float(hi)


@dataclass
class GradeReport:
    """The result of grading an agent on seeded games (any game).

    Scores and regrets are in points. ``regret_by_decision`` and ``regret_by_box`` are mean
    points lost per game; ``regret_by_box`` charges box decisions to the box (Yamb: the row)
    chosen. A game with no exact oracle (a Yamb card of several columns) has no regret
    (``regret_mean`` is NaN); it is compared instead with a **baseline** bot on the same dice:
    ``baseline_mean`` and the paired difference ``diff_mean`` (agent − baseline) with its 95%
    interval ``diff_ci``; ``versus`` maps the name of each further yardstick (another bot's
    scores on the same dice, e.g. ``"greedy"``) to the same paired comparison, (mean, low, high)
    points. ``upper_bonus_rate`` is the share of upper bonuses reached (None
    under rules without one); ``yahtzee_rate`` is Yahtzee's alone (None for Yamb).
    ``by_column`` (Yamb) is each column's mean points a game (its total with bonuses and middle
    term), keyed by column kind; ``column_optima`` the optimal expected score of the same column
    played alone (a yardstick where an exact oracle exists: down, up, free); and
    ``announce_fill_rate`` the share of the announce column's boxes scored above 0 (None
    without one). A Yamb card graded by an exact endgame oracle has ``endgame_k`` (the most open
    boxes it solves) and the exact regret of every decision made once the card has at most that
    many open boxes: per game (``endgame_regrets``, mean and 95% interval), by decision kind
    and by column (a box's column; announcements the announce column's; keeps have none),
    ``endgame_decisions``, such decisions a game, and ``endgame_entered``, the games by the
    open boxes their card had when it entered the endgame (``k``, or fewer where the oracle's
    state budget let it in a turn later; 0: never).
    """

    agent: str
    rules: str
    games: int
    seed: int
    mean: float
    ci: tuple[float, float]
    sd: float
    median: float
    p90: float
    upper_bonus_rate: float | None
    yahtzee_rate: float | None
    regret_mean: float
    regret_ci: tuple[float, float]
    regret_by_decision: dict[str, float] = field(default_factory=dict)
    regret_by_box: dict[str, float] = field(default_factory=dict)
    scores: np.ndarray | None = field(default=None, repr=False)
    regrets: np.ndarray | None = field(default=None, repr=False)
    game: str = "yahtzee"
    baseline_agent: str | None = None
    baseline_mean: float | None = None
    diff_mean: float | None = None
    diff_ci: tuple[float, float] | None = None
    baseline_scores: np.ndarray | None = field(default=None, repr=False)
    versus: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    by_column: dict[str, float] = field(default_factory=dict)
    column_optima: dict[str, float] = field(default_factory=dict)
    announce_fill_rate: float | None = None
    endgame_k: int | None = None
    endgame_regret_mean: float | None = None
    endgame_regret_ci: tuple[float, float] | None = None
    endgame_decisions: float | None = None
    endgame_entered: dict[int, int] = field(default_factory=dict)
    endgame_by_decision: dict[str, float] = field(default_factory=dict)
    endgame_by_column: dict[str, float] = field(default_factory=dict)
    endgame_regrets: np.ndarray | None = field(default=None, repr=False)

    @property
    def has_regret(self) -> bool:
        """True when every decision was graded by an exact oracle."""
        return bool(np.isfinite(self.regret_mean))

    def to_dict(self) -> dict:
        """Plain-JSON form (no per-game arrays), every figure rounded to 4 decimals
        (:func:`yamblab.vocabulary.rounded`)."""
        from yamblab.vocabulary import rounded

        d = asdict(self)
        for k in ("scores", "regrets", "baseline_scores", "endgame_regrets"):
            d.pop(k)
        if self.endgame_k is None:
            for k in [k for k in d if k.startswith("endgame_")]:
                d.pop(k)
        if not self.has_regret:
            d["regret_mean"], d["regret_ci"] = None, None
        return rounded(d)

    def format(self) -> str:
        """A human-readable report."""
        rates = []
        if self.upper_bonus_rate is not None:
            rates.append(f"upper bonus {100 * self.upper_bonus_rate:.1f}%")
        if self.yahtzee_rate is not None:
            rates.append(f"Yahtzee {100 * self.yahtzee_rate:.1f}%")
        lines = [
            f"agent {self.agent} · {self.game} {self.rules} · {self.games} games · seed {self.seed}",
            f"  score      mean {self.mean:8.2f}  95% CI [{self.ci[0]:.2f}, {self.ci[1]:.2f}]",
            f"             SD {self.sd:.2f}  median {self.median:.1f}  p90 {self.p90:.1f}",
        ]
        if rates:
            lines.append("             " + "  ".join(rates))
        if self.baseline_agent is not None:
            lines.append(f"  vs {self.baseline_agent:<8s} {self.diff_mean:+8.2f} points/game  95% CI "
                         f"[{self.diff_ci[0]:+.2f}, {self.diff_ci[1]:+.2f}] (paired on the same dice; "
                         f"{self.baseline_agent} mean {self.baseline_mean:.2f})")
        if len(self.by_column) > 1:
            lines.append("  by column  " + "  ".join(
                f"{k} {v:.1f}" + (f" (alone, optimal: {self.column_optima[k]:.1f})" if k in self.column_optima else "")
                for k, v in self.by_column.items()))
        if self.announce_fill_rate is not None:
            lines.append(f"             announce boxes scored above 0: {100 * self.announce_fill_rate:.1f}%")
        if self.endgame_k is not None:
            lines += self._endgame_lines()
        if not self.has_regret:
            lines.append("  regret     (no exact oracle for a whole card" + (
                "; the endgame's is above)" if self.endgame_k is not None else ")"))
            return "\n".join(lines)
        lines += [
            f"  regret     mean {self.regret_mean:8.3f} points/game  95% CI "
            f"[{self.regret_ci[0]:.3f}, {self.regret_ci[1]:.3f}]",
            "  by decision " + "  ".join(f"{k}: {v:.3f}" for k, v in self.regret_by_decision.items()),
        ]
        worst = sorted(self.regret_by_box.items(), key=lambda kv: -kv[1])
        lines.append("  by box      " + "  ".join(f"{k}: {v:.3f}" for k, v in worst if v > 0) if any(
            v > 0 for _, v in worst) else "  by box      (no regret)")
        return "\n".join(lines)


    def _endgame_lines(self) -> list[str]:
        lo, hi = self.endgame_regret_ci
        return [
            f"  endgame    exact regret once at most {self.endgame_k} boxes are open: mean "
            f"{self.endgame_regret_mean:.3f} points/game  95% CI [{lo:.3f}, {hi:.3f}] "
            f"({self.endgame_decisions:.1f} decisions a game)",
            "    by decision " + "  ".join(f"{k}: {v:.3f}" for k, v in self.endgame_by_decision.items()),
            *(["    entered  " + ", ".join(f"{c} game{'s' * (c != 1)} at {n} open boxes" if n else f"{c} never"
                                          for n, c in sorted(self.endgame_entered.items(), reverse=True))
               + " (a card beyond the oracle's state budget enters a turn later)"]
              if set(self.endgame_entered) - {self.endgame_k} else []),
            "    by column   " + "  ".join(f"{k}: {v:.3f}" for k, v in self.endgame_by_column.items()),
        ]


#: games played at once by :func:`play_scores`
PLAY_CHUNK = 500


def play_scores(agent, game, games: int, seed: int, first_game: int = 0) -> np.ndarray:
    """Final scores (points, float64 (games,)) of ``agent`` on games ``first_game`` … of dice
    seed ``seed`` of any game (a :class:`~yamblab.games.protocol.Game`), played ``PLAY_CHUNK`` at
    a time: the paired yardstick of a game with no exact oracle."""
    out = []
    for start in range(0, int(games), PLAY_CHUNK):
        n = min(PLAY_CHUNK, int(games) - start)
        b = game.new_batch(n, seed=seed, first_game=first_game + start)
        if hasattr(agent, "reset"):
            agent.reset(b)
        while not b.done.all():
            b.step(agent.act(b))
        out.append(b.total.astype(np.float64))
    return np.concatenate(out)
