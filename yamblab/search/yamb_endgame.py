"""The exact endgame of any Yamb card: points still to come under optimal play once a card has at
most ``k`` open boxes, and so the exact value of every action in those turns.

A card's future depends only on its **state**: which boxes are open; each column's upper sum
while an upper box is open and the bonus is still within reach (capped at the bonus threshold,
the only thing the sum still decides); and the filled ones of Ones, Max and Min while any of
the three is open and Ones did not score 0 (the middle term). Scores of lower rows already
filled, and an upper sum whose bonus is decided, no longer matter. The value of a state is the turn planner's exact expectation over the next
turn (:func:`~yamblab.search.yamb_search.turn_start_values`: every roll, keep, box and
announcement) against the values of the states that turn can leave, solved backwards from the
full card (worth 0) and cached by state: each layer of open boxes is solved in one batch.
"""

from __future__ import annotations

import numpy as np

from yamblab.errors import EndgameTooLarge
from yamblab.games.encoding import EncodedBatch, decode_yamb_card
from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW, YambRules
from yamblab.games.yamb.scoring import open_boxes
from yamblab.search.yamb_search import YambFullTurnSearch, to_shared_q, turn_start_values

#: the default largest number of open boxes solved (a few seconds a game on a CPU core)
DEFAULT_K = 8

#: the default most new states a grader lets one card's solve take (about 0.4 ms each on a CPU
#: core): a card beyond it enters the graded endgame a turn later
DEFAULT_MAX_STATES = 5_000

#: the most an upper box can score: five of its face (only five dice count, of six too)
_UPPER_MOST = 5 * np.arange(1, 7)


