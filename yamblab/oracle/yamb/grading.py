"""Grading Yamb agents: exact regret on a single-column game, a paired baseline elsewhere.

* A game of one ``down``, ``up`` or ``free`` column has an exact oracle
  (:func:`yamblab.oracle.yamb.oracles.column_oracle`): every decision is charged its
  **regret**, the oracle's value of the best action minus that of the chosen one (the Best
  Values post's grading, the same as Yahtzee's). A game's regrets add up to its expected shortfall from
  optimal play, with far less noise than its score.
* A card of several columns has no exact oracle: the games are played on fixed dice and
  compared with a baseline bot (the heuristic by default) on the **same** dice: the mean score,
  its CI, and the paired difference with its CI (Student t over games; scipy). With an exact
  **endgame** oracle (:class:`~yamblab.search.yamb_endgame.YambEndgameOracle`), every decision
  made once the card has at most its ``k`` open boxes is charged its exact regret as well.

Agents are duck-typed: ``act(batch) -> int64 (n,)`` engine actions (-1 for finished games)
and an optional ``reset(batch)``.
"""

from __future__ import annotations

import numpy as np

from yamblab.errors import EndgameTooLarge
from yamblab.games.yamb.rules import ROW_LABELS
from yamblab.games.yamb.scoring import open_boxes
from yamblab.oracle.report import GradeReport, mean_ci, play_scores

CHUNK = 500


def decision_names(rules) -> tuple[str, ...]:
    """Kinds of Yamb decisions: the keep after each roll but the last, the box, the announcement
    (:func:`yamblab.vocabulary.decision_names`: the same words as Yahtzee's)."""
    from yamblab.vocabulary import decision_names as names

    return names(rules.max_rolls, announce=True)


def column_regrets(oracle, batch, actions: np.ndarray) -> np.ndarray:
    """Regret (expected points lost, ≥ 0) of each game's engine action in a single-column batch.

    Args:
        oracle: a ``ColumnOracle`` or ``FreeColumnOracle`` whose rules the batch plays.
        batch: a :class:`~yamblab.games.yamb.engine.YambBatch` (one column).
        actions: int64 (n,) engine actions about to be applied (-1: none).

    Returns:
        float64 (n,), 0 for finished games and games without an action.

    Raises:
        IllegalActionError: an action the oracle does not know (e.g. an announcement).
    """
    from yamblab.errors import IllegalActionError

    free = oracle.rules.columns[0] == "free"
    rows = oracle.rules.rows
    out = np.zeros(batch.n)
    for i in np.flatnonzero((np.asarray(actions) >= 0) & ~np.asarray(batch.done)):
        a = int(actions[i])
        if a < batch.n_placements:
            name = f"score:{rows[a]}" if free else "score"
        elif a < batch.announce_offset:
            name = f"hold:{a - batch.hold_offset}"
        else:
            raise IllegalActionError(f"game {i}: a single {oracle.rules.columns[0]} column has no announcements")
        q = oracle.action_values(batch.card[i, 0].tolist(), batch.dice[i].tolist(), int(batch.rolls_used[i]))
        if name not in q:
            raise IllegalActionError(f"game {i}: action {name!r} is not available; choose from {', '.join(q)}")
        out[i] = max(q.values()) - q[name]
    return out


