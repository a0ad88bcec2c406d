"""Expectimax search over exact dice chance nodes (the YoloYamb post, "The Approach"): Yahtzee here,
Yamb in :mod:`yamblab.search.yamb_search`; :func:`~yamblab.search.registry.make_search` picks
the one a game needs.

Three depths (:data:`~yamblab.search.registry.DEPTHS`):

* ``"none"``: no search; the agent plays the policy head alone.
* ``"one_step"``: YoloYamb's search. Every legal move is valued one step ahead: a hold by
  the exact average, over every outcome of the rerolled dice (``P(roll | keep)``, multinomial),
  of the value head at the resulting position; a box by its points (with bonuses) plus the
  value head at the boundary state it leaves. The next turn's first roll is the chance node
  of that boundary state: the value head is trained on boundary positions (dice absent) to
  predict exactly that average, so it is not expanded a second time.
* ``"full_turn"``: exact play to the end of the turn. The within-turn pass of the oracle
  (:func:`yamblab.oracle.yahtzee._kernels.turn_solutions`) runs with the valuation at the at most
  44 boundary states the turn can end in (the same pass as the oracle's). With the oracle table as
  valuation this is optimal play.

Every search returns **Q** for every legal action in the shared 208-action space
(:mod:`yamblab.games.encoding`): the expected points still to come from the position (this
turn included) after taking the action; ``-inf`` for illegal actions. All network leaves of
all games of a decision go through one batched forward pass.

A **boundary position** (between turns, before the first roll) is encoded with no dice
(faces 0), rolls-left slot 3 and no legal action; see
:func:`~yamblab.games.yahtzee.game.encode_yahtzee_boundary`.
"""

from __future__ import annotations

import numpy as np

from yamblab.games.dice import KEEPS, P_ROLL_GIVEN_KEEP, ROLLS
from yamblab.games.yahtzee.canonical import LOWER_REPRESENTATIVE, canonical_cards  # LOWER_…: a successor's lower box
from yamblab.games.encoding import HOLD_OFFSET, N_ACTIONS, EncodedBatch
from yamblab.games.yahtzee.game import encode_yahtzee_boundary as encode_boundary
from yamblab.games.yahtzee.game import encode_yahtzee_positions as encode_positions
from yamblab.games.yahtzee.rules import YahtzeeRules
from yamblab.oracle.yahtzee import _kernels
from yamblab.oracle.yahtzee.turn import TurnValues, hold_values
from yamblab.search.valuation import NetworkValuation, is_valuation

YAHTZEE_BOX = 11
CHANCE_BOX = 12


# The at most 44 ways a turn can end: (box, points).
_CAND_BOX = np.array([c for c in range(6) for _ in range(6)] + [6, 7, 8, 9, 10, 12, 11, 11], np.int64)
_CAND_PTS = np.array([(c + 1) * n for c in range(6) for n in range(6)]
                     + [LOWER_REPRESENTATIVE[b] for b in (6, 7, 8, 9, 10, 12)] + [0, 50], np.int64)
N_SUCCESSOR_CANDIDATES = _CAND_BOX.size  # 44


def mask12_of(box: np.ndarray) -> np.ndarray:
    """Bit of a non-Yahtzee box in the 12-bit table mask (Chance at bit 11), int64."""
    box = np.asarray(box)
    return np.where(box == CHANCE_BOX, 1 << 11, np.where(box == YAHTZEE_BOX, 0, 1 << np.minimum(box, 10)))


def successors(batch, games: np.ndarray, rules: YahtzeeRules):
    """The boundary states each game's current turn can end in.

    Args:
        batch: a YahtzeeBatch; games: int64 (g,) indices of unfinished games.

    Returns:
        ``(owner int64 (k,), states int64 (k, 3), box_scores int16 (k, 13), upper_raw int64 (k,),
        terminal bool (k,))``: ``owner`` indexes ``games``; states are (mask12, ystate, upper).
    """
    games = np.asarray(games, np.int64)
    cur = batch.boundary_states()[games]
    scores = batch.box_scores[games].astype(np.int16)
    up_raw = batch.upper_raw[games].astype(np.int64)
    valid = scores[:, _CAND_BOX] < 0                                      # (g, 44)
    owner, cand = np.nonzero(valid)
    box = _CAND_BOX[cand]
    pts = _CAND_PTS[cand]
    new_scores = scores[owner].copy()
    new_scores[np.arange(owner.size), box] = pts
    is_upper = box < 6
    new_raw = up_raw[owner] + np.where(is_upper, pts, 0)
    states = cur[owner].copy()
    states[:, 0] |= mask12_of(box)
    states[:, 1] = np.where(box == YAHTZEE_BOX, np.where(pts == 50, 2, 1), states[:, 1])
    states[:, 2] = np.minimum(new_raw, 63) if rules.upper_bonus else 0
    terminal = (new_scores >= 0).all(axis=1)
    return owner.astype(np.int64), states, new_scores, new_raw, terminal


