"""What limits a trained Yamb agent, measured from a checkpoint (prints figures; not a test).

A network trained on a Yamb card of several columns (e.g. ``configs/jamb-cpu.yaml``, the
``jamb_nn`` rules) plays ``--games`` games of dice seed ``--seed`` with full-turn search on its
values, and the heuristic bot and the policy head alone play the same dice. Five measurements:

1. **Values against outcomes.** At the start of every turn (after its first roll, before any
   decision), two forecasts of the points still to come: ``V``, the network's value of the card
   (before the roll: exactly what full-turn search uses for each card a turn can leave), and
   ``Q``, the search's best action value after the first roll (the exact turn against ``V`` of
   the cards it may leave). Each is set against what the game then scored from that point
   (final score minus the points at the turn's start), by phase: the mean bias with its 95%
   interval (games are the unit), the RMSE, and two yardsticks for the dice noise: the RMSE of
   the constant-per-turn forecast (every game's mean score-to-go at that turn) and how much of
   that variance the forecast explains once its per-turn bias is removed. Every card a turn can
   leave has the same number of boxes filled, so a bias that depends on the turn alone changes
   no decision of full-turn search; the within-turn error is what can. One such error is priced
   directly: what ``V`` pays for a point of Min and of Max while the middle term Ones × (Max −
   Min) is still open, against what that point is worth at the end (:func:`middle_term_prices`).
2. **Announce decisions.** Announcements a game (voluntary, or compulsory once only announce
   boxes are left), boxes written on a pure roll without announcing, the roll each box was
   written on, boxes scored 0, the points per box and the announce column's total, by agent
   and box, paired with the heuristic bot on the same dice.
3. **The last turn.** The last turn has no future, so its optimum is exact: full-turn search
   with every leaf a full card (value 0) is the exact one-turn solver. Every decision of the
   last turn is charged its exact regret against it; the points scored are set against the
   exact expectation after the turn's first roll (a paired difference). Full-turn search values
   a full card at 0 whatever its network says, so its last turn is exact by construction: the
   measurement checks it.
4. **Where the points go**: each column's points a game against the heuristic bot's, paired on
   the same dice (the per-game column totals of ``yamblab grade``'s ``by_column``).
5. **One turn deeper.** The same dice played by full-turn search whose box choice after the last
   roll weighs its ``--lookahead`` best boxes with the card each leaves valued a turn deeper
   (:class:`~yamblab.search.yamb_search.YambLookaheadSearch`): the share of those choices that
   change and the mean score's paired difference from full-turn search. Values that agree with
   one more turn of their own search change nothing; a gain here is what deeper search would buy.

    python benchmarks/yamb_limits.py runs/RUN/checkpoint.pt [--games 500] [--seed 0] [--lookahead 3]

Figures are points; intervals are 95% (Student t over games, or a bootstrap over games).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from yamblab.errors import YamblabError
from yamblab.oracle.report import mean_ci

#: bootstrap resamples (of games) behind an interval
BOOT = 1000


# ---------------------------------------------------------------------------- playing
class _ZeroValuation:
    """Every card is worth 0 points still to come: full-turn search then plays a turn for its
    own points, which on the last turn (every leaf a full card) is exact play."""

    def values(self, enc) -> np.ndarray:
        return np.zeros(len(enc))


def exact_last_turn(game):
    """The exact solver of a Yamb game's last turn: full-turn search whose leaves are full cards
    (valued 0), so its ``q(batch)`` is the exact expected points still to come of every action,
    float64 (n, 208) in the shared action space, on the games whose last turn it is."""
    from yamblab.search.registry import make_search

    return make_search("full_turn", game, _ZeroValuation())


class TracedAgent:
    """An agent wrapped to record what these measurements need while the project's grading
    (:func:`~yamblab.oracle.yamb.grading.grade_yamb`) plays it.

    Args:
        agent: any Yamb agent (``act``/``reset``); a
            :class:`~yamblab.agents.search_agent.SearchAgent` with a search also gives its Q.
        game: the :class:`~yamblab.games.yamb.game.YambGame` played.
        games: the number of games that will be played (every chunk of the grading in turn).

    Attributes, one row per game (points unless said otherwise):
        start_total: float64 (games, T): points on the card at the start of each turn.
        start_card: int16 (games, T, C, R): the card at the start of each turn (-1 open).
        q_start: float64 (games, T): the search's best action value after the turn's first
            roll (NaN without a search).
        total, col_total, card: float64 (games,), float64 (games, C), int16 (games, C, R): the
            final score, each column's total (bonus and middle term included) and the card.
        announced, compulsory, pure_fill: bool (games, R): the announce column's row was
            announced; announced when announcing was compulsory (only announce boxes left);
            written without an announcement on a pure roll.
        fill_roll: int8 (games, R): the roll (1-based) the announce box was written on.
        last_exact, last_q, last_regret: float64 (games,): on the last turn, the exact
            expectation after its first roll, the agent's own value then (NaN without a
            search), and the exact regret summed over the turn's decisions.
        last_column: int8 (games,): the column of the last box written.
    """

    def __init__(self, agent, game, games: int):
        r = game.rules
        T, C, R, G = r.n_turns, r.n_columns, r.n_rows, int(games)
        self.agent, self.game, self.rules = agent, game, r
        self.name = getattr(agent, "name", "agent")
        self.exact = exact_last_turn(game)
        self.start_total = np.full((G, T), np.nan)
        self.start_card = np.full((G, T, C, R), -1, np.int16)
        self.q_start = np.full((G, T), np.nan)
        self.total, self.col_total = np.full(G, np.nan), np.full((G, C), np.nan)
        self.card = np.full((G, C, R), -1, np.int16)
        self.announced = np.zeros((G, R), bool)
        self.compulsory = np.zeros((G, R), bool)
        self.pure_fill = np.zeros((G, R), bool)
        self.fill_roll = np.zeros((G, R), np.int8)
        self.last_exact, self.last_q = np.full(G, np.nan), np.full(G, np.nan)
        self.last_regret = np.zeros(G)
        self.last_column = np.full(G, -1, np.int8)
        self._batch, self._next, self._off = None, 0, 0

    def reset(self, batch) -> None:
        self._harvest()
        self._batch, self._off = batch, self._next
        self._next += batch.n
        self.exact.reset()
        if hasattr(self.agent, "reset"):
            self.agent.reset(batch)

    def act(self, batch) -> np.ndarray:
        r, game = self.rules, self.game
        g0 = self._off
        live = ~np.asarray(batch.done)
        turn = np.asarray(batch.turn, np.int64)
        start = np.flatnonzero(game.turn_start(batch))
        self.start_total[g0 + start, turn[start]] = batch.total[start]
        self.start_card[g0 + start, turn[start]] = batch.card[start]
        last = np.flatnonzero(live & (turn == r.n_turns - 1))
        qx = self.exact.q(batch) if last.size else None
        actions = np.asarray(self.agent.act(batch), np.int64)
        q = getattr(self.agent, "last_q", None)
        if q is not None:
            self.q_start[g0 + start, turn[start]] = q[start].max(axis=1)
        if last.size:
            shared = game.to_shared(actions[last])
            best = qx[last].max(axis=1)
            self.last_regret[g0 + last] += best - qx[last, shared]
            first = last[np.isin(last, start)]
            self.last_exact[g0 + first] = qx[first].max(axis=1)
            if q is not None:
                self.last_q[g0 + first] = q[first].max(axis=1)
            placed = last[actions[last] < batch.n_placements]
            self.last_column[g0 + placed] = actions[placed] // r.n_rows
        ac = r.announce_column
        if ac >= 0:
            R = r.n_rows
            ann = np.flatnonzero(live & (actions >= batch.announce_offset))
            if ann.size:
                row = actions[ann] - batch.announce_offset
                others = np.delete(np.asarray(batch.card[ann]), ac, axis=1)
                self.announced[g0 + ann, row] = True
                self.compulsory[g0 + ann, row] = (others >= 0).reshape(ann.size, -1).all(axis=1)
            put = np.flatnonzero(live & (actions >= 0) & (actions < batch.n_placements)
                                 & (actions // R == ac))
            if put.size:
                row = actions[put] % R
                self.fill_roll[g0 + put, row] = batch.rolls_used[put]
                self.pure_fill[g0 + put, row] = np.asarray(batch.announced[put]) < 0
        return actions

    def finish(self) -> "TracedAgent":
        """Record the last chunk's final cards (call once the grading has returned)."""
        self._harvest()
        if np.isnan(self.total).any() or np.isnan(self.start_total).any():
            raise RuntimeError("not every game was played to the end")   # pragma: no cover
        return self

    def _harvest(self) -> None:
        b = self._batch
        if b is None:
            return
        sl = slice(self._off, self._off + b.n)
        self.total[sl] = b.total
        self.col_total[sl] = np.asarray(b.col_total, np.float64)[:, :self.rules.n_columns]
        self.card[sl] = b.card
        self._batch = None

    # ---------------------------------------------------------------- derived
    @property
    def to_go(self) -> np.ndarray:
        """float64 (games, T): points the game scored from the start of each turn on."""
        return self.total[:, None] - self.start_total

    @property
    def last_points(self) -> np.ndarray:
        """float64 (games,): points scored on the last turn."""
        return self.to_go[:, -1]


