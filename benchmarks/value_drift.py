"""Value error of a run's snapshots against an exact oracle: a Yahtzee run, or a single-column
Yamb run (prints figures; not a test).

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

**A Yahtzee run** is measured over every reachable boundary state at once: the network's value
of each state (the table full-turn search plays from) against the oracle's, weighted by how
often the network's own agent passes through each state (its exact forward occupancy, no
sampling), with the snapshot's exact regret and where it loses it (keeps, or box choices) beside
them. The mean error by boxes filled shows which turns' values move when a run falls back.

    python benchmarks/value_drift.py runs/RUN [--every 2] [--from 300 --to 450] [--games 200]

The run needs ``runtime.snapshots: true``, and a Yahtzee game or a single down, up or free
column (``--games`` and ``--seed`` are for the Yamb column).
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
from yamblab.training.configio import validate
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


GROUPS = ((0, 3), (3, 6), (6, 9), (9, 13))   # layers of boxes filled whose mean error is printed


def yahtzee_drift_row(W: np.ndarray, V: np.ndarray, rules, states: np.ndarray, filled: np.ndarray) -> dict:
    """One snapshot's figures: its exact regret and its value error where its agent goes.

    Args:
        W: float64 (4096, 3, 64) the network's points still to come per boundary state.
        V: float64 (4096, 3, 64) the oracle's (the same layout).
        states: int64 (n, 3) the reachable states ``(mask12, ystate, upper)`` measured;
            filled: int (n,) their boxes filled.

    Returns:
        dict: ``regret`` (exact, points a game), ``keeps`` and ``boxes`` (its parts lost on the
        two keep decisions and on box choices); ``rmse`` and ``mean`` of (W − V), points, weighted
        by the agent's own exact occupancy (each layer of boxes filled weighs 1); ``rmse_all`` and
        ``mean_all`` unweighted over ``states``; ``by_group``: the weighted mean per :data:`GROUPS`
        (NaN for a group the agent never reaches).
    """
    from yamblab.rules_of_thumb.occupancy import forward_occupancy

    occ = forward_occupancy(W, rules, oracle=V)
    m, ys, up = states[:, 0], states[:, 1], states[:, 2]
    w = occ.visits[m, ys, up]
    d = W[m, ys, up] - V[m, ys, up]
    by_group = []
    for a, b in GROUPS:
        sel = (filled >= a) & (filled < b) & (w > 0)
        by_group.append(float((w[sel] * d[sel]).sum() / w[sel].sum()) if sel.any() else float("nan"))
    boxes = occ.regret_by_decision["box"]
    return {"regret": occ.regret, "keeps": occ.regret - boxes, "boxes": boxes,
            "rmse": float(np.sqrt((w * d * d).sum() / w.sum())), "mean": float((w * d).sum() / w.sum()),
            "rmse_all": float(np.sqrt((d * d).mean())), "mean_all": float(d.mean()), "by_group": by_group}


def yahtzee_drift(run: Path, rules, picked: list[Path]) -> None:
    """Print :func:`yahtzee_drift_row` for each snapshot in ``picked``."""
    from yamblab.model.exact_score import canonical_cards, network_table
    from yamblab.oracle.yahtzee.table import OracleTable

    V = OracleTable.get(rules).values
    states, scores, _ = canonical_cards(rules)
    filled = (scores >= 0).sum(axis=1)
    print(f"{run.name}: {len(states)} reachable boundary states; errors in points, network minus oracle, "
          "weighted by the snapshot's own occupancy unless marked 'all'")
    head = ["iteration", "minutes", "exact regret", "keeps", "boxes", "RMSE", "mean", "RMSE all",
            "mean all"] + [f"mean, {a}-{b - 1} filled" for a, b in GROUPS]
    print(" | ".join(head))
    for s in picked:
        meta = load_checkpoint(s)
        net = network_from_state(meta, source=str(s)).eval()
        W, _ = network_table(net, rules)
        r = yahtzee_drift_row(W, V, rules, states, filled)
        row = [str(meta["iteration"]), f"{meta['minutes']:.1f}", f"{r['regret']:.2f}", f"{r['keeps']:.2f}",
               f"{r['boxes']:.2f}", f"{r['rmse']:.2f}", f"{r['mean']:+.2f}", f"{r['rmse_all']:.2f}",
               f"{r['mean_all']:+.2f}"] + [f"{g:+.2f}" for g in r["by_group"]]
        print(" | ".join(row), flush=True)


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
    cfg = validate(RunConfig, yaml.safe_load(load_checkpoint(snaps[0])["config"]), str(snaps[0]))
    game = cfg.game_obj
    if game.name == "yahtzee":
        yahtzee_drift(args.run, game.rules, picked)
        return
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
