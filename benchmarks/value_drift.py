"""Value error of a single-column Yamb run's snapshots against the exact column oracle (prints
figures; not a test).

Full-turn search plays from the network's values of the cards a turn can leave. This measures
those values, snapshot by snapshot, against the exact values of the same cards:

* the **visited** cards: every turn start of ``--games`` games the exact oracle plays on dice
  seed ``--seed`` (cards near optimal play);
* their **successors**: every card each of those turns can leave (each open box with each score
  it can take), the leaves full-turn search values, most of them cards that games rarely visit.

For each snapshot it prints the RMSE and the mean error (network minus exact, points) on both
sets, the *within-turn* RMSE (the successors' errors minus their turn's mean error: the part
that changes which box search picks) and the successors' mean error by the number of boxes
they have filled. A growing positive error on the early turns' successors is bootstrapped
overestimation: each turn's target is the best of the next turn's values, so the largest
errors are picked and passed back a turn per iteration.

    python benchmarks/value_drift.py runs/RUN [--every 2] [--from 300 --to 450] [--games 200]

The run needs ``runtime.snapshots: true`` and a single down, up or free column.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml

from yamblab.agents.base import make_agent
from yamblab.games.yamb.game import encode_yamb_boundary
from yamblab.model.checkpoint import load_checkpoint, network_from_state
from yamblab.oracle.yamb.oracles import column_oracle
from yamblab.training.config import RunConfig
from yamblab.search.valuation import YambColumnOracleValuation
from yamblab.search.yamb_search import YambFullTurnSearch


def visited_cards(game, games: int, seed: int) -> np.ndarray:
    """Turn-start cards int16 (m, 1, R) of ``games`` games the exact oracle plays."""
    agent = make_agent("oracle", game)
    batch = game.new_batch(games, seed=seed)
    agent.reset(batch)
    cards = []
    while not batch.done.all():
        start = game.turn_start(batch) & ~batch.done
        if start.any():
            cards.append(batch.card[start].copy())
        batch.step(agent.act(batch))
    return np.concatenate(cards)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="a run folder with snapshots/")
    p.add_argument("--games", type=int, default=200, help="oracle games whose turn starts are measured")
    p.add_argument("--seed", type=int, default=7, help="their dice seed (not the evaluator's)")
    p.add_argument("--every", type=int, default=1, help="measure every k-th snapshot of the range")
    p.add_argument("--from", dest="first", type=int, default=0, help="first iteration measured")
    p.add_argument("--to", dest="last", type=int, default=10**9, help="last iteration measured")
    args = p.parse_args()
    if args.games < 1 or args.every < 1:
        raise SystemExit("--games and --every must be at least 1")
    snaps = sorted((args.run / "snapshots").glob("iteration-*.pt"))
    if not snaps:
        raise SystemExit(f"{args.run}/snapshots holds no snapshot: train with --set runtime.snapshots=true")
    # the iteration is in the name (runtime.snapshots' iteration-NNNNNN.pt): pick before loading
    picked = [s for s in snaps if args.first <= int(s.stem.split("-")[1]) <= args.last][::args.every]
    if not picked:
        raise SystemExit(f"no snapshot of {args.run} lies in iterations {args.first}..{args.last}")
    cfg = RunConfig(**yaml.safe_load(load_checkpoint(snaps[0])["config"]))
    game = cfg.game_obj
    if game.name != "yamb" or len(game.rules.columns) != 1:
        raise SystemExit("this measures single-column Yamb runs (e.g. configs/yamb-free-cpu.yaml), "
                         "whose exact oracle values every card")
    rules = game.rules
    t0 = time.perf_counter()
    exact = YambColumnOracleValuation(column_oracle(rules))
    cards = visited_cards(game, args.games, args.seed)
    owner, _, _, _, nxt = YambFullTurnSearch(rules, exact).successor_cards(cards)
    filled = (nxt >= 0).reshape(len(nxt), -1).sum(axis=1)
    live = filled < rules.n_rows
    owner, nxt, filled = owner[live], nxt[live], filled[live]
    enc_v, enc_s = encode_yamb_boundary(rules, cards), encode_yamb_boundary(rules, nxt)
    ev, es = exact.values(enc_v), exact.values(enc_s)
    n_own = np.maximum(np.bincount(owner, minlength=len(cards)), 1)
    print(f"{args.run.name}: {len(cards)} visited cards, {len(nxt)} successors "
          f"(exact values in {time.perf_counter() - t0:.0f} s); errors in points, network minus exact")
    head = ["iteration", "minutes", "visited RMSE", "visited mean", "successors RMSE", "successors mean",
            "within-turn RMSE"] + [f"mean, {k} filled" for k in range(1, rules.n_rows)]
    print(" | ".join(head))
    for s in picked:
        meta = load_checkpoint(s)
        net = network_from_state(meta, source=str(s)).eval()
        dv = net.predict_value(enc_v, 16384) - ev
        ds = net.predict_value(enc_s, 16384) - es
        within = ds - (np.bincount(owner, ds, minlength=len(cards)) / n_own)[owner]
        by_turn = [ds[filled == k].mean() if (filled == k).any() else float("nan") for k in range(1, rules.n_rows)]
        row = [str(meta["iteration"]), f"{meta['minutes']:.1f}", f"{np.sqrt((dv ** 2).mean()):.2f}",
               f"{dv.mean():+.2f}", f"{np.sqrt((ds ** 2).mean()):.2f}", f"{ds.mean():+.2f}",
               f"{np.sqrt((within ** 2).mean()):.2f}"] + [f"{b:+.1f}" for b in by_turn]
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
