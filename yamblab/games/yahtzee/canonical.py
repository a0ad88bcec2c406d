"""The canonical card of a Yahtzee position: the card the network is shown.

A Yahtzee position's points still to come depend only on its *boundary state*: which boxes are
filled, the upper subtotal capped at 63, and whether the Yahtzee box is open, holds 0 or holds
50 (plus, within a turn, the dice and rolls left). The points written in the other boxes do not
matter. A card shows more than that, and a network fed the card as played must learn to ignore
the rest; worse, full-turn search values hypothetical successor cards whose lower boxes hold no
real points at all. So every Yahtzee position is encoded from one canonical card per boundary
state, the same in training, in search and in exact evaluation:

* a filled lower box (Three/Four of a kind, Full house, the straights, Chance) shows the
  representative points of :data:`LOWER_REPRESENTATIVE`;
* the Yahtzee box shows 0 or 50 as played (the state needs it);
* the filled upper boxes show the split of the capped subtotal closest to three of each face
  (counts 0..5 per face; ties broken by the smallest total; a capped 63 shows the smallest total
  of at least 63). Without an upper bonus the subtotal does not matter: every card with the same
  filled upper boxes shows three of each face.

Any two positions with the same state, dice and rolls left therefore encode identically, and
the MLP boundary head's features (filled flags, capped subtotal, Yahtzee 50) are unchanged.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from yamblab.games.yahtzee.rules import UPPER_BONUS_THRESHOLD

__all__ = ["LOWER_REPRESENTATIVE", "canonical_card", "canonical_cards", "upper_splits"]

#: Representative points shown in a filled lower box (box index -> points); the Yahtzee box
#: (index 11) keeps its real 0 or 50.
LOWER_REPRESENTATIVE = {6: 20, 7: 15, 8: 25, 9: 30, 10: 40, 12: 22}
_LOWER = np.array([6, 7, 8, 9, 10, 12], np.int64)
_LOWER_PTS = np.array([LOWER_REPRESENTATIVE[int(b)] for b in _LOWER], np.int16)


@lru_cache(maxsize=1)
def upper_splits() -> dict[int, dict[int, tuple[tuple[int, ...], int]]]:
    """For each 6-bit upper mask: capped subtotal -> (points per upper box, uncapped total).

    Points are −1 for open boxes. Every subtotal a game can reach with that mask is a key.
    """
    out: dict[int, dict[int, tuple[tuple[int, ...], int]]] = {}
    for um in range(64):
        faces = [f for f in range(6) if (um >> f) & 1]
        best: dict[int, tuple[tuple[int, int], tuple[int, ...], int]] = {}
        for counts in itertools.product(range(6), repeat=len(faces)):
            total = sum((f + 1) * n for f, n in zip(faces, counts))
            key = min(total, UPPER_BONUS_THRESHOLD)
            rank = (total - UPPER_BONUS_THRESHOLD if total >= UPPER_BONUS_THRESHOLD else 0,
                    sum(abs(n - 3) for n in counts))
            if key not in best or rank < best[key][0]:
                pts = [-1] * 6
                for f, n in zip(faces, counts):
                    pts[f] = (f + 1) * n
                best[key] = (rank, tuple(pts), total)
        out[um] = {u: (p, t) for u, (_, p, t) in best.items()}
    return out


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Lookup tables: points int16 (64, 64, 6) and total int64 (64, 64) per (upper mask, capped
    subtotal), a validity flag bool (64, 64), and the no-bonus split: (points int16 (64, 6),
    total int64 (64,))."""
    pts = np.full((64, 64, 6), -1, np.int16)
    tot = np.zeros((64, 64), np.int64)
    ok = np.zeros((64, 64), bool)
    flat_pts = np.full((64, 6), -1, np.int16)
    flat_tot = np.zeros(64, np.int64)
    for um, by_u in upper_splits().items():
        for u, (p, t) in by_u.items():
            pts[um, u], tot[um, u], ok[um, u] = p, t, True
        three = [3 * (f + 1) if (um >> f) & 1 else -1 for f in range(6)]
        flat_pts[um] = three
        flat_tot[um] = sum(max(0, v) for v in three)
    return pts, tot, ok, (flat_pts, flat_tot)


