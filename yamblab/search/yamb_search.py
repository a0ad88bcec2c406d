"""Expectimax for Yamb over exact dice chance nodes, for 5 and 6 dice (the YoloYamb post,
"The Approach").

* :class:`YambFullTurnSearch` plays the rest of the turn exactly — every reroll, every box,
  whether to announce after the first roll, the longer last turn — against a
  :class:`~yamblab.search.valuation.Valuation` of the card the turn leaves: it is Yamb's
  per-turn pass (:class:`~yamblab.oracle.yamb.turn.TurnPlanner`) with the box valuation
  ``W(box, s) = points the box adds now + V(card with s in the box)``. The valuation is asked
  once per turn, for every box the turn may end in and every score that box can take, all
  games in one batched call. With the exact oracle of a single-column game as valuation it is
  optimal play.
* :class:`YambLookaheadSearch` is full-turn search whose box choice after the last roll values
  its best few boxes one turn deeper (a measurement of what deeper search would buy: see
  ``benchmarks/yamb_limits.py``).
* :class:`YambOneStepSearch` is YoloYamb's search: every legal move valued one step ahead. A
  hold by the exact average over every outcome of the rerolled dice (``P(roll | keep)``) of
  the value at the position that follows; a box by its points plus the value of the card it
  leaves; an announcement by the value of the same dice with that row announced. All leaves of
  all games of a step go through one batched call of the valuation.

Both return **Q** for every action in the shared 208-action space
(:mod:`yamblab.games.encoding`): expected points still to come from the position (this turn
included) after the action; ``-inf`` for illegal actions and finished games.
"""

from __future__ import annotations

import numpy as np

from yamblab.games.dice6 import dice_tables
from yamblab.games.encoding import N_ACTIONS
from yamblab.games.yamb.engine import yamb_action_to_shared
from yamblab.games.yamb.game import BoundaryEncoder, encode_yamb_boundary, encode_yamb_positions
from yamblab.games.yamb.rules import YambRules
from yamblab.games.yamb.scoring import column_next_rows, open_boxes
from yamblab.oracle.yamb.turn import NEG, TurnPlanner

CHUNK = 128


def _shared_index(rules: YambRules) -> np.ndarray:
    return yamb_action_to_shared(rules, np.arange(rules.n_columns * rules.n_rows + (1 << rules.n_dice)
                                                  + rules.n_rows))


def to_shared_q(rules: YambRules, q: np.ndarray) -> np.ndarray:
    """Engine-space Q (n, A) → shared-space Q float64 (n, 208), ``-inf`` elsewhere."""
    out = np.full((q.shape[0], N_ACTIONS), -np.inf)
    out[:, _shared_index(rules)] = q
    return out