def grade_yamb(agent, game, games: int = 200, seed: int = 0, first_game: int = 0, oracle=None,
               baseline=None, baseline_scores: np.ndarray | None = None,
               yardsticks: dict[str, np.ndarray] | None = None, progress: bool = False,
               column_optima: dict[str, float] | None = None, endgame=None) -> GradeReport:
    """Play ``games`` seeded Yamb games with ``agent`` and grade them.

    Args:
        agent: any agent of ``game`` (``act``/``reset``; engine actions).
        game: a :class:`~yamblab.games.yamb.game.YambGame`.
        games: number of games (game numbers ``first_game`` … of dice seed ``seed``).
        oracle: the exact oracle of a single-column game (default: built for one when the
            game has one; pass ``False`` to skip regret).
        baseline: an agent to compare with on the same dice (cards without an oracle); or
            ``baseline_scores``: its scores on these games, float64 (games,), already played.
        yardsticks: further paired comparisons on the same dice: name -> that agent's scores
            on these games, float (games,); each fills ``report.versus[name]``.
        progress: a progress bar over games.
        column_optima: each column kind's optimal expected score played alone (points;
            :func:`~yamblab.oracle.yamb.oracles.column_optima`), reported beside the agent's
            mean points in that column.
        endgame: an exact endgame oracle (:class:`~yamblab.search.yamb_endgame.YambEndgameOracle`:
            ``k``, ``max_states``, ``card_values`` and ``search()``, whose ``action_values(batch,
            games)`` are exact at positions with at most ``k`` open boxes): the exact regret of
            every decision made there.

    Returns:
        :class:`~yamblab.oracle.report.GradeReport` (game ``"yamb"``): regret per game, by
        decision kind (:func:`decision_names`) and by row, when there is an oracle; the paired
        difference from the baseline when one is given, and from each yardstick;
        ``upper_bonus_rate`` is the share of
        the card's columns whose upper bonus was reached.

    Raises:
        ValueError: ``games`` < 1, or a yardstick without one score per game.
        IllegalActionError: the agent chose an illegal action.
    """
    if int(games) < 1:
        raise ValueError(f"number of games must be at least 1, got {games}")
    rules = game.rules
    if oracle is None and getattr(game, "oracle_column", None):
        from yamblab.oracle.yamb.oracles import column_oracle

        oracle = column_oracle(rules)
    names = decision_names(rules)
    played = _play(agent, game, int(games), seed, first_game, oracle, progress, endgame)
    s, by_decision, by_row = played["scores"], played["by_decision"], played["by_row"]
    m, lo, hi = mean_ci(s)
    if oracle:
        g = played["regrets"]
        rm, rlo, rhi = mean_ci(g)
    else:
        g = np.full(s.size, np.nan)
        rm, rlo, rhi = float("nan"), float("nan"), float("nan")
    up = float(played["bonus"].mean()) if rules.upper_bonus > 0 else None
    report = GradeReport(
        agent=getattr(agent, "name", "agent"), rules=game.label, games=int(games), seed=int(seed),
        mean=m, ci=(lo, hi), sd=float(s.std(ddof=1)) if s.size > 1 else 0.0,
        median=float(np.median(s)), p90=float(np.percentile(s, 90)),
        upper_bonus_rate=up, yahtzee_rate=None, regret_mean=rm, regret_ci=(rlo, rhi),
        regret_by_decision={k: float(v / games) for k, v in zip(names, by_decision)} if oracle else {},
        regret_by_box={ROW_LABELS[rules.rows[i]]: float(by_row[i] / games) for i in range(rules.n_rows)}
        if oracle else {},
        scores=s, regrets=g, game="yamb",
        by_column={k: float(v) for k, v in zip(rules.columns, played["columns"].mean(axis=0))},
        column_optima={k: float(v) for k, v in (column_optima or {}).items() if k in rules.columns},
        announce_fill_rate=float(played["announce"].mean()) if played["announce"] is not None else None)
    if endgame is not None:
        _endgame_report(report, endgame.k, played["endgame"], rules, names, int(games))
    _compare(report, game, int(games), seed, first_game, baseline, baseline_scores, yardsticks)
    return report


def _endgame_report(report: GradeReport, k: int, eg: dict, rules, names, games: int) -> None:
    em, elo, ehi = mean_ci(eg["regrets"])
    report.endgame_k = int(k)
    report.endgame_regrets = eg["regrets"]
    report.endgame_regret_mean, report.endgame_regret_ci = em, (elo, ehi)
    report.endgame_decisions = float(eg["decisions"] / games)
    report.endgame_entered = {int(n): int(c) for n, c in zip(*np.unique(eg["entered"], return_counts=True))}
    report.endgame_by_decision = {n: float(v / games) for n, v in zip(names, eg["by_decision"])}
    report.endgame_by_column = {c: float(v / games) for c, v in zip(rules.columns, eg["by_column"])}