def canonical_card(box_scores: np.ndarray, upper_raw: np.ndarray, rules) -> tuple[np.ndarray, np.ndarray]:
    """The canonical card of each card (see the module note).

    Args:
        box_scores: int (m, 13) points per box in card order, −1 for open boxes.
        upper_raw: int (m,) the upper-section total as played (uncapped, points).
        rules: the :class:`~yamblab.games.yahtzee.rules.YahtzeeRules` variant (its
            ``upper_bonus`` decides whether the subtotal is part of the state).

    Returns:
        ``(box_scores int16 (m, 13), upper_raw int64 (m,))`` of the canonical cards. A card
        whose (filled upper boxes, capped subtotal) no game can reach keeps its upper boxes.
    """
    sc = np.array(box_scores, dtype=np.int16, copy=True).reshape(-1, 13)
    raw = np.asarray(upper_raw, np.int64).reshape(-1).copy()
    if sc.shape[0] != raw.shape[0]:
        raise ValueError(f"{sc.shape[0]} cards but {raw.shape[0]} upper totals")
    filled = sc >= 0
    low = sc[:, _LOWER]
    sc[:, _LOWER] = np.where(low >= 0, _LOWER_PTS[None, :], low)
    um = (filled[:, :6] * (1 << np.arange(6))[None, :]).sum(axis=1)
    pts, tot, ok, (flat_pts, flat_tot) = _tables()
    if rules.upper_bonus:
        u = np.clip(raw, 0, UPPER_BONUS_THRESHOLD)
        good = ok[um, u]
        sc[good, :6] = pts[um[good], u[good]]
        raw[good] = tot[um[good], u[good]]
    else:
        sc[:, :6] = flat_pts[um]
        raw = flat_tot[um].copy()
    return sc, raw


def canonical_cards(rules) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One canonical card per reachable, unfinished boundary state (see the module note).

    Returns:
        ``(states int64 (n, 3) of (mask12, ystate, upper), box_scores int16 (n, 13) with −1 for
        open boxes, upper_raw int64 (n,))``; n = 536,448 reachable states less the two full
        cards under official rules (without an upper bonus the subtotal lane is 0).
    """
    splits = upper_splits()
    states, scores, raws = [], [], []
    lower_boxes = (6, 7, 8, 9, 10, 12)
    hi = np.arange(64)                                  # bits 6..11 of mask12: the lower boxes but Yahtzee
    low_pts = np.full((64, 6), -1, np.int16)
    for i, b in enumerate(lower_boxes):
        low_pts[:, i] = np.where((hi >> i) & 1, LOWER_REPRESENTATIVE[b], -1)
    for um in range(64):
        for u, (pts, total) in splits[um].items():
            if not rules.upper_bonus and u != min(total, 63):
                continue
            for ys in range(3):
                m12 = um | (hi << 6)
                n = m12.size
                sc = np.full((n, 13), -1, np.int16)
                sc[:, :6] = pts
                sc[:, list(lower_boxes)] = low_pts
                sc[:, 11] = {0: -1, 1: 0, 2: 50}[ys]
                keep = ~((m12 == 4095) & (ys > 0))
                st = np.stack([m12, np.full(n, ys), np.full(n, u if rules.upper_bonus else 0)], axis=1)
                states.append(st[keep])
                scores.append(sc[keep])
                raws.append(np.full(int(keep.sum()), total, np.int64))
    states_a = np.concatenate(states).astype(np.int64)
    scores_a = np.concatenate(scores)
    raws_a = np.concatenate(raws)
    if not rules.upper_bonus:                           # one lane: one card per (mask, ystate)
        _, first = np.unique(states_a, axis=0, return_index=True)
        states_a, scores_a, raws_a = states_a[first], scores_a[first], raws_a[first]
        scores_a, raws_a = canonical_card(scores_a, raws_a, rules)   # three of each face
    return states_a, scores_a, raws_a