class YambEndgameOracle:
    """Exact points still to come of Yamb cards with at most ``k`` open boxes, a
    :class:`~yamblab.search.valuation.Valuation` of boundary cards: full-turn search on it
    (:meth:`search`) plays those turns optimally and its ``q`` is the exact value of every action.

    Args:
        rules: any Yamb rule set (every preset and column kind).
        k: the most open boxes of a card it values (a card with more is refused).
        chunk: states solved per batch (the turn planner holds about 40 KB a state).
        max_states: the most new states a grader lets one card's solve take before it tries
            the game again a turn later (:meth:`card_values`'s ``max_states``).

    Attributes:
        solved: states solved so far (each once; then cached).
    """

    #: one-step search cannot use it: it values boundary cards only
    values_dice = False

    def __init__(self, rules: YambRules, k: int = DEFAULT_K, chunk: int = 1024, max_states: int = DEFAULT_MAX_STATES):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 1 <= k <= rules.n_turns:
            raise ValueError(f"k (open boxes) must be a whole number in 1 .. {rules.n_turns}, got {k!r}")
        if not isinstance(max_states, (int, np.integer)) or max_states < 0:
            raise ValueError(f"max_states must be a whole number of states, 0 or more, got {max_states!r}")
        self.rules = rules
        self.k = int(k)
        self.chunk = int(chunk)
        self.max_states = int(max_states)
        self.solved = 0
        self._cache: dict[bytes, float] = {}
        self._limit: float | None = None          # the running call's bound on self.solved
        self._depth = 0                           # card_values calls running (a solve calls it again)
        self._search = YambFullTurnSearch(rules, self)
        self._width = self.state_keys(np.full((1, rules.n_columns, rules.n_rows), -1, np.int16)).shape[1]

    def search(self) -> YambFullTurnSearch:
        """Full-turn search on the exact endgame values: optimal play, and exact action values
        (``q``), at any position whose card has at most :attr:`k` open boxes."""
        return YambFullTurnSearch(self.rules, self)

    def solved_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Every state solved so far: its key (:meth:`state_keys`), int16 (m, L), and its
        value, float64 (m,); :meth:`remember` takes them back."""
        keys = np.frombuffer(b"".join(self._cache), np.int16).reshape(-1, self._width)
        return keys.copy(), np.fromiter(self._cache.values(), np.float64, len(self._cache))

    def remember(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Take states solved before (:meth:`solved_states`, of the same rules) into the cache.

        Raises:
            ValueError: keys of another width than these rules' states, or not one value each.
        """
        keys = np.ascontiguousarray(keys, np.int16)
        if keys.size == 0:
            return
        if keys.ndim != 2 or keys.shape[1] != self._width or len(values) != len(keys):
            raise ValueError(f"solved states of {self.rules.name} are int16 keys of width {self._width}, one value "
                             f"each; got keys {keys.shape} and {len(values)} values")
        self._cache.update(zip((k.tobytes() for k in keys), np.asarray(values, np.float64).tolist()))

    def state_keys(self, cards: np.ndarray) -> np.ndarray:
        """int16 (m, L): one row per card that is equal for two cards exactly when their futures
        are (module docstring).

        Args:
            cards: int16 (m, C, R), -1 open.
        """
        r = self.rules
        cards = np.asarray(cards, np.int16)
        m = cards.shape[0]
        open_ = cards < 0
        upper_open = open_[:, :, :6].any(axis=2)
        upper = np.where(open_[:, :, :6], 0, cards[:, :, :6]).astype(np.int32).sum(axis=2)
        reach = upper + (open_[:, :, :6] * _UPPER_MOST).sum(axis=2)     # every open upper box at its best
        ukey = np.where(upper_open & (reach >= r.upper_bonus_threshold), np.minimum(upper, r.upper_bonus_threshold), -1)
        mid = cards[:, :, [ONES_ROW, MAX_ROW, MIN_ROW]]
        settled = ~(mid < 0).any(axis=2, keepdims=True) | (mid[:, :, :1] == 0)    # full, or Ones scored 0
        mkey = np.where(settled, -2, mid)
        return np.concatenate([open_.reshape(m, -1), ukey, mkey.reshape(m, -1)], axis=1).astype(np.int16)

    def card_values(self, cards: np.ndarray, max_states: int | None = None) -> np.ndarray:
        """Exact expected points still to come of each card under optimal play, float64 (m,)
        (0 for a full card).

        Args:
            cards: int16 (m, C, R) cards between turns, -1 open.
            max_states: the most new states this call may solve (None: no bound); it stops
                once past them (by at most one batch). The states it solved stay cached.

        Raises:
            ValueError: a card with more than :attr:`k` open boxes.
            EndgameTooLarge: the cards need more than ``max_states`` new states.
        """
        if self._depth == 0:
            cards = self._checked(cards)
        if max_states is not None and (not isinstance(max_states, (int, np.integer)) or max_states < 0):
            raise ValueError(f"max_states must be a whole number of states, 0 or more, got {max_states!r}")
        if max_states is None or self._limit is not None:     # a call inside a solve keeps its bound
            return self._card_values(cards)
        self._limit, self._budget = self.solved + int(max_states), int(max_states)
        try:
            return self._card_values(cards)
        finally:
            self._limit = None

    def _checked(self, cards) -> np.ndarray:
        """``cards`` as int16 (m, C, R), refusing a shape, a fraction, a negative score other than
        -1 (open) or a score no roll makes in its row, by name."""
        r = self.rules
        arr = np.asarray(cards)
        if arr.ndim != 3 or arr.shape[1:] != (r.n_columns, r.n_rows):
            raise ValueError(f"cards must have the shape (m, {r.n_columns}, {r.n_rows}) (cards, columns, rows "
                             f"of {r.name}), got {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            if not np.issubdtype(arr.dtype, np.floating) or not np.array_equal(arr, np.round(arr)):
                raise ValueError("cards hold whole-number scores (-1 for an open box)")
        arr = arr.astype(np.int64)
        if (arr < -1).any():
            raise ValueError(f"a box holds {int(arr.min())}: -1 marks an open box, and a score is 0 or more")
        for row in range(r.n_rows):
            col = arr[:, :, row]
            bad = (col >= 0) & ~np.isin(col, self._search.row_scores[row])
            if bad.any():
                raise ValueError(f"no roll scores {int(col[bad][0])} in row {r.rows[row]}")
        return arr.astype(np.int16)

    def _card_values(self, cards: np.ndarray) -> np.ndarray:
        cards = np.asarray(cards, np.int16)
        m = cards.shape[0]
        if m == 0:
            return np.zeros(0)
        n_open = open_boxes(cards)
        if n_open.max() > self.k:
            raise ValueError(f"a card with {int(n_open.max())} open boxes: this endgame oracle solves at most "
                             f"{self.k} (YambEndgameOracle(k=...))")
        keys, first, inverse = np.unique(self.state_keys(cards), axis=0, return_index=True, return_inverse=True)
        raw = [k.tobytes() for k in keys]
        vals = np.array([self._cache.get(b, np.nan) for b in raw])
        vals[n_open[first] == 0] = 0.0
        todo = np.flatnonzero(np.isnan(vals))
        for start in range(0, todo.size, self.chunk):
            part = todo[start:start + self.chunk]
            self._check(part.size)                 # before: this layer's own states
            self._depth += 1
            try:
                vals[part] = turn_start_values(self._search, cards[first[part]])
            finally:
                self._depth -= 1
            self.solved += part.size
            self._cache.update((raw[i], float(vals[i])) for i in part)
            self._check(0)                         # after: the deeper layers' it needed first
        return vals[inverse.reshape(-1)]

    def play(self, batch):
        """Play ``batch`` to its end as Yamb's decision set does: the heuristic bot
        (:class:`~yamblab.oracle.yamb.planners.HeuristicAgent`) until a card has at most
        :attr:`k` open boxes, then optimal play. Before each step that moves a game of the
        endgame, yields ``(games, q)``: those games' indices, int64 (m,), and their exact action
        values in the shared action space, float64 (m, 208)."""
        from yamblab.oracle.yamb.planners import HeuristicAgent

        bot = HeuristicAgent(self.rules)
        bot.reset(batch)
        search = self.search()
        search.reset(batch)
        while not np.asarray(batch.done).all():
            n_open = open_boxes(batch.card)
            late = np.flatnonzero(~np.asarray(batch.done) & (n_open <= self.k))
            act = np.asarray(bot.act(batch), np.int64)
            if late.size:
                q = search.action_values(batch, late)[late]
                yield late, to_shared_q(self.rules, q)
                act[late] = np.argmax(q, axis=1)
            batch.step(act)

    def _check(self, more: int) -> None:
        if self._limit is not None and self.solved + more > self._limit:
            raise EndgameTooLarge(f"this endgame needs more than {self._budget:,} new states")

    def values(self, enc: EncodedBatch) -> np.ndarray:
        """The :class:`~yamblab.search.valuation.Valuation` protocol: :meth:`card_values` of the
        encoded boundary positions' cards (their dice are ignored)."""
        return self.card_values(decode_yamb_card(enc, self.rules))


__all__ = ["YambEndgameOracle", "DEFAULT_K", "DEFAULT_MAX_STATES"]