def play(agent, game, games: int, seed: int, baseline_scores=None):
    """Play ``games`` games of dice seed ``seed`` with ``agent`` through the project's grading
    and trace them: ``(GradeReport, TracedAgent, seconds)``."""
    from yamblab.oracle.yamb.grading import grade_yamb

    traced = TracedAgent(agent, game, games)
    t0 = time.perf_counter()
    report = grade_yamb(traced, game, games=games, seed=seed, oracle=False, baseline_scores=baseline_scores)
    return report, traced.finish(), time.perf_counter() - t0


def card_values(net, rules, cards: np.ndarray) -> np.ndarray:
    """The network's value of cards between turns (what full-turn search uses for its leaves).

    Args:
        net: a :class:`~yamblab.model.network.YambNet`.
        cards: int16 (..., C, R) cards, -1 open.

    Returns:
        float64 (...): expected points still to come, before the next turn's first roll.
    """
    from yamblab.games.yamb.game import encode_yamb_boundary

    shape = cards.shape[:-2]
    flat = cards.reshape((-1,) + cards.shape[-2:])
    return net.predict_value(encode_yamb_boundary(rules, flat), 16384).reshape(shape)


def middle_term_prices(net, t: TracedAgent, points: tuple[int, int] | None = None) -> list[dict]:
    """What the network's card values pay for a point of Min and of Max while the middle term
    Ones × (Max − Min) is still open, against what that point is worth at the end.

    At every turn start of ``t``'s games where a column may take its Min (Max) box next and the
    middle term stays open after it, the box is filled with two scores ``lo < hi`` and the
    network values both cards: the **price** is ``(V(hi) − V(lo)) / (hi − lo)`` points per
    point. Once the term is complete, a point of Min is worth −Ones (Max: +Ones) when Max > Min
    and 0 otherwise (the clamp), so the **yardstick** is −Ones (+Ones) of that column's final
    card, times 1 if its final Max > Min, under the agent's own play (a first-order value: the
    rest of the game is played as it was). When the middle term's last box is written its
    points are exact points of the turn in full-turn search; before that only these prices
    carry it.

    Args:
        net: the :class:`~yamblab.model.network.YambNet` whose values are priced.
        t: a finished :class:`TracedAgent` (its turn-start cards and final cards).
        points: ``{row: (lo, hi)}`` scores filled in; default Min 6 / 12 and Max 22 / 28.

    Returns:
        one dict per (box, column) with positions: ``box`` ("Min"/"Max"), ``column`` (kind),
        ``positions`` (int), ``price`` and ``worth`` ((mean, low, high) points per point, 95%,
        each game's positions averaged: games the unit) and ``diff`` (price − worth, paired).
    """
    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW
    from yamblab.games.yamb.scoring import column_next_rows

    r = t.rules
    points = points or {MIN_ROW: (6, 12), MAX_ROW: (22, 28)}
    G, T = t.start_total.shape
    out = []
    for row, (lo, hi) in points.items():
        sign, name = (-1, "Min") if row == MIN_ROW else (1, "Max")
        others = [x for x in (ONES_ROW, MAX_ROW, MIN_ROW) if x != row]
        for c, kind in enumerate(r.columns):
            col = t.start_card[:, :T - 1, c]                                   # (G, T-1, R)
            cand = (col[..., row] < 0) & (col[..., others] < 0).any(axis=-1)
            g, tt = np.nonzero(cand)
            ok = np.array([row in column_next_rows(kind, (col[a, b] < 0).tolist()) for a, b in zip(g, tt)], bool)
            g, tt = g[ok] if ok.size else g, tt[ok] if ok.size else tt
            if g.size == 0:
                continue
            cards = t.start_card[g, tt]
            low, high = cards.copy(), cards.copy()
            low[:, c, row], high[:, c, row] = lo, hi
            price = (card_values(net, r, high) - card_values(net, r, low)) / (hi - lo)
            fin = t.card[g, c]
            worth = sign * fin[:, ONES_ROW] * (fin[:, MAX_ROW] > fin[:, MIN_ROW])
            n = np.bincount(g, minlength=G)
            has = n > 0
            per_game = [np.bincount(g, weights=x, minlength=G)[has] / n[has] for x in (price, worth)]
            out.append({"box": name, "column": kind, "positions": int(g.size),
                        "price": mean_ci(per_game[0]), "worth": mean_ci(per_game[1]),
                        "diff": mean_ci(per_game[0] - per_game[1])})
    return out


