"""Dice tables for ``n`` = 5 or 6 dice (Yamb plays with either), in the order of :mod:`dice`.

For five dice the tables equal those of :mod:`yamblab.games.dice` (same roll and keep order);
for six dice there are 462 rolls (histograms of six dice) and 924 keeps (0..6 dice). A keep is
ordered by size, then lexicographically by its sorted faces, so the full-size keeps are the
rolls in roll order, exactly as in :mod:`dice`.

Source: the histogram representation follows "How The AI Works" and
timpalpant/yahtzee; ``P(roll | keep)`` is the
multinomial probability of the rerolled dice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from math import factorial

import numpy as np

from yamblab.errors import InvalidDiceError
from yamblab.games.dice import _histograms

N_FACES = 6


def hist_code(hist) -> int:
    """Base-7 code of a 6-count histogram (the index into :attr:`DiceTables.code_to_roll`)."""
    code = 0
    for c in hist:
        code = code * 7 + int(c)
    return code


@dataclass(frozen=True)
class DiceTables:
    """Roll/keep tables for ``n_dice`` dice (read-only numpy arrays).

    Attributes:
        n_dice: 5 or 6.
        rolls: int8 (n_rolls, 6) face counts of every roll (252 for 5 dice, 462 for 6).
        keeps: int8 (n_keeps, 6) face counts of every keep (462 for 5 dice, 924 for 6).
        keep_offset: int64 (n_dice + 2,) index of the first keep with k dice.
        p_roll_given_keep: float64 (n_keeps, n_rolls) exact ``P(roll | keep)``.
        sub_keeps: int32 (n_rolls, 2**n_dice) the distinct sub-keeps of each roll, padded
            with the roll's own full keep (so a max over the row is unaffected).
        code_to_roll: int16 (7**6,) base-7 histogram code → roll index, -1 if not a roll.
        hold_keep: int32 (n_rolls, 2**n_dice) keep made by each hold mask over the roll's
            dice sorted ascending.
    """

    n_dice: int
    rolls: np.ndarray
    keeps: np.ndarray
    keep_offset: np.ndarray
    p_roll_given_keep: np.ndarray
    sub_keeps: np.ndarray
    code_to_roll: np.ndarray
    hold_keep: np.ndarray

    @property
    def n_rolls(self) -> int:
        return int(self.rolls.shape[0])

    @property
    def n_keeps(self) -> int:
        return int(self.keeps.shape[0])

    def best_sub_keep(self, values: np.ndarray) -> np.ndarray:
        """For every roll, the best value over the keeps it allows (its sub-keeps).

        Equal to ``values[:, sub_keeps].max(axis=2)``, computed on the keep lattice instead:
        the best sub-keep of a keep of m dice is the better of the keep itself and the best
        sub-keeps of the keeps one die smaller (a pass per keep size, 6 lookups per keep rather
        than ``2**n_dice`` per roll).

        Args:
            values: float (B, n_keeps) value of each keep.

        Returns:
            float (B, n_rolls).
        """
        from yamblab.games._dice_kernels import best_sub_keep

        v = np.ascontiguousarray(values, dtype=np.float64)
        return best_sub_keep(v.reshape(-1, self.n_keeps), keep_down(self.n_dice),
                             int(self.keep_offset[self.n_dice]))

    def keep_average(self, values: np.ndarray) -> np.ndarray:
        """For every keep, the average of ``values`` over the rolls it leads to.

        Equal to ``values @ p_roll_given_keep.T`` (``Σ_r P(r | keep) · values[:, r]``) up to
        rounding, computed on the keep lattice: rerolling the missing dice one at a time, a
        keep's value is the mean over the next die's face of the keep one die larger (6
        additions per keep, where ``P(roll | keep)`` has 12,376 nonzero terms for six dice).

        Args:
            values: float (B, n_rolls) value of each roll.

        Returns:
            float64 (B, n_keeps).
        """
        from yamblab.games._dice_kernels import keep_average

        v = np.ascontiguousarray(values, dtype=np.float64)
        lead = v.shape[:-1]
        first = int(self.keep_offset[self.n_dice])
        out = keep_average(v.reshape(-1, self.n_rolls), keep_up(self.n_dice), first)
        return out.reshape(*lead, self.n_keeps)

    @property
    def n_holds(self) -> int:
        return 1 << self.n_dice

    def roll_index(self, dice) -> int:
        """Roll index of ``n_dice`` ordered dice.

        Raises:
            InvalidDiceError: wrong number of dice or a face outside 1..6.
        """
        from yamblab.games.dice import validate_dice

        arr = validate_dice(dice, self.n_dice)
        h = np.bincount(arr.astype(np.int64), minlength=7)[1:]
        return int(self.code_to_roll[hist_code(h)])

    def keep_index(self, hist) -> int:
        """Keep index of a histogram of at most ``n_dice`` dice.

        Raises:
            InvalidDiceError: not a histogram of 0..n_dice dice.
        """
        h = tuple(int(c) for c in hist)
        if len(h) != 6 or any(c < 0 for c in h) or sum(h) > self.n_dice:
            raise InvalidDiceError(f"keep histogram {h} is not 0..{self.n_dice} dice")
        return _keep_lookup(self.n_dice)[h]


@lru_cache(maxsize=None)
def keep_down(n_dice: int) -> np.ndarray:
    """int64 (n_keeps, 6): the keep with one die of face f fewer (the empty keep, a sub-keep
    of every keep, where there is no such die)."""
    t = dice_tables(n_dice)
    index = _keep_lookup(n_dice)
    down = np.zeros((t.n_keeps, N_FACES), np.int64)
    for i, k in enumerate(t.keeps):
        for f in range(N_FACES):
            if k[f] > 0:
                kk = [int(c) for c in k]
                kk[f] -= 1
                down[i, f] = index[tuple(kk)]
    down.setflags(write=False)
    return down


@lru_cache(maxsize=None)
def keep_up(n_dice: int) -> np.ndarray:
    """int64 (keeps smaller than a roll, 6): the keep with one die of face f more."""
    t = dice_tables(n_dice)
    index = _keep_lookup(n_dice)
    first = int(t.keep_offset[n_dice])
    up = np.zeros((first, N_FACES), np.int64)
    for i, k in enumerate(t.keeps[:first]):
        for f in range(N_FACES):
            kk = [int(c) for c in k]
            kk[f] += 1
            up[i, f] = index[tuple(kk)]
    up.setflags(write=False)
    return up


@lru_cache(maxsize=None)
def _keep_lookup(n_dice: int) -> dict:
    t = dice_tables(n_dice)
    return {tuple(int(c) for c in k): i for i, k in enumerate(t.keeps)}


@lru_cache(maxsize=None)
def dice_tables(n_dice: int) -> DiceTables:
    """The tables for ``n_dice`` dice (cached).

    Raises:
        InvalidDiceError: ``n_dice`` other than 5 or 6.
    """
    if n_dice not in (5, 6):
        raise InvalidDiceError(f"{n_dice} dice: Yamb tables exist for 5 or 6 dice only")
    keeps: list[tuple[int, ...]] = []
    offset = [0]
    for k in range(n_dice + 1):
        keeps.extend(_histograms(k))
        offset.append(len(keeps))
    keeps_arr = np.array(keeps, dtype=np.int8)
    index = {k: i for i, k in enumerate(keeps)}
    first_roll = offset[n_dice]
    rolls_arr = keeps_arr[first_roll:].copy()
    n_rolls, n_keeps = len(rolls_arr), len(keeps)

    p = np.zeros((n_keeps, n_rolls), dtype=np.float64)
    for i, k in enumerate(keeps):
        karr = np.array(k, dtype=np.int64)
        for r, roll in enumerate(rolls_arr):
            d = roll.astype(np.int64) - karr
            if (d < 0).any():
                continue
            m = int(d.sum())
            ways = factorial(m)
            for x in d:
                ways //= factorial(int(x))
            p[i, r] = ways / N_FACES**m

    n_holds = 1 << n_dice
    sub = np.zeros((n_rolls, n_holds), dtype=np.int32)
    hold_keep = np.zeros((n_rolls, n_holds), dtype=np.int32)
    for r, roll in enumerate(rolls_arr):
        subs = sorted(index[tuple(c)] for c in itertools.product(*[range(int(x) + 1) for x in roll]))
        sub[r, :] = first_roll + r
        sub[r, :len(subs)] = subs
        faces = [f + 1 for f in range(N_FACES) for _ in range(int(roll[f]))]
        for h in range(n_holds):
            held = [0] * 6
            for i in range(n_dice):
                if (h >> i) & 1:
                    held[faces[i] - 1] += 1
            hold_keep[r, h] = index[tuple(held)]

    code_to_roll = np.full(7**6, -1, dtype=np.int16)
    for r, roll in enumerate(rolls_arr):
        code_to_roll[hist_code(roll)] = r

    arrays = (rolls_arr, keeps_arr, p, sub, code_to_roll, hold_keep)
    for a in arrays:
        a.setflags(write=False)
    off = np.array(offset, dtype=np.int64)
    off.setflags(write=False)
    return DiceTables(n_dice=n_dice, rolls=rolls_arr, keeps=keeps_arr, keep_offset=off,
                      p_roll_given_keep=p, sub_keeps=sub, code_to_roll=code_to_roll,
                      hold_keep=hold_keep)