class _EndgameTally:
    """The exact regret of each decision made with at most ``k`` open boxes, summed per game, per
    decision kind and per column (a box's; an announcement's is the announce column's).

    A game enters the endgame at the first turn start with at most ``k`` open boxes whose card
    the oracle solves within its ``max_states`` new states; a card beyond that waits a turn (one
    box fewer) and is tried again, so a card of many live states costs seconds, not minutes."""

    def __init__(self, endgame, rules, names):
        self.endgame, self.rules, self.names = endgame, rules, names
        self.by_decision = np.zeros(len(names))
        self.by_column = np.zeros(rules.n_columns)
        self.decisions = 0
        self.regrets: list[np.ndarray] = []
        self.entered: list[np.ndarray] = []          # open boxes when each game entered (0: never)

    def start(self, b) -> None:
        self.search = self.endgame.search()
        self.search.reset(b)
        self.regrets.append(np.zeros(b.n))
        self.entered.append(np.zeros(b.n, np.int64))
        self._tried = np.full(b.n, -1, np.int64)     # the turn a game was last refused at

    def _enter(self, b, n_open: np.ndarray) -> None:
        entered, turn = self.entered[-1], np.asarray(b.turn, np.int64)
        for i in np.flatnonzero(~np.asarray(b.done) & (entered == 0) & (n_open <= self.endgame.k) & (self._tried != turn)):
            try:
                self.endgame.card_values(np.asarray(b.card)[i:i + 1].copy(), max_states=self.endgame.max_states)
                entered[i] = n_open[i]
            except EndgameTooLarge:
                self._tried[i] = turn[i]

    def charge(self, b, a: np.ndarray, kind: np.ndarray) -> None:
        n_open = open_boxes(b.card)
        self._enter(b, n_open)
        games = np.flatnonzero(~np.asarray(b.done) & (a >= 0) & (self.entered[-1] > 0))
        if games.size == 0:
            return
        q = self.search.action_values(b, games)[games]
        r = np.maximum(q.max(axis=1) - q[np.arange(games.size), a[games]], 0.0)
        self.regrets[-1][games] += r
        self.decisions += games.size
        np.add.at(self.by_decision, kind[games], r)
        box = a[games] < b.n_placements
        np.add.at(self.by_column, a[games][box] // self.rules.n_rows, r[box])
        if self.rules.announce_column >= 0:
            self.by_column[self.rules.announce_column] += r[a[games] >= b.announce_offset].sum()

    def result(self) -> dict:
        return {"regrets": np.concatenate(self.regrets), "by_decision": self.by_decision,
                "by_column": self.by_column, "decisions": self.decisions, "entered": np.concatenate(self.entered)}


def _play(agent, game, games: int, seed: int, first_game: int, oracle, progress: bool, endgame=None) -> dict:
    """Play the graded games, a chunk at a time: their scores, columns' points, upper bonuses and
    filled announce boxes, and with an ``oracle`` every decision's exact regret, summed per game,
    per decision kind and per row (with an ``endgame`` oracle, the endgame's: :class:`_EndgameTally`)."""
    rules = game.rules
    names = decision_names(rules)
    by_decision = np.zeros(len(names))
    by_row = np.zeros(rules.n_rows)
    scores, regrets, bonus, columns, announce = [], [], [], [], []
    ann = rules.announce_column
    tally = _EndgameTally(endgame, rules, names) if endgame is not None else None
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=int(games), desc=f"grading {getattr(agent, 'name', 'agent')}", unit="games")
    for start in range(0, int(games), CHUNK):
        n = min(CHUNK, int(games) - start)
        b = game.new_batch(n, seed=seed, first_game=first_game + start)
        if hasattr(agent, "reset"):
            agent.reset(b)
        g_reg = np.zeros(n)
        if tally is not None:
            tally.start(b)
        while not b.done.all():
            a = np.asarray(agent.act(b), dtype=np.int64)
            kind = _kinds(b, a, len(names))
            if tally is not None:
                tally.charge(b, a, kind)
            if oracle:
                live = ~np.asarray(b.done)
                r = column_regrets(oracle, b, a)
                np.add.at(by_decision, kind[live], r[live])
                box = live & (a >= 0) & (a < b.n_placements)
                np.add.at(by_row, a[box] % rules.n_rows, r[box])
                g_reg += r
            b.step(a)
        scores.append(b.total.astype(np.float64))
        columns.append(np.asarray(b.col_total, np.float64)[:, :rules.n_columns])
        if ann >= 0:
            announce.append(np.asarray(b.card)[:, ann, :rules.n_rows] > 0)
        bonus.append(game.bonus_reached(b))
        regrets.append(g_reg)
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    return {"scores": np.concatenate(scores), "regrets": np.concatenate(regrets), "bonus": np.concatenate(bonus),
            "columns": np.concatenate(columns), "announce": np.concatenate(announce) if announce else None,
            "by_decision": by_decision, "by_row": by_row, "endgame": tally.result() if tally else None}


