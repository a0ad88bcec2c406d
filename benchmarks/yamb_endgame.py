"""What the exact Yamb endgame costs: states and seconds per card at K open boxes, over the cards
that real games reach (the heuristic bot's, played to K open boxes), each card solved from an
empty cache.

    python benchmarks/yamb_endgame.py --preset jamb_nn --k 8 --k 10 --cards 40
"""

from __future__ import annotations

import time

import numpy as np
import typer

from yamblab.agents.base import make_agent
from yamblab.games.protocol import make_game
from yamblab.search.yamb_endgame import YambEndgameOracle


def late_cards(game, n: int, k: int, seed: int) -> np.ndarray:
    """The cards of ``n`` seeded games played by the heuristic bot until at most ``k`` boxes are
    open, int16 (n, C, R)."""
    batch = game.new_batch(n, seed=seed)
    bot = make_agent("heuristic", game)
    bot.reset(batch)
    while True:
        n_open = (batch.card < 0).reshape(n, -1).sum(axis=1)
        if (n_open <= k).all():
            return batch.card.copy()
        act = bot.act(batch)
        act[n_open <= k] = -1
        batch.step(act)


def main(preset: str = typer.Option("jamb_nn", help="Yamb preset."),
         k: list[int] = typer.Option([8, 10], help="Open boxes (repeat for several)."),
         cards: int = typer.Option(40, min=1, help="Cards per K (games of the heuristic bot)."),
         seed: int = typer.Option(0, min=0, help="Dice seed.")) -> None:
    game = make_game("yamb", preset=preset)
    print(f"{preset}: {cards} cards per K, from the heuristic bot's games (seed {seed}), each solved from an empty cache")
    print(f"{'K':>3} {'states median':>14} {'p90':>8} {'max':>8} {'seconds median':>15} {'p90':>7} {'max':>7} "
          f"{'ms a state':>10}")
    for kk in k:
        states, secs = [], []
        for card in late_cards(game, cards, kk, seed):
            oracle = YambEndgameOracle(game.rules, k=kk)
            t = time.perf_counter()
            oracle.card_values(card[None])
            secs.append(time.perf_counter() - t)
            states.append(oracle.solved)
        st, sc = np.array(states), np.array(secs)
        print(f"{kk:>3} {np.median(st):>14,.0f} {np.percentile(st, 90):>8,.0f} {st.max():>8,} "
              f"{np.median(sc):>15.2f} {np.percentile(sc, 90):>7.2f} {sc.max():>7.2f} {1e3 * sc.sum() / st.sum():>10.2f}")


if __name__ == "__main__":
    typer.run(main)