def shared_q(box: np.ndarray, hold: np.ndarray, legal45: np.ndarray) -> np.ndarray:
    """Q in the shared action space, float64 (n, 208), ``-inf`` on illegal actions.

    Args:
        box: float (n, 13) box values; hold: float (n, 32) hold values; legal45: bool (n, 45).
    """
    n = box.shape[0]
    q = np.full((n, N_ACTIONS), -np.inf)
    q[:, :13] = np.where(legal45[:, :13], box, -np.inf)
    q[:, HOLD_OFFSET:HOLD_OFFSET + 32] = np.where(legal45[:, 13:], hold, -np.inf)
    return q


class FullTurnSearch:
    """Exact play to the end of the turn against a valuation of boundary states.

    Args:
        rules: the variant.
        valuation: a float64 (4096, 3, 64) table (the oracle's, or any other), an
            :class:`~yamblab.oracle.yahtzee.table.OracleTable`, or any object with a method
            ``values(enc: EncodedBatch) -> float64 (m,)`` such as :class:`NetworkValuation`.

    The keep values of a turn are computed once, when the turn starts (like
    :class:`~yamblab.oracle.yahtzee.turn.TurnValues`); a network valuation is asked once
    per turn for the at most 44 successor boundary states of every game, all games in one
    batched forward pass.
    """

    def __init__(self, rules: YahtzeeRules, valuation):
        self.rules = rules
        self.valuation = valuation
        self.table_values = None
        self.net_values = None
        if is_valuation(valuation):
            self.net_values = valuation
            self.scratch = np.zeros((4096, 3, 64))
        else:
            table = getattr(valuation, "values", valuation)
            self.table_values = TurnValues(np.asarray(table, np.float64), rules)
        self._turn = None

    def _args(self):
        r = self.rules
        return r.joker_code, r.upper_bonus, r.yahtzee_bonus

    def reset(self) -> None:
        self._turn = None

    def _update(self, batch) -> None:
        n = batch.n
        if self._turn is None or self._turn.shape[0] != n:
            self._turn = np.full(n, -1, np.int64)
            self.E1 = np.zeros((n, 462))
            self.E2 = np.zeros((n, 462))
            self.succ_states: list = [None] * n
            self.succ_values: list = [None] * n
            self.turn_value = np.zeros(n)
        turn = batch.turn.astype(np.int64)
        need = np.flatnonzero((turn < 13) & (turn != self._turn))
        if not need.size:
            return
        owner, states, scores, raw, terminal = successors(batch, need, self.rules)
        vals = np.zeros(owner.size)
        live = ~terminal
        if live.any():
            vals[live] = self.net_values.values(encode_boundary(scores[live], raw[live], self.rules))
        split = np.searchsorted(owner, np.arange(need.size + 1))
        for j, g in enumerate(need):
            self.succ_states[g] = states[split[j]:split[j + 1]]
            self.succ_values[g] = vals[split[j]:split[j + 1]]
        # One pass for all games: positions are encoded from the canonical card of their state,
        # so games that share a successor state give it the same value.
        self.scratch[states[:, 0], states[:, 1], states[:, 2]] = vals
        tv = np.zeros(need.size)
        e1, e2 = _kernels.turn_solutions(self.scratch, *self._args(), np.ascontiguousarray(batch.boundary_states()[need]), tv)
        self.E1[need] = e1
        self.E2[need] = e2
        self.turn_value[need] = tv
        self._turn[need] = turn[need]

    def action_values(self, batch):
        """``(box (n, 13), hold (n, 32), keeps (n, 32))`` as in :meth:`TurnValues.action_values`.

        The successors of every game in play are written into one table before one batched
        pass (a game whose turn began under other weights keeps the values of its turn's start
        unless another game shares the state).
        """
        if self.table_values is not None:
            return self.table_values.action_values(batch)
        self._update(batch)
        n = batch.n
        box = np.full((n, 13), -np.inf)
        play = np.flatnonzero(batch.turn < 13)
        if play.size:
            s = np.concatenate([self.succ_states[g] for g in play])
            self.scratch[s[:, 0], s[:, 1], s[:, 2]] = np.concatenate([self.succ_values[g] for g in play])
            box[play] = _kernels.box_values(self.scratch, *self._args(),
                                            np.ascontiguousarray(batch.boundary_states()[play]),
                                            np.ascontiguousarray(batch.roll_indices()[play]))
        keeps = batch.hold_keeps()
        return box, hold_values(self.E1, self.E2, keeps, batch.rolls_left), keeps

    def successor_samples(self, batch, games: np.ndarray, k: int, rng):
        """Bootstrapped value targets: see :func:`successor_samples` (this search's valuation)."""
        return successor_samples(batch, games, k, self.rules, self.valuation, rng)

    def random_state_samples(self, batch, games: np.ndarray, k: int, rng):
        """Bootstrapped value targets: see :func:`random_state_samples` (this search's valuation)."""
        return random_state_samples(batch, games, k, self.rules, self.valuation, rng)

    def q(self, batch) -> np.ndarray:
        """Q of every action, float64 (n, 208), ``-inf`` on illegal actions and finished games."""
        box, hold, _ = self.action_values(batch)
        return shared_q(box, hold, batch.legal_actions())