# ---------------------------------------------------------------------------- statistics
def phases(n_turns: int, k: int = 4) -> list[tuple[int, int]]:
    """``k`` consecutive turn ranges ``[lo, hi)`` (0-based) covering a game."""
    e = np.round(np.linspace(0, n_turns, k + 1)).astype(int)
    return [(int(a), int(b)) for a, b in zip(e[:-1], e[1:])]


def _sqrt_ci(x: np.ndarray) -> tuple[float, float, float]:
    m, lo, hi = mean_ci(x)
    return float(np.sqrt(m)), float(np.sqrt(max(lo, 0.0))), float(np.sqrt(hi))


def _within(pred: np.ndarray, real: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Over games ``idx``, each turn's means removed: the share of the per-turn variance of the
    realised points the forecast explains, their correlation, and the slope of realised on
    forecast (1: calibrated; above 1: the forecast spreads cards too little), float64 (3,)."""
    p, y = pred[idx], real[idx]
    pc, yc = p - p.mean(axis=0), y - y.mean(axis=0)
    vy, vp, cov = float((yc ** 2).sum()), float((pc ** 2).sum()), float((pc * yc).sum())
    nan = float("nan")
    r2 = 1.0 - float(((pc - yc) ** 2).sum()) / vy if vy > 0 else nan
    corr = cov / np.sqrt(vp * vy) if vp > 0 and vy > 0 else nan
    return np.array([r2, corr, cov / vp if vp > 0 else nan])


def value_errors(pred: np.ndarray, real: np.ndarray, seed: int = 0) -> dict:
    """A forecast of points still to come against what was then scored, games as the unit.

    Args:
        pred, real: float64 (games, turns): forecasts and realised points still to come (any
            block of turns).

    Returns:
        dict of ``bias`` (mean of forecast − realised), ``rmse`` (each ``(value, low, high)``,
        95%), ``rmse_within`` (the RMSE with each turn's mean error removed), ``rmse_const``
        (of the constant-per-turn forecast: the realised spread at each turn, the dice noise
        included), ``explained``, ``corr`` and ``slope`` (share of the per-turn variance
        explained, the correlation and the slope of realised on forecast, each turn's means
        removed; ``(value, low, high)``, a bootstrap over games).
    """
    e = pred - real
    out = {"bias": mean_ci(e.mean(axis=1)), "rmse": _sqrt_ci((e ** 2).mean(axis=1))}
    ec = e - e.mean(axis=0)
    out["rmse_within"] = float(np.sqrt((ec ** 2).mean()))
    out["rmse_const"] = float(np.sqrt(((real - real.mean(axis=0)) ** 2).mean()))
    G = pred.shape[0]
    point = _within(pred, real, np.arange(G))
    lo = hi = np.full(3, np.nan)
    if G >= 3:
        with warnings.catch_warnings():          # a resample of a handful of games may be degenerate
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            res = stats.bootstrap((np.arange(G),), lambda i: _within(pred, real, i), vectorized=False,
                                  n_resamples=BOOT, method="percentile", random_state=np.random.default_rng(seed))
        lo, hi = res.confidence_interval.low, res.confidence_interval.high
    for k, key in enumerate(("explained", "corr", "slope")):
        out[key] = (float(point[k]), float(lo[k]), float(hi[k]))
    return out


def column_parts(t: TracedAgent) -> dict[str, np.ndarray]:
    """Each column's total split into its parts (:func:`~yamblab.games.yamb.scoring.column_parts`)
    for every game of a traced agent: dict of float64 (games, C) arrays ``upper`` (Ones …
    Sixes), ``bonus``, ``middle`` (Ones × (Max − Min)), ``lower`` (combination rows) and
    ``total``, in points.

    Raises:
        RuntimeError: the parts do not add up to the engine's column totals.
    """
    from yamblab.games.yamb.scoring import column_parts as parts

    G, C = t.col_total.shape
    out = {k: np.zeros((G, C)) for k in ("upper", "bonus", "middle", "lower", "total")}
    for g in range(G):
        for c in range(C):
            for k, v in parts(t.rules, t.card[g, c].tolist()).items():
                out[k][g, c] = v
    if not np.array_equal(out["total"], t.col_total):
        raise RuntimeError("column parts do not add up to the engine's column totals")   # pragma: no cover
    return out


def announce_figures(t: TracedAgent) -> dict:
    """Per-game announce-column figures of a traced agent, float64 (games,) each, and per box.

    Returns:
        dict: ``announcements`` (a game), ``voluntary``, ``compulsory``, ``pure`` (boxes written
        on a pure roll without announcing), ``zeros`` (boxes scored 0), ``failed`` (announced
        rows scored 0), ``box_mean`` (points per scoring box: Max and Min count only through
        the middle term), the column's ``upper``, ``bonus``, ``middle``, ``lower`` and
        ``total`` (points), ``roll`` (share of boxes written on each roll, float64 (rolls,)),
        and per box, float64 (games, R): ``points`` (as written), ``is_zero``,
        ``is_announced``.
    """
    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW

    r = t.rules
    ac = r.announce_column
    pts = t.card[:, ac, :].astype(np.float64)
    if (pts < 0).any():
        raise RuntimeError("an announce box was left open")          # pragma: no cover
    ann = t.announced
    rolls = np.bincount(t.fill_roll.ravel(), minlength=r.max_rolls + 1)[1:r.max_rolls + 1]
    parts = {k: v[:, ac] for k, v in column_parts(t).items()}
    scoring = np.delete(pts, [MAX_ROW, MIN_ROW], axis=1)
    return {
        "announcements": ann.sum(axis=1).astype(float),
        "voluntary": (ann & ~t.compulsory).sum(axis=1).astype(float),
        "compulsory": t.compulsory.sum(axis=1).astype(float),
        "pure": t.pure_fill.sum(axis=1).astype(float),
        "zeros": (pts == 0).sum(axis=1).astype(float),
        "failed": (ann & (pts == 0)).sum(axis=1).astype(float),
        "box_mean": scoring.mean(axis=1), **parts, "roll": rolls / max(rolls.sum(), 1),
        "points": pts, "is_zero": (pts == 0).astype(float), "is_announced": ann.astype(float),
    }


# ---------------------------------------------------------------------------- printing
def _ci(m, d: int = 1) -> str:
    v, lo, hi = m
    return f"{v:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _dci(m, d: int = 1) -> str:
    v, lo, hi = m
    return f"{v:+.{d}f} [{lo:+.{d}f}, {hi:+.{d}f}]"


def print_values(search: TracedAgent, V: np.ndarray, seed: int) -> None:
    """Section 1: ``V`` float64 (games, T) the network's value of each turn's starting card."""
    real = search.to_go
    Q = search.q_start
    G, T = real.shape
    print(f"\n1. VALUES AGAINST OUTCOMES (full-turn search, {G} games): points still to come from each turn's start")
    print("   V = the network's value of the card at the turn's start (before its first roll): what full-turn")
    print("       search uses for every card a turn can leave;  Q = the search's best action value after the")
    print("       first roll (this turn exactly, then V);  realised = final score - points at the turn's start.")
    print("   bias = mean of forecast - realised (games the unit);  const = RMSE of the constant-per-turn forecast")
    print("   (each turn's mean realised: the dice spread);  -bias = RMSE with each turn's mean error removed;")
    print("   explained = 1 - (-bias / const)^2;  corr, slope: realised on forecast within each turn (slope 1:")
    print("   calibrated; above 1: the forecast spreads the cards of a turn too little). 95% CIs.")
    v0, m = float(V[0, 0]), mean_ci(real[:, 0])
    print(f"   turn 1: V(empty card) = {v0:.1f}; mean final score {_ci(m)}; bias {v0 - m[0]:+.1f}")
    head = (f"   {'turns':<6}{'':3}{'bias':>24}{'RMSE':>22}{'-bias':>7}{'const':>7}"
            f"{'explained':>22}{'corr':>22}{'slope':>22}")
    print(head)
    print("   " + "-" * (len(head) - 3))
    for lo, hi in phases(T):
        for name, pred in (("V", V), ("Q", Q)):
            if np.isnan(pred[:, lo:hi]).any():
                continue
            s = value_errors(pred[:, lo:hi], real[:, lo:hi], seed)
            print(f"   {f'{lo + 1}-{hi}':<6}{name:3}{_dci(s['bias']):>24}{_ci(s['rmse']):>22}"
                  f"{s['rmse_within']:7.1f}{s['rmse_const']:7.1f}{_ci(s['explained'], 3):>22}"
                  f"{_ci(s['corr'], 3):>22}{_ci(s['slope'], 3):>22}")
    picks = sorted({0, 1, 4, 8, 12, 17, 25, 33, 38, 44, 48, 50, T - 1} & set(range(T)))
    print("   mean error by turn:  turn " + "".join(f"{t + 1:>7d}" for t in picks))
    for name, pred in (("V", V), ("Q", Q)):
        if not np.isnan(pred).any():
            bias = (pred - real).mean(axis=0)
            print(f"                        {name}    " + "".join(f"{bias[t]:+7.1f}" for t in picks))


def print_middle_prices(rows: list[dict]) -> None:
    if not rows:
        return
    print("\n   The middle term Ones x (Max - Min) in V: points V pays for one more point of Min / Max while the")
    print("   term is still open (at the turn starts where the column may take that box next), against what the")
    print("   point is worth at the end (-Ones / +Ones of the final card when Max > Min, the agent's own play).")
    print(f"   {'box':<5}{'column':<10}{'positions':>10}{'V pays [95% CI]':>24}{'worth [95% CI]':>24}"
          f"{'V - worth (paired)':>24}")
    for d in rows:
        print(f"   {d['box']:<5}{d['column']:<10}{d['positions']:>10}{_dci(d['price'], 2):>24}{_dci(d['worth'], 2):>24}"
              f"{_dci(d['diff'], 2):>24}")


def _table(label_w: int, names: list[str], other: list[str], ref: str, w: int = 25, wd: int = 26) -> str:
    return (f"   {'':<{label_w}}" + "".join(f"{n:>{w}}" for n in names)
            + "".join(f"{f'{n} - {ref}':>{wd}}" for n in other))


def print_announce(agents: dict[str, TracedAgent], ref: str) -> None:
    from yamblab.games.yamb.rules import ROW_LABELS

    r = next(iter(agents.values())).rules
    figs = {k: announce_figures(t) for k, t in agents.items()}
    names = list(agents)
    other = [n for n in names if n != ref]
    G = len(agents[ref].total)
    print(f"\n2. ANNOUNCE COLUMN ({G} games; {r.n_rows} announce boxes a game; mean a game [95% CI]; "
          f"differences paired on the same dice)")
    print(_table(34, names, other, ref))
    rows = [("announcements", "announcements"), ("  voluntary", "voluntary"),
            ("  compulsory (only these left)", "compulsory"), ("written on a pure roll, unannounced", "pure"),
            ("announced rows scored 0", "failed"), ("boxes scored 0", "zeros"),
            ("points per scoring box", "box_mean"), ("upper (Ones-Sixes)", "upper"), ("upper bonus", "bonus"),
            ("middle term Ones x (Max - Min)", "middle"), ("lower (combinations)", "lower"),
            ("announce column total", "total")]
    for label, key in rows:
        print(f"   {label:<34}" + "".join(f"{_ci(mean_ci(figs[n][key]), 2):>25}" for n in names)
              + "".join(f"{_dci(mean_ci(figs[n][key] - figs[ref][key]), 2):>26}" for n in other))
    print(f"   {'share written on roll 1, 2, ...':<34}" + "".join(
        f"{' '.join(f'{100 * x:.0f}%' for x in figs[n]['roll']):>25}" for n in names))
    print("\n   by box: mean points as written (share scored 0, share announced)")
    print(_table(10, names, other, ref, w=25))
    for j, row in enumerate(r.rows):
        cells = "".join(f"{figs[n]['points'][:, j].mean():9.1f} ({100 * figs[n]['is_zero'][:, j].mean():3.0f}%,"
                        f"{100 * figs[n]['is_announced'][:, j].mean():4.0f}%)" for n in names)
        diffs = "".join(f"{_dci(mean_ci(figs[n]['points'][:, j] - figs[ref]['points'][:, j])):>26}" for n in other)
        print(f"   {ROW_LABELS[row]:<10}{cells}{diffs}")


def print_last_turn(agents: dict[str, TracedAgent]) -> None:
    t0 = next(iter(agents.values()))
    r = t0.rules
    G = len(t0.total)
    print(f"\n3. THE LAST TURN (turn {r.n_turns}, {r.last_turn_rolls} rolls; {G} games; each agent on its own card)")
    print("   exact = the exact expected points after the turn's first roll (full-turn search with every leaf a")
    print("   full card: the last turn has no future); regret = the exact expected points lost, summed over the")
    print("   turn's decisions; realised - exact is paired game by game (its mean is minus the regret, plus dice).")
    print(f"   {'agent':<12}{'points':>22}{'exact':>22}{'realised - exact':>24}{'regret':>20}   last box's column")
    for n, t in agents.items():
        cols = np.bincount(t.last_column[t.last_column >= 0], minlength=r.n_columns) / G
        where = " ".join(f"{c} {100 * x:.0f}%" for c, x in zip(r.columns, cols))
        print(f"   {n:<12}{_ci(mean_ci(t.last_points)):>22}{_ci(mean_ci(t.last_exact)):>22}"
              f"{_dci(mean_ci(t.last_points - t.last_exact)):>24}{_ci(mean_ci(t.last_regret), 2):>20}   {where}")
    for n, t in agents.items():
        if not np.isnan(t.last_q).any():
            d = np.abs(t.last_q - t.last_exact)
            print(f"   {n}: its own value after the last turn's first roll minus the exact one: max |diff| "
                  f"{d.max():.1e}; games with a last-turn regret above 1e-6: {int((t.last_regret > 1e-6).sum())} of {G}")


def print_columns(reports: dict, agents: dict[str, TracedAgent], ref: str) -> None:
    r = agents[ref].rules
    G = len(agents[ref].total)
    names = list(agents)
    other = [n for n in names if n != ref]
    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW

    parts = {n: column_parts(t) for n, t in agents.items()}
    print(f"\n4. WHERE THE POINTS GO ({G} games; mean points a game [95% CI]; differences paired on the same dice)")
    print(_table(18, names, other, ref))
    for c, kind in enumerate(r.columns):
        for key in ("upper", "bonus", "middle", "lower", "total"):
            label = f"{kind} {key}" if key != "total" else f"{kind} (total)"
            print(f"   {label:<18}" + "".join(f"{parts[n][key][:, c].mean():25.1f}" for n in names)
                  + "".join(f"{_dci(mean_ci(parts[n][key][:, c] - parts[ref][key][:, c])):>26}" for n in other))
            if key == "middle":
                print(f"   {'  Ones/Max/Min':<18}" + "".join(
                    f"{'/'.join(f'{agents[n].card[:, c, row].mean():.1f}' for row in (ONES_ROW, MAX_ROW, MIN_ROW)):>25}"
                    for n in names) + "   (mean box scores as written)")
    print(f"   {'card total':<18}" + "".join(f"{_ci((reports[n].mean,) + tuple(reports[n].ci)):>25}" for n in names)
          + "".join(f"{_dci((reports[n].diff_mean,) + tuple(reports[n].diff_ci)):>26}" for n in other))
    for n in names:
        by = reports[n].by_column
        if not np.allclose([by[k] for k in r.columns], parts[n]["total"].mean(axis=0)):
            raise RuntimeError("the columns' parts disagree with the grading's by_column")  # pragma: no cover


# ---------------------------------------------------------------------------- main
def load(path: str):
    """The game and network of a checkpoint of a Yamb card with several columns.

    Raises:
        YamblabError: no such file, a damaged checkpoint, one without a run config, or one of
            another game (Yahtzee, a single Yamb column).
    """
    import yaml

    from yamblab.model.checkpoint import load_checkpoint, network_from_state
    from yamblab.training.config import RunConfig
    from yamblab.training.configio import validate

    p = Path(path)
    if not p.is_file():
        raise YamblabError(f"no checkpoint file at {path}")
    state = load_checkpoint(p)
    if "config" not in state:
        raise YamblabError(f"checkpoint {path} holds no run config (is it a training checkpoint?)")
    cfg = validate(RunConfig, yaml.safe_load(state["config"]), str(path))
    if cfg.game != "yamb":
        raise YamblabError(f"checkpoint {path} is a {cfg.game} network; this measures a Yamb card of "
                           "several columns (e.g. configs/jamb-cpu.yaml)")
    game = cfg.game_obj
    if len(game.rules.columns) < 2:
        raise YamblabError(f"checkpoint {path} plays the single {game.rules.columns[0]} column, which has an "
                           "exact oracle: grade it with `yamblab grade` or benchmarks/value_drift.py")
    net = network_from_state(state, source=str(path))
    info = f"iteration {state.get('iteration', '?')}, {float(state.get('elapsed', 0)) / 60:.1f} minutes"
    return game, net, info


def run(net, game, games: int, seed: int, policy_head: bool = True):
    """Play the heuristic bot, full-turn search on ``net`` and (optionally) its policy head on
    the same dice: ``(reports, traced agents, seconds)``, dicts keyed by agent: ``"search"``,
    ``"policy"`` (the policy head alone) and ``"heuristic"``."""
    from yamblab.agents.base import make_agent
    from yamblab.agents.search_agent import network_agent

    reports, traced, secs = {}, {}, {}
    ref, ref_trace, ref_s = play(make_agent("heuristic", game, seed=seed), game, games, seed)
    players = [("search", network_agent(net, game, "full_turn"))]
    if policy_head:
        players.append(("policy", network_agent(net, game, "none")))
    for name, agent in players:
        reports[name], traced[name], secs[name] = play(agent, game, games, seed, baseline_scores=ref.scores)
    reports["heuristic"], traced["heuristic"], secs["heuristic"] = ref, ref_trace, ref_s
    return reports, traced, secs


def deeper(net, game, games: int, seed: int, k: int, search_scores: np.ndarray):
    """Full-turn search with its last roll's ``k`` best boxes valued a turn deeper, on the same
    dice: ``(GradeReport paired with full-turn search's scores, the search, seconds)``."""
    from yamblab.agents.search_agent import network_agent
    from yamblab.search.yamb_search import YambLookaheadSearch

    agent = network_agent(net, game, "full_turn", name=f"search, {k} boxes a turn deeper")
    agent.search = YambLookaheadSearch(game.rules, agent.search.valuation, k)
    report, _, secs = play(agent, game, games, seed, baseline_scores=search_scores)
    return report, agent.search, secs


def print_deeper(report, search, secs: float, search_secs: float, search_mean: float) -> None:
    print(f"\n5. ONE TURN DEEPER ({len(report.scores)} games; the box choice after each turn's last roll: its "
          f"{search.k} best boxes by full-turn Q valued with the card they leave taken to its next turn's start)")
    share = search.changed / max(search.revalued, 1)
    print(f"   box choices revalued {search.revalued} ({search.revalued / len(report.scores):.1f} a game), "
          f"changed {search.changed} ({100 * share:.1f}%)")
    print(f"   mean score {_ci((report.mean,) + tuple(report.ci))} against full-turn search's {search_mean:.1f}: "
          f"{_dci((report.diff_mean,) + tuple(report.diff_ci))} a game, paired on the same dice")
    print(f"   played in {secs:.0f} s ({secs / max(search_secs, 1e-9):.1f} times full-turn search's {search_secs:.0f} s)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a training checkpoint of a Yamb card of several columns "
                                      "(runs/RUN/checkpoint.pt)")
    p.add_argument("--games", type=int, default=500, help="games each agent plays (default 500)")
    p.add_argument("--seed", type=int, default=0, help="dice seed: every agent plays the same dice (default 0)")
    p.add_argument("--no-policy-head", action="store_true", help="leave out the policy head alone")
    p.add_argument("--lookahead", type=int, default=3, metavar="K",
                   help="measurement 5: the last roll's K best boxes valued a turn deeper (default 3; 0 leaves it out)")
    args = p.parse_args(argv)
    if not 1 <= args.games <= 100_000:
        p.error("--games must be between 1 and 100000")
    if not 0 <= args.seed < 2 ** 63:
        p.error("--seed must be between 0 and 2**63 - 1")
    if args.lookahead < 0:
        p.error("--lookahead must be 0 (left out) or a number of boxes")
    try:
        game, net, info = load(args.checkpoint)
    except YamblabError as exc:
        raise SystemExit(f"error: {exc}") from None
    boxes = game.rules.n_columns * game.rules.n_rows
    if args.lookahead > boxes:
        p.error(f"--lookahead {args.lookahead}: this card has {boxes} boxes")
    t0 = time.perf_counter()
    reports, traced, secs = run(net, game, args.games, args.seed, policy_head=not args.no_policy_head)
    print(f"{args.checkpoint} ({info}) · yamb {game.label} · {args.games} games · dice seed {args.seed}")
    print("   agents: search = full-turn search on the network's values; policy = its policy head alone;")
    print("   heuristic = the heuristic bot. Same dice for all. Played in "
          + ", ".join(f"{n} {s:.0f} s" for n, s in secs.items()) + ".")
    search = traced["search"]
    print_values(search, card_values(net, game.rules, search.start_card), args.seed)
    print_middle_prices(middle_term_prices(net, search))
    if game.rules.announce_column >= 0:
        print_announce(traced, "heuristic")
    print_last_turn(traced)
    print_columns(reports, traced, "heuristic")
    if args.lookahead:
        report, deep, deep_secs = deeper(net, game, args.games, args.seed, args.lookahead, reports["search"].scores)
        print_deeper(report, deep, deep_secs, secs["search"], reports["search"].mean)
    print(f"\n(wall time {time.perf_counter() - t0:.0f} s)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