def _kinds(b, a: np.ndarray, n_names: int) -> np.ndarray:
    """Each engine action's decision kind, an index into :func:`decision_names`: the keep after
    roll r (r − 1), the box (second to last), the announcement (last)."""
    keep = np.clip(np.asarray(b.rolls_used, np.int64) - 1, 0, n_names - 3)
    return np.where(a < b.n_placements, n_names - 2, np.where(a >= b.announce_offset, n_names - 1, keep))


def endgame_regrets(agent, game, endgame, games: int, seed: int, first_game: int = 0) -> dict:
    """The exact regret of ``agent`` over the endgame of games whose opening the heuristic bot
    plays: each game is played by the bot until its card has at most ``endgame.k`` open boxes
    (the openings of Yamb's decision set, :meth:`~yamblab.search.yamb_endgame.YambEndgameOracle.play`),
    then by the agent to its end, every decision charged its exact regret. Every agent graded
    on the same ``games`` and ``seed`` starts its endgames from the same cards, so two agents'
    regrets pair game by game. Unlike :func:`grade_yamb`'s ``endgame`` (whose cards of many
    states enter a turn later), every game enters at ``k`` open boxes.

    Returns:
        ``{"regrets": float64 (games,), "by_decision": {kind: points per game} (the kinds of
        :func:`decision_names`), "decisions": decisions a game}``.
    """
    from yamblab.oracle.yamb.planners import HeuristicAgent

    if int(games) < 1:
        raise ValueError(f"number of games must be at least 1, got {games}")
    rules, names = game.rules, decision_names(game.rules)
    regrets, by_decision, decisions = [], np.zeros(len(names)), 0
    for start in range(0, int(games), CHUNK):
        n = min(CHUNK, int(games) - start)
        b = game.new_batch(n, seed=seed, first_game=first_game + start)
        bot = HeuristicAgent(rules)
        bot.reset(b)
        while True:                               # the opening: cards that reach k wait for the rest
            early = ~np.asarray(b.done) & (open_boxes(b.card) > endgame.k)
            if not early.any():
                break
            b.step(np.where(early, np.asarray(bot.act(b), np.int64), -1))
        if hasattr(agent, "reset"):
            agent.reset(b)
        search = endgame.search()
        search.reset(b)
        r_game = np.zeros(n)
        while not b.done.all():
            a = np.asarray(agent.act(b), dtype=np.int64)
            live = np.flatnonzero(~np.asarray(b.done) & (a >= 0))
            q = search.action_values(b, live)[live]
            r = np.maximum(q.max(axis=1) - q[np.arange(live.size), a[live]], 0.0)
            r_game[live] += r
            np.add.at(by_decision, _kinds(b, a, len(names))[live], r)
            decisions += live.size
            b.step(a)
        regrets.append(r_game)
    return {"regrets": np.concatenate(regrets), "decisions": decisions / int(games),
            "by_decision": {k: float(v) / int(games) for k, v in zip(names, by_decision)}}


def _compare(report: GradeReport, game, games: int, seed: int, first_game: int, baseline, baseline_scores,
             yardsticks) -> None:
    """The paired differences of ``report``'s scores from the baseline's (played here unless its
    ``baseline_scores`` are given) and from each yardstick's, on the same dice."""
    s = report.scores
    if baseline is not None or baseline_scores is not None:
        if baseline_scores is None:
            baseline_scores = play_scores(baseline, game, games, seed, first_game)
        d = s - np.asarray(baseline_scores, np.float64)
        dm, dlo, dhi = mean_ci(d)
        report.baseline_agent = getattr(baseline, "name", "baseline")
        report.baseline_mean = float(np.mean(baseline_scores))
        report.diff_mean, report.diff_ci = dm, (dlo, dhi)
        report.baseline_scores = np.asarray(baseline_scores, np.float64)
    for name, other in (yardsticks or {}).items():
        other = np.asarray(other, np.float64)
        if other.shape != s.shape:
            raise ValueError(f"yardstick {name!r} has {other.size} scores for {s.size} games")
        report.versus[name] = mean_ci(s - other)


__all__ = ["grade_yamb", "endgame_regrets", "column_regrets", "play_scores", "decision_names"]