class OneStepSearch:
    """YoloYamb's one-step expectimax with a network's value head at the leaves.

    Holds: ``Q(h) = Σ_r P(r | keep(h)) · V(dice r in the rerolled slots, one roll fewer)``
    over every outcome ``r`` exactly; boxes: points (with bonuses) plus ``V`` of the boundary
    state left behind. Distinct keeps of a game are expanded once.

    Args:
        rules: the variant; valuation: a :class:`NetworkValuation`.
    """

    def __init__(self, rules: YahtzeeRules, valuation: NetworkValuation):
        self.rules = rules
        self.valuation = valuation
        self.turn = FullTurnSearch(rules, valuation)   # for the box values (successor leaves)

    def reset(self) -> None:
        self.turn.reset()

    def q(self, batch) -> np.ndarray:
        n = batch.n
        live = np.flatnonzero(batch.turn < 13)
        box = np.full((n, 13), -np.inf)
        hold = np.full((n, 32), -np.inf)
        if live.size:   # box leaves: points + V(boundary successor), as in the turn pass
            tb, _, _ = self.turn.action_values(batch)
            box[live] = tb[live]
        rolling = live[batch.rolls_left[live] > 0]
        if rolling.size:
            keeps = batch.hold_keeps().astype(np.int64)
            rows_g, rows_k, leaf_dice, leaf_p = [], [], [], []
            for g in rolling:
                dice = batch.dice[g]
                for k in np.unique(keeps[g]):
                    outs = np.flatnonzero(P_ROLL_GIVEN_KEEP[k] > 0)
                    rows_g.append(np.full(outs.size, g))
                    rows_k.append(np.full(outs.size, k))
                    leaf_p.append(P_ROLL_GIVEN_KEEP[k, outs])
                    leaf_dice.append(_place_dice(dice, k, outs))
            rg = np.concatenate(rows_g)
            rk = np.concatenate(rows_k)
            p = np.concatenate(leaf_p)
            d = np.concatenate(leaf_dice)
            enc = encode_positions(batch.box_scores[rg], batch.upper_raw[rg], d,
                                   batch.rolls_left[rg].astype(np.int64) - 1, self.rules)
            v = self.valuation.values(enc)
            # sum p * v per (game, keep)
            key = rg * 462 + rk
            uniq, inv = np.unique(key, return_inverse=True)
            qk = np.bincount(inv, weights=p * v, minlength=uniq.size)
            table = dict(zip(uniq.tolist(), qk.tolist()))
            for g in rolling:
                hold[g] = [table[g * 462 + int(k)] for k in keeps[g]]
        return shared_q(box, hold, batch.legal_actions())


