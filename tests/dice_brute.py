"""Brute force over dice for the tests: one turn's expectimax, independent of the turn planner."""

import itertools
from collections import Counter
from functools import lru_cache


@lru_cache(maxsize=None)
def outcomes(k: int) -> Counter:
    """Every roll of ``k`` dice as a sorted tuple, with its number of orderings (of 6**k)."""
    return Counter(tuple(sorted(o)) for o in itertools.product(range(1, 7), repeat=k))


def turn_value(n_dice: int, rolls: int, score_best) -> float:
    """The expected value of a turn of ``rolls`` rolls of ``n_dice`` dice played best: after each
    roll, the better of ``score_best(dice, roll)`` (dice sorted, roll 1-based) and keeping any
    subset of the dice (every hold mask) to roll the rest again."""

    @lru_cache(maxsize=None)
    def expect(kept, roll):
        k = n_dice - len(kept)
        return sum(w * after(tuple(sorted(kept + o)), roll) for o, w in outcomes(k).items()) / 6 ** k

    @lru_cache(maxsize=None)
    def after(dice, roll):
        best = score_best(dice, roll)
        if roll < rolls:
            for m in range(1 << n_dice):
                best = max(best, expect(tuple(dice[i] for i in range(n_dice) if m >> i & 1), roll + 1))
        return best

    return expect((), 1)