class YambFullTurnSearch(TurnPlanner):
    """Exact play to the end of the turn against a valuation of boundary cards.

    Args:
        rules: the Yamb rule set.
        valuation: a :class:`~yamblab.search.valuation.Valuation` (a network, or the exact
            oracle of a single-column game).

    Attributes:
        leaves: boundary cards valued so far (a throughput counter).
    """

    name = "full-turn search"

    def __init__(self, rules: YambRules, valuation):
        super().__init__(rules)
        self.valuation = valuation
        S = self.S[:, :, :rules.max_rolls]
        #: distinct scores each row can take, one int64 array per row
        self.row_scores = [np.unique(S[:, r, :]) for r in range(rules.n_rows)]
        self._W = None
        self._Wturn = None
        self._encode_leaves = BoundaryEncoder(rules)
        self.leaves = 0

    def reset(self, batch=None) -> None:
        self._W = None
        self._K = None
        self._key = None

    # ------------------------------------------------------------------ valuation
    def box_values(self, batch, games: np.ndarray) -> np.ndarray:
        """``W`` float64 (len(games), C, R, smax + 1), computed once per game and turn."""
        n = batch.n
        r = self.rules
        if self._W is None or self._W.shape[0] != n:
            self._W = np.full((n, r.n_columns, r.n_rows, self.smax + 1), NEG)
            self._Wturn = np.full(n, -1, np.int64)
        games = np.asarray(games, np.int64)
        turn = batch.turn[games].astype(np.int64)
        stale = games[self._Wturn[games] != turn]
        if stale.size:
            self._fill(batch, stale)
            self._Wturn[stale] = batch.turn[stale]
        return self._W[games]

    def successor_cards(self, cards: np.ndarray):
        """Every card each turn may leave: a box its column's order allows, with each score that
        box can take.

        Args:
            cards: int16 (B, C, R) cards, -1 open.

        Returns:
            ``(owner, column, row, score)`` int64 (k,) each, and the cards left, int16 (k, C, R).
        """
        boxes, sizes, score = [], [], []       # one (game, column, row) per open box it may fill
        open_ = (cards < 0).tolist()
        for bi in range(cards.shape[0]):
            for c, kind in enumerate(self.rules.columns):
                for rr in column_next_rows(kind, open_[bi][c]):
                    sc = self.row_scores[rr]
                    boxes.append((bi, c, rr))
                    sizes.append(sc.size)
                    score.append(sc)
        if not boxes:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, empty, cards[:0].copy()
        o, c, rr = np.repeat(np.asarray(boxes, np.int64), sizes, axis=0).T
        sc = np.concatenate(score).astype(np.int64)
        nxt = cards[o].copy()
        nxt[np.arange(o.size), c, rr] = sc
        return o, c, rr, sc, nxt

    def place_values(self, batch, games: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Value of scoring the dice showing in each box, float64 (len(games), C * R), from the
        box values ``W`` (len(games), C, R, smax + 1) of those games (legality not applied)."""
        r = self.rules
        B = len(games)
        s_now = self.scores_now(batch.roll_indices()[games], batch.rolls_used[games])   # (B, R)
        return W[np.arange(B)[:, None, None], np.arange(r.n_columns)[None, :, None],
                 np.arange(r.n_rows)[None, None, :], s_now[:, None, :]].reshape(B, -1)

    def _fill(self, batch, games: np.ndarray) -> None:
        gain = self._immediate_gain(batch, games)                    # (B, C, R, smax+1)
        o, c, rr, s, nxt = self.successor_cards(batch.card[games])
        W = np.full(gain.shape, NEG)
        if o.size:
            full = (nxt >= 0).reshape(o.size, -1).all(axis=1)
            v = np.zeros(o.size)
            live = np.flatnonzero(~full)
            if live.size:
                by_card = getattr(self.valuation, "card_values", None)      # an exact oracle: no encoding
                v[live] = by_card(nxt[live]) if by_card else self.valuation.values(self._encode_leaves(nxt[live]))
                self.leaves += live.size
            W[o, c, rr, s] = gain[o, c, rr, s] + v
        self._W[games] = W

    # ------------------------------------------------------------------ action values
    def action_values(self, batch, games: np.ndarray | None = None) -> np.ndarray:
        """Q of every engine action, float64 (n, A): ``-inf`` where illegal or finished, and
        for games outside ``games`` (int64 indices; None: every game)."""
        r = self.rules
        n = batch.n
        if self._K is None or self._K.shape[0] != n:
            self._K = np.zeros((n, r.max_rolls - 1 if r.max_rolls > 1 else 1, self.tables.n_keeps))
            self._key = np.full(n, -1, dtype=np.int64)
        P, H = batch.n_placements, batch.n_holds
        q = np.full((n, batch.n_actions), -np.inf)
        live = np.flatnonzero(~batch.done)
        if games is not None:
            live = np.intersect1d(live, np.asarray(games, np.int64))
        if live.size == 0:
            return q
        legal = batch.legal_actions()
        hold_keeps = batch.hold_keeps()
        ridx = batch.roll_indices()
        for start in range(0, live.size, CHUNK):
            games = live[start:start + CHUNK]
            W = self.box_values(batch, games)
            stale = self._key[games] != self._plan_key(batch, games)
            rm = batch.rolls_max[games]
            for m in np.unique(rm[stale]):          # a turn's plan needs its own number of rolls
                sel = np.flatnonzero(stale & (rm == m))
                self._plan(batch, games[sel], W[sel])
            ru = batch.rolls_used[games].astype(np.int64)
            lg = legal[games]
            q[games, :P] = np.where(lg[:, :P], self.place_values(batch, games, W), -np.inf)
            jj = np.clip(ru - 1, 0, self._K.shape[1] - 1)
            hv = np.take_along_axis(self._K[games, jj], hold_keeps[games], axis=1)
            q[games, P:P + H] = np.where(lg[:, P:P + H], hv, -np.inf)
            can = np.flatnonzero(lg[:, P + H:].any(axis=1))
            if can.size:
                av, _ = self._announce_values(batch, games[can], W[can], hold_keeps[games[can]], ridx[games[can]],
                                              plans=False)
                q[games[can], P + H:] = np.where(lg[can, P + H:], av, -np.inf)
        return q

    def successor_samples(self, batch, games: np.ndarray, k: int, rng):
        """Bootstrapped value targets: see :func:`successor_samples` (this search's valuation)."""
        return successor_samples(self, batch, games, k, rng)

    def q(self, batch) -> np.ndarray:
        """Q in the shared action space, float64 (n, 208)."""
        return to_shared_q(self.rules, self.action_values(batch))


def oracle_valuation(game, table=None):
    """The exact oracle of a single Yamb column as a valuation of its boundary cards
    (``table`` is unused): full-turn search on it plays optimally."""
    from yamblab.oracle.yamb.oracles import column_oracle
    from yamblab.search.valuation import YambColumnOracleValuation

    return YambColumnOracleValuation(column_oracle(game.rules))


class _Cards:
    """Cards between turns as a batch the per-turn pass can plan (no dice rolled yet)."""

    def __init__(self, rules: YambRules, card: np.ndarray):
        self.card = np.asarray(card, np.int16)
        self.n = self.card.shape[0]
        n_open = open_boxes(self.card)
        self.turn = (rules.n_turns - n_open).astype(np.int16)
        self.rolls_max = np.where(n_open == 1, rules.last_turn_rolls, rules.rolls).astype(np.int8)
        self.rolls_used = np.zeros(self.n, np.int8)
        self.announced = np.full(self.n, -1, np.int8)
        self.done = n_open == 0


def turn_start_values(search: YambFullTurnSearch, cards: np.ndarray) -> np.ndarray:
    """The value of each card at the start of its next turn, before the first roll: the exact
    expectation over the first roll of turn-perfect play against ``search``'s valuation,
    **with** the option of announcing a row after the first roll (what the full-turn search
    weighs at every visited turn start) and the compulsory announcement the rules impose.

    For each first roll (every die thrown) the turn is worth the better of playing on
    unannounced (score the roll now, or keep dice under the unannounced plan) and announcing
    an open row of the announce column (score it now, or keep dice with only that box to
    aim for); the start is worth the average of that over the first roll's outcomes.

    Args:
        search: the search whose valuation values the cards the turn may leave.
        cards: int16 (m, C, R) unfinished cards, -1 open.

    Returns:
        float64 (m,) expected points from the turn's start to the end of the game.

    Raises:
        ValueError: a full card (it has no next turn).
    """
    cb = _Cards(search.rules, cards)
    if cb.done.any():
        raise ValueError(f"{int(cb.done.sum())} full card(s): a full card has no next turn")
    sub = YambFullTurnSearch(search.rules, search.valuation)        # box values apart from search's
    idx = np.arange(cb.n)
    v = sub.start_values(cb, idx, sub.box_values(cb, idx))
    search.leaves += sub.leaves
    return v


def successor_samples(search: YambFullTurnSearch, batch, games: np.ndarray, k: int, rng):
    """Up to ``k`` random unfinished cards each game's current turn can leave, with the value of
    the next turn's start under ``search``'s valuation (bootstrapped value targets for the cards
    that search asks about but games rarely visit; the Yamb counterpart of Yahtzee's).

    The value is :func:`turn_start_values`: the exact expectation over the next turn's dice of
    turn-perfect play against the valuation, the option of announcing included.

    Returns:
        ``(encoded boundary positions, value targets float64 (m,), owner games int64 (m,))``, or
        None when there is nothing to sample.
    """
    r = search.rules
    games = np.asarray(games, np.int64)
    o, _, _, _, nxt = search.successor_cards(batch.card[games])
    if o.size == 0 or k <= 0:
        return None
    live = np.flatnonzero(~(nxt >= 0).reshape(o.size, -1).all(axis=1))
    if live.size == 0:
        return None
    pick = live[np.lexsort((rng.random(live.size), o[live]))]          # shuffled within game
    first = np.searchsorted(o[pick], o[pick], side="left")
    pick = pick[np.arange(pick.size) - first < k]
    cards = nxt[pick]
    return encode_yamb_boundary(r, cards), turn_start_values(search, cards), games[o[pick]]


class YambLookaheadSearch(YambFullTurnSearch):
    """Full-turn search whose box choice after the turn's last roll looks one turn further.

    Where a turn has no roll left and more than one box is open to its dice, the ``k`` boxes
    with the best full-turn Q are valued again with the card each leaves taken to the start of
    its next turn: ``points the box adds now + turn_start_values(card left)`` (the exact
    expectation over the next turn's dice of turn-perfect play against the same valuation, the
    option to announce included) in place of ``points + V(card left)``. Every other Q is full-turn
    search's. A valuation that is its own one-turn search (the exact oracle of a single column)
    gives the same Q; a network's values that are not show up as changed choices.

    Two turns of search for every leaf would cost a full turn's search per card the turn may
    leave (hundreds a turn); the last roll's best few boxes cost ``k`` searches of a card.

    Args:
        rules: the Yamb rule set.
        valuation: a :class:`~yamblab.search.valuation.Valuation` of boundary cards.
        k: boxes valued a turn deeper at each such choice (the best ``k`` by full-turn Q).

    Attributes:
        revalued: box choices looked at so far (a counter).
        changed: those whose best box the deeper values changed.

    Raises:
        ValueError: ``k`` < 1.
    """

    name = "full-turn search, last box choice a turn deeper"

    def __init__(self, rules: YambRules, valuation, k: int = 3):
        if int(k) < 1:
            raise ValueError(f"k={k}: at least one box is valued a turn deeper")
        super().__init__(rules, valuation)
        self.k = int(k)
        self.revalued = 0
        self.changed = 0

    def action_values(self, batch) -> np.ndarray:
        """Q of every engine action, float64 (n, A), as :meth:`YambFullTurnSearch.action_values`
        with the last roll's ``k`` best boxes valued a turn deeper."""
        q = super().action_values(batch)
        r = self.rules
        P = batch.n_placements
        last = ~np.asarray(batch.done) & (np.asarray(batch.rolls_used) == np.asarray(batch.rolls_max))
        games = np.flatnonzero(last)
        games = games[np.isfinite(q[games, :P]).sum(axis=1) > 1]
        if games.size == 0:
            return q
        qp = q[games, :P]
        k = min(self.k, P)
        top = np.argsort(-qp, axis=1, kind="stable")[:, :k]
        gi, p = np.repeat(np.arange(games.size), k), top.ravel()
        ok = np.isfinite(qp[gi, p])
        gi, p = gi[ok], p[ok]
        col, row = np.divmod(p, r.n_rows)
        s_now = self.scores_now(batch.roll_indices()[games], batch.rolls_used[games])   # (g, R)
        cards = batch.card[games[gi]].copy()
        cards[np.arange(gi.size), col, row] = s_now[gi, row]
        live = np.flatnonzero(~(cards >= 0).reshape(gi.size, -1).all(axis=1))    # a full card is worth 0 either way
        if live.size:
            before = np.argmax(qp, axis=1)
            shallow = self.valuation.values(self._encode_leaves(cards[live]))
            deep = turn_start_values(self, cards[live])
            q[games[gi[live]], p[live]] += deep - shallow
            self.changed += int((np.argmax(q[games, :P], axis=1) != before).sum())
        self.revalued += games.size
        return q


class YambOneStepSearch:
    """YoloYamb's one-step expectimax for Yamb with a valuation at the leaves.

    Args:
        rules: the Yamb rule set.
        valuation: a :class:`~yamblab.search.valuation.Valuation` that values positions with
            dice (a network's value head) as well as boundary cards.
    """

    #: value each distinct leaf once (different keeps often reroll to the same dice in the same
    #: slots); off only to measure what it saves (``benchmarks/onestep_leaves.py``)
    dedup = True

    def __init__(self, rules: YambRules, valuation):
        self.rules = rules
        self.valuation = valuation
        self.turn = YambFullTurnSearch(rules, valuation)   # its W: the placements' leaves
        self.tables = dice_tables(rules.n_dice)

    def reset(self, batch=None) -> None:
        self.turn.reset()

    def action_values(self, batch, games: np.ndarray | None = None) -> np.ndarray:
        """Q of every engine action, float64 (n, A): ``-inf`` where illegal or finished, and
        for games outside ``games`` (int64 indices; None: every game)."""
        r = self.rules
        t = self.tables
        n = batch.n
        P, H = batch.n_placements, batch.n_holds
        q = np.full((n, batch.n_actions), -np.inf)
        live = np.flatnonzero(~batch.done)
        if games is not None:
            live = np.intersect1d(live, np.asarray(games, np.int64))
        if live.size == 0:
            return q
        legal = batch.legal_actions()
        # placements: points now + V(card left), from the full-turn search's box values
        W = self.turn.box_values(batch, live)
        q[live, :P] = np.where(legal[live, :P], self.turn.place_values(batch, live, W), -np.inf)
        # leaves with dice: every reroll outcome of every distinct keep, and every announcement
        hold_keeps = batch.hold_keeps()
        lg_g, lg_key, lg_p, lg_dice, lg_ru, lg_ann = [], [], [], [], [], []
        for g in live:
            holds = np.flatnonzero(legal[g, P:P + H])
            dice = batch.dice[g]
            for k in np.unique(hold_keeps[g, holds]):
                outs = np.flatnonzero(t.p_roll_given_keep[k] > 0)
                lg_g.append(np.full(outs.size, g))
                lg_key.append(np.full(outs.size, k))
                lg_p.append(t.p_roll_given_keep[k, outs])
                lg_dice.append(_place_dice(dice, t.keeps[k], t.rolls[outs]))
                lg_ru.append(np.full(outs.size, int(batch.rolls_used[g]) + 1))
                lg_ann.append(np.full(outs.size, int(batch.announced[g])))
            for row in np.flatnonzero(legal[g, P + H:]):
                lg_g.append(np.array([g]))
                lg_key.append(np.array([-1 - row]))
                lg_p.append(np.array([1.0]))
                lg_dice.append(dice[None].astype(np.int8))
                lg_ru.append(np.array([int(batch.rolls_used[g])]))
                lg_ann.append(np.array([row]))
        if lg_g:
            g = np.concatenate(lg_g)
            key = np.concatenate(lg_key)
            p = np.concatenate(lg_p)
            dice, ru, ann = np.concatenate(lg_dice), np.concatenate(lg_ru), np.concatenate(lg_ann)
            v = self._leaf_values(batch, g, dice, ru, ann)
            code = g * (t.n_keeps + r.n_rows + 1) + np.where(key >= 0, key, t.n_keeps - 1 - key)
            uniq, inv = np.unique(code, return_inverse=True)
            val = np.bincount(inv.reshape(-1), weights=p * v, minlength=uniq.size)
            table = dict(zip(uniq.tolist(), val.tolist()))
            stride = t.n_keeps + r.n_rows + 1
            for gg in live:
                holds = np.flatnonzero(legal[gg, P:P + H])
                if holds.size:
                    q[gg, P + holds] = [table[gg * stride + int(k)] for k in hold_keeps[gg, holds]]
                for row in np.flatnonzero(legal[gg, P + H:]):
                    q[gg, P + H + row] = table[gg * stride + t.n_keeps + row]
        return q

    def _leaf_values(self, batch, g: np.ndarray, dice: np.ndarray, ru: np.ndarray, ann: np.ndarray) -> np.ndarray:
        """The valuation of leaves (game ``g``'s card with ``dice`` placed in their slots,
        ``ru`` rolls used, ``ann`` announced), float64 (m,); a leaf that occurs more than once
        is encoded and valued once."""
        r = self.rules
        dedup = self.dedup and ru.max() < 8 and ann.max() < 31    # the fields the code packs
        if dedup:
            code = (g.astype(np.int64) * 8 + ru) * 32 + (ann.astype(np.int64) + 1)
            for j in range(dice.shape[1]):
                code = code * 7 + dice[:, j]
            _, first, inv = np.unique(code, return_index=True, return_inverse=True)
            g, dice, ru, ann = g[first], dice[first], ru[first], ann[first]
        enc = encode_yamb_positions(r, batch.card[g], dice, ru, batch.rolls_max[g], ann)
        v = self.valuation.values(enc)
        return v[inv.reshape(-1)] if dedup else v

    def q(self, batch) -> np.ndarray:
        """Q in the shared action space, float64 (n, 208)."""
        return to_shared_q(self.rules, self.action_values(batch))


def _place_dice(dice: np.ndarray, keep_hist: np.ndarray, roll_hists: np.ndarray) -> np.ndarray:
    """Physical dice after holding ``keep_hist`` from ``dice`` and rolling to each roll.

    Held dice stay in their slots (lowest slots first for equal faces); the rerolled slots get
    the faces ``roll − keep`` in ascending order.

    Args:
        dice: int (d,) faces 1..6; keep_hist: int (6,) face counts held; roll_hists: int
            (m, 6) face counts of the whole roll after the reroll.

    Returns:
        int8 (m, d).
    """
    need = np.asarray(keep_hist, np.int64).copy()
    held = np.zeros(dice.size, bool)
    for i, f in enumerate(dice):
        if need[f - 1] > 0:
            need[f - 1] -= 1
            held[i] = True
    m = roll_hists.shape[0]
    out = np.repeat(dice[None, :].astype(np.int8), m, axis=0)
    free = np.flatnonzero(~held)
    if free.size:
        diff = roll_hists.astype(np.int64) - np.asarray(keep_hist, np.int64)[None]
        faces = np.repeat(np.tile(np.arange(1, 7), (m, 1)).ravel(), diff.ravel()).reshape(m, free.size)
        out[:, free] = faces
    return out


__all__ = ["YambFullTurnSearch", "YambLookaheadSearch", "YambOneStepSearch", "to_shared_q", "successor_samples", "turn_start_values"]