def _place_dice(dice: np.ndarray, keep: int, outs: np.ndarray) -> np.ndarray:
    """Physical dice after holding ``keep`` from ``dice`` and rolling to each roll in ``outs``.

    Held dice stay in their slots (lowest slots first for equal faces); the rerolled slots
    get the faces ``roll − keep`` in ascending order. Returns int8 (len(outs), 5).
    """
    need = KEEPS[keep].astype(np.int64).copy()
    held = np.zeros(5, bool)
    for i, f in enumerate(dice):
        if need[f - 1] > 0:
            need[f - 1] -= 1
            held[i] = True
    out = np.repeat(dice[None, :].astype(np.int8), outs.size, axis=0)
    free = np.flatnonzero(~held)
    if free.size:
        diff = ROLLS[outs].astype(np.int64) - KEEPS[keep].astype(np.int64)[None]   # (m, 6)
        faces = np.repeat(np.tile(np.arange(1, 7), (outs.size, 1)).ravel(), diff.ravel()).reshape(outs.size, free.size)
        out[:, free] = faces
    return out


class _Cards:
    """Duck-typed boundary positions (cards between turns) for :class:`FullTurnSearch`."""

    def __init__(self, box_scores: np.ndarray, upper_raw: np.ndarray, states: np.ndarray):
        self.box_scores = np.asarray(box_scores, np.int16)
        self.upper_raw = np.asarray(upper_raw, np.int64)
        self._states = np.asarray(states, np.int64)
        self.n = self.box_scores.shape[0]
        self.turn = (self.box_scores >= 0).sum(axis=1).astype(np.int64)

    def boundary_states(self) -> np.ndarray:
        return self._states


def successor_samples(batch, games: np.ndarray, k: int, rules: YahtzeeRules, valuation, rng):
    """Up to ``k`` random non-terminal successor boundary states of each game's current turn,
    with their full-turn search values against ``valuation`` (bootstrapped value targets).

    Returns:
        ``(encoded boundary positions, value targets float64 (m,), owner games int64 (m,))``, or
        None when there is nothing to sample.
    """
    owner, states, scores, raw, terminal = successors(batch, games, rules)
    live = np.flatnonzero(~terminal)
    if live.size == 0 or k <= 0:
        return None
    pick = live[np.lexsort((rng.random(live.size), owner[live]))]       # shuffled within game
    o = owner[pick]
    first = np.searchsorted(o, o, side="left")
    pick = pick[np.arange(pick.size) - first < k]
    enc, values = _turn_backups(scores[pick], raw[pick], states[pick], rules, valuation)
    return enc, values, np.asarray(games)[owner[pick]]


def _turn_backups(box_scores: np.ndarray, upper_raw: np.ndarray, states: np.ndarray, rules: YahtzeeRules,
                  valuation) -> tuple[EncodedBatch, np.ndarray]:
    """Cards between turns, encoded, with their one-turn backups: the exact expectation over the
    turn's dice of its points plus ``valuation``'s value of where it ends, float64 (m,)."""
    cards = _Cards(box_scores, upper_raw, states)
    fs = FullTurnSearch(rules, valuation)
    fs._update(cards)
    return encode_boundary(cards.box_scores, cards.upper_raw, rules), fs.turn_value.copy()


_LAYERS: dict = {}


def _cards_by_layer(rules: YahtzeeRules):
    """The canonical card of every reachable unfinished boundary state, grouped by boxes filled
    (cached per variant): ``(states, box_scores, upper_raw, order, starts)``, where
    ``order[starts[f]:starts[f + 1]]`` are the cards with ``f`` boxes filled."""
    got = _LAYERS.get(rules.key)
    if got is None:
        states, scores, raw = canonical_cards(rules)
        filled = (scores >= 0).sum(axis=1)
        order = np.argsort(filled, kind="stable")
        starts = np.searchsorted(filled[order], np.arange(14))
        got = _LAYERS[rules.key] = (states, scores, raw, order, starts)
    return got


def random_state_samples(batch, games: np.ndarray, k: int, rules: YahtzeeRules, valuation, rng):
    """``k`` random boundary states per game, anywhere on the card, with their full-turn search
    values against ``valuation`` (bootstrapped value targets, as :func:`successor_samples`).

    Each game at a turn's start draws ``k`` states uniformly among all reachable unfinished
    states with one box more filled than its card (the layer its successors lie in), whether or
    not any game could reach them. Full-turn search compares successor values; the values of
    states that play never visits are extrapolations, and measured runs overestimated them
    first (benchmarks/value_drift.py), the late turns most, before search chose them. Training
    on every part of each layer keeps those values one-turn backups like the rest.

    Args:
        batch: a YahtzeeBatch; games: int64 (g,) games at a turn's start; k: states per game.

    Returns:
        ``(encoded boundary positions, value targets float64 (m,), owner games int64 (m,))``, or
        None when there is nothing to sample (``k`` 0, or every game is on its last turn).
    """
    games = np.asarray(games, np.int64)
    states, scores, raw, order, starts = _cards_by_layer(rules)
    layer = (batch.box_scores[games] >= 0).sum(axis=1) + 1
    games = games[layer < 13]
    layer = layer[layer < 13]
    if games.size == 0 or k <= 0:
        return None
    lo, hi = starts[layer], starts[layer + 1]
    pick = order[(lo[:, None] + (rng.random((games.size, k)) * (hi - lo)[:, None]).astype(np.int64)).ravel()]
    enc, values = _turn_backups(scores[pick], raw[pick], states[pick], rules, valuation)
    return enc, values, np.repeat(games, k)


def decode_yahtzee(enc: EncodedBatch):
    """Scorecards back from Yahtzee encodings.

    Returns:
        ``(box_scores int16 (m, 13) with −1 open, upper_raw int64 (m,), states int64 (m, 3)
        of (mask12, ystate, upper subtotal capped at 63))``.
    """
    filled = enc.columns[:, 0, :13, 0] > 0.5
    scores = np.where(filled, np.rint(enc.columns[:, 0, :13, 1] * 80), -1).astype(np.int16)
    upper_raw = np.where(filled[:, :6], scores[:, :6], 0).sum(axis=1).astype(np.int64)
    m12 = (filled[:, :11] * (1 << np.arange(11))).sum(axis=1) + filled[:, 12] * (1 << 11)
    ys = np.where(~filled[:, 11], 0, np.where(scores[:, 11] == 50, 2, 1))
    states = np.stack([m12, ys, np.minimum(upper_raw, 63)], axis=1).astype(np.int64)
    return scores, upper_raw, states


def oracle_valuation(game, table=None) -> np.ndarray:
    """The exact table's float64 (4096, 3, 64) boundary values of ``game``'s rules (``table``: one
    already loaded, or its values; else it is loaded or built): full-turn search on them plays
    optimally."""
    if table is None:
        from yamblab.oracle.yahtzee.table import OracleTable

        table = OracleTable.get(game.rules)
    return getattr(table, "values", table)


def oracle_position_values(enc: EncodedBatch, rules: YahtzeeRules, table) -> np.ndarray:
    """Exact optimal points still to come of encoded Yahtzee positions, float64 (m,).

    Boundary positions (no dice) get the table's value of their state; positions with dice
    the value of their best action. Used by the off-by-default oracle distillation and by
    tests (a perfect "value head").
    """
    from yamblab.games.dice import hold_to_keep, roll_index

    V = np.ascontiguousarray(getattr(table, "values", table), dtype=np.float64)
    _, _, states = decode_yahtzee(enc)
    if not rules.upper_bonus:
        states[:, 2] = 0
    out = np.zeros(len(enc))
    nod = enc.dice[:, 0] == 0
    out[nod] = V[states[nod, 0], states[nod, 1], states[nod, 2]]
    w = np.flatnonzero(~nod)
    if w.size:
        args = (rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus)
        st = np.ascontiguousarray(states[w])
        dice = enc.dice[w, :5]
        rolls = np.array([roll_index(d) for d in dice], np.int64)
        box = _kernels.box_values(V, *args, st, rolls)
        e1, e2 = _kernels.turn_solutions(V, *args, st)
        keeps = np.array([[hold_to_keep(d, h) for h in range(32)] for d in dice], np.int64)
        hold = hold_values(e1, e2, keeps, enc.state[w, :6].argmax(axis=1))
        out[w] = np.maximum(box.max(axis=1), hold.max(axis=1))
    return out
