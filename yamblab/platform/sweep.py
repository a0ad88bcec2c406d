"""Ablation sweeps and tuning studies: Optuna decides, Ray runs, MLflow records.

A sweep is an Optuna study whose trials are training runs:

* an **ablation grid**: named arms (or a product of factors) × seeds, every arm evaluated on the
  same evaluation dice, so arms compare on equal luck;
* a **tuning study**: TPE over ranges (learning rate, temperature, noise fraction …) with median
  pruning on the evaluator's regret.

Trials run in parallel as Ray actors, each within its declared CPUs. The driver is the only
writer: it reports to Optuna (a journal file locally, PostgreSQL on a cluster) and to MLflow (a
parent run per sweep, a child run per trial). An interrupted sweep resumes without rerunning
finished trials: trials are identified by arm, training seed and a digest of their config, so an
edited spec keeps its unchanged arms and runs its changed and new ones, and a trial left half
done (a killed driver, a dead node) carries on from its checkpoint in the same MLflow run. The
result is a table of each arm's mean regret per game with a 95% CI and its paired difference
from the baseline arm on the same evaluation games, logged with a comparison plot to the
parent run.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from yamblab.platform.branch import config_digest
from yamblab.platform.config import RunConfig, SweepConfig, apply_overrides
from yamblab.platform.tracking import Tracker, code_version

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- trial actor
class TrialRunner:
    """Drives one trial's training run, an iteration at a time (the body of a Ray trial actor).

    The run is the same :class:`~yamblab.platform.runtime.TrainingRun` that ``yamblab train``
    drives, with the same actors (self-play workers, replay buffer, learner, evaluator, oracle
    service); the sweep starts this actor in the trial's placement group (one bundle of
    ``trial_cpus``, or, when the learner takes a GPU, a bundle for the learner with its GPU and
    one for the rest: :func:`~yamblab.platform.runtime.trial_bundles`) and the actors it creates
    are placed there too, so the trial stays within its declared CPUs.

    Args:
        config: the trial's run config (a validated ``RunConfig``, passed whole).
        run_dir: the trial's folder for its checkpoint.
        cpus: the trial's CPUs (its actors' declarations must fit).
        resume: continue from the checkpoint in ``run_dir`` if there is one (a trial whose node
            died, or whose driver was killed, carries on from its last finished iteration).
    """

    def __init__(self, config: RunConfig, run_dir: str, cpus: float, resume: bool = False):
        from yamblab.platform.runtime import CHECKPOINT, TrainingRun

        resume = bool(resume) and (Path(run_dir) / CHECKPOINT).exists()
        self.run = TrainingRun(config, run_dir, resume=resume, progress=False, cpus=cpus)
        self.resumed_from = self.run.iteration if resume else None
        self._weights_bytes: int | None = None
        self._store = None
        self._seen_evals = len(getattr(self.run, "evals", []))   # those of the checkpoint are logged

    def info(self) -> dict:
        """Where the trial runs and how far it is: ``node_id``, ``host``, ``pid``, ``iteration``
        (0 for a fresh run), ``resumed_from`` (the checkpoint's iteration, or None) and the
        ``history`` of per-iteration metrics the checkpoint holds."""
        import os
        import socket

        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid(), "iteration": self.run.iteration, "resumed_from": self.resumed_from,
                "history": list(self.run.history), "done": self.run.done()}

    def actors(self) -> dict:
        """The Ray actor ids of the trial's actors, by role (tests check they exist)."""
        b = self.run.backend
        ids = {"workers": [w._actor_id.hex() for w in b.workers], "learner": b.learner._actor_id.hex(),
               "evaluator": b.evaluator._actor_id.hex(), "buffer": b.buffer._actor_id.hex()}
        if b.oracle is not None:
            ids["oracle"] = b.oracle._actor_id.hex()
        return ids

    def _store_created_bytes(self) -> float | None:
        """Bytes created so far in this node's object store (None where Ray does not say)."""
        try:
            import ray
            from ray._private.internal_api import node_stats

            if self._store is None:
                me = ray.get_runtime_context().get_node_id()
                node = next(n for n in ray.nodes() if n["NodeID"] == me)
                self._store = (node["NodeManagerAddress"], node["NodeManagerPort"])
            reply = node_stats(*self._store, include_memory_info=False)
            return float(reply.store_stats.cumulative_created_bytes)
        except Exception:  # noqa: BLE001 - a private Ray API: the figure is optional
            return None

    def _weights_size(self) -> int:
        if self._weights_bytes is None:
            from yamblab.actors.actors import weights_state

            w = weights_state(self.run.backend.weights()[1])
            self._weights_bytes = int(sum(t.numel() * t.element_size() for t in w.values()))
        return self._weights_bytes

    def iteration(self) -> dict:
        """One self-play + learning iteration (evaluating when the config says so).

        Returns:
            metrics (floats), with ``eval.regret_mean`` on evaluation iterations, and the
            iteration's object-store traffic: ``traffic.weights_mb`` (one published version of
            the weights), ``traffic.weight_loads`` (how many times the self-play workers loaded
            weights in this iteration: once each per new version) and
            ``traffic.store_created_mb`` (everything created in this node's object store during
            the iteration: weights, self-play samples, the learner's batch, checkpoint state),
            with ``traffic.workers``.
        """
        loads0 = sum(self.run.backend.weight_loads())
        created0 = self._store_created_bytes()
        out = dict(self.run.step())
        out["done"] = self.run.done()        # iterations done, or the time budget spent
        out["late_evals"] = self._late_evals(int(out.get("iteration", self.run.iteration)))
        out["traffic.weight_loads"] = float(sum(self.run.backend.weight_loads()) - loads0)
        out["traffic.workers"] = float(len(self.run.backend.workers))
        out["traffic.weights_mb"] = self._weights_size() / 2**20
        created1 = self._store_created_bytes()
        if created0 is not None and created1 is not None:
            out["traffic.store_created_mb"] = (created1 - created0) / 2**20
        return out

    def _late_evals(self, current: int | None = None) -> list[dict]:
        """Evaluations that finished since the last call for earlier iterations (evaluations run
        beside the loop): their ``eval.*`` metrics with ``eval.iteration``, the step they
        belong to."""
        evals = getattr(self.run, "evals", [])
        seen = self._seen_evals
        self._seen_evals = len(evals)
        out = []
        for e in evals[seen:]:
            it = int(e["iteration"])
            if it == current:
                continue                      # already in this iteration's metrics
            h = next((h for h in self.run.history if h.get("iteration") == it), {})
            m = {k: v for k, v in h.items() if k.startswith("eval.") and isinstance(v, (int, float))}
            if m:
                out.append({**m, "eval.iteration": it})
        return out

    def finish(self) -> dict:
        """Final evaluation if needed, plots and checkpoint.

        Returns:
            ``{"per_game_regret": list, "loss": str, "modes": {mode: {"per_game_regret": list,
            "loss": str}}, "scores": list, "metrics": dict, "files": {name: bytes},
            "network": {"model_config": dict, "ema": state_dict}}``: the last evaluation's
            per-game losses in the main mode and in every other graded mode, the plots and
            config (file contents travel to the driver, which logs them) and the trained network.

        The resumable checkpoint stays in the trial's folder, without its replay buffer once
        the trial has finished (a finished trial is never carried on; the buffer is most of
        the file's size).
        """
        from yamblab.platform.runtime import CHECKPOINT

        self.run.keep_buffer_at_end = False
        self.run.run()   # evaluates the last iteration if it was not an evaluation iteration
        out = self.run.finish()
        files = {}
        for f in out["files"]:
            p = Path(f)
            if p.name != CHECKPOINT:
                files[p.name] = p.read_bytes()
        out["files"] = files
        out["late_evals"] = self._late_evals()
        out["network"] = {"model_config": self.run.cfg.model.model_dump(), "ema": self.run.backend.ema_state()}
        return out


@dataclass
class ArmResult:
    """Evaluation regrets of one arm: float64 (seeds, games) points per game, one row per
    training seed (in seed order), one column per evaluation game (the same dice for every arm).

    Attributes:
        arm: the arm's name.
        per_seed_game: the main mode's (seeds, games) array.
        seeds: the training seeds, one per row.
        mode: the decision mode ``per_seed_game`` was played in (``"none"``, ``"one_step"``,
            ``"full_turn"``; None where unknown).
        modes: further modes' (seeds, games) arrays, by mode; their games are the first games
            of the same dice (a mode may be graded on more or fewer games than the main one).
    """

    arm: str
    per_seed_game: np.ndarray
    seeds: list[int] = field(default_factory=list)
    mode: str | None = None
    modes: dict[str, np.ndarray] = field(default_factory=dict)

    def graded(self) -> list[str | None]:
        """The modes this arm was graded on: its main mode first."""
        return [self.mode, *(m for m in self.modes if m != self.mode)]

    def table(self, mode: str | None = None) -> np.ndarray:
        """The (seeds, games) float64 array of ``mode`` (default: the main mode).

        Raises:
            KeyError: the arm was not graded on ``mode``.
        """
        x = self.per_seed_game if mode is None or mode == self.mode else self.modes[mode]
        return np.atleast_2d(np.asarray(x, dtype=np.float64))


#: the paired interval's target half-width (points per game): a difference of this size between
#: two training ideas is what the ablation should resolve
TARGET_HALF_WIDTH = 0.5


def minimum_detectable_effect(half_width: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true paired difference a two-sided test at level ``alpha`` detects with
    probability ``power``, from the half-width of the difference's ``1 - alpha`` interval.

    The standard power formula for a normal (z) test of a mean difference gives
    ``MDE = (z_{1-alpha/2} + z_{power}) * SE`` (Bloom, "Minimum detectable effects", Evaluation
    Review 19(5), 1995; Cohen, *Statistical Power Analysis for the Behavioral Sciences*, 1988,
    ch. 2), and the interval's half-width is ``z_{1-alpha/2} * SE``, so
    ``MDE = (z_{1-alpha/2} + z_{power}) / z_{1-alpha/2} * half_width``: about 1.43 × the
    half-width at 5% and 80%. With a bootstrap or Student-t interval the half-width stands in
    for ``z * SE`` (the normal approximation).

    Args:
        half_width: half the width of the paired difference's interval (points per game, >= 0).
        alpha: the test's two-sided level (0 < alpha < 1).
        power: the probability of detecting a true difference of the MDE (0 < power < 1).

    Returns:
        the MDE in the units of ``half_width`` (points per game).
    """
    za = float(stats.norm.ppf(1.0 - alpha / 2.0))
    zb = float(stats.norm.ppf(power))
    return (za + zb) / za * float(half_width)


def variance_components(d: np.ndarray) -> dict[str, float] | None:
    """Variance components of a (seeds, games) array of paired differences (points per game).

    The model is the two-way crossed one of a sweep's design, every training seed graded on the
    same evaluation games: ``d[s, g] = mu + a_s + b_g + e_sg``, with ``a_s`` the training seed's
    effect (its network is better or worse than the baseline's of the same seed), ``b_g`` the
    game's (dice on which the arm is always better or worse) and ``e_sg`` the rest. The
    method-of-moments (ANOVA) estimates, truncated at 0 (Searle, Casella and McCulloch,
    *Variance Components*, 1992, ch. 4):
    ``seed = (MS_seed - MS_e) / G``, ``game = (MS_game - MS_e) / S``, ``resid = MS_e``.

    Returns:
        ``{"seed", "game", "resid"}`` (variances, points² per game²), or None with fewer than 2
        seeds or 2 games (the seed-to-seed spread is then not estimable).
    """
    x = np.atleast_2d(np.asarray(d, dtype=np.float64))
    n_s, n_g = x.shape
    if n_s < 2 or n_g < 2:
        return None
    ms_seed, ms_game, ms_e = _mean_squares(x)
    return {"seed": max(0.0, (ms_seed - ms_e) / n_g), "game": max(0.0, (ms_game - ms_e) / n_s), "resid": ms_e}


def _mean_squares(x: np.ndarray) -> tuple[float, float, float]:
    """The two-way ANOVA mean squares (seeds, games, residual) of a (S >= 2, G >= 2) array."""
    n_s, n_g = x.shape
    m = x.mean()
    rows, cols = x.mean(axis=1), x.mean(axis=0)
    ms_s = n_g * float(np.sum((rows - m) ** 2)) / (n_s - 1)
    ms_g = n_s * float(np.sum((cols - m) ** 2)) / (n_g - 1)
    ms_e = float(np.sum((x - rows[:, None] - cols[None, :] + m) ** 2)) / ((n_s - 1) * (n_g - 1))
    return ms_s, ms_g, ms_e


def seeds_needed(vc: dict[str, float], games: int, target: float = TARGET_HALF_WIDTH) -> int | None:
    """Training seeds a paired difference needs for a 95% half-width of ``target`` at ``games``
    evaluation games, from its :func:`variance_components` (normal approximation).

    The mean of S seeds on G shared games has variance ``seed/S + game/G + resid/(S G)``;
    solving ``1.96 * sqrt(var) <= target`` for S gives
    ``S >= (seed + resid/G) / ((target/1.96)² - game/G)``.

    Returns:
        the smallest such S (at least 1), or None when no number of seeds reaches ``target``
        at ``games`` games (the game term alone is too wide: more games are needed).
    """
    z = float(stats.norm.ppf(0.975))
    room = (target / z) ** 2 - vc["game"] / games
    if room <= 0:
        return None
    return max(1, math.ceil((vc["seed"] + vc["resid"] / games) / room - 1e-12))


def design_for_target(vc: dict[str, float], games: int, target: float = TARGET_HALF_WIDTH) -> tuple[int, int]:
    """(training seeds, evaluation games) that reach a 95% half-width of ``target``.

    At the current ``games`` when some number of seeds reaches it (:func:`seeds_needed`);
    otherwise at the games where the game term ``game/G`` takes half of the allowed variance
    (``G = 2 * 1.96² * game / target²``), with the seeds that then reach it.
    """
    need = seeds_needed(vc, games, target)
    if need is not None:
        return need, games
    z = float(stats.norm.ppf(0.975))
    g = max(games + 1, math.ceil(2.0 * z * z * vc["game"] / target ** 2))
    return seeds_needed(vc, g, target), g


def _interval(samples: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean of a (seeds, games) array.

    One seed: Student t over the games. Several seeds: the crossed two-way random-effects
    model of :func:`variance_components` (every seed graded on the same games), whose mean has
    the unbiased variance estimate ``(MS_seed + MS_game - MS_e) / (S G)``, with Satterthwaite's
    degrees of freedom (Satterthwaite, Biometrics Bulletin 2(6), 1946; Searle, Casella and
    McCulloch, *Variance Components*, 1992, sec. 4.7), so that the spread between training
    seeds counts with the few degrees of freedom that S seeds give it. (A bootstrap over two
    seeds is far too narrow: two runs of the main job with other seeds gave non-overlapping
    intervals.)
    """
    x = np.atleast_2d(np.asarray(samples, dtype=np.float64))
    n_s, n_g = x.shape
    m = float(x.mean())
    if n_s == 1 or n_g == 1:
        v = x.ravel()
        if v.size < 2 or v.std() == 0:
            return m, m
        half = float(stats.t.ppf(0.975, v.size - 1) * stats.sem(v))
        return m - half, m + half
    ms_s, ms_g, ms_e = _mean_squares(x)
    # the unbiased estimate when the games add to the seeds' spread; never less than the seeds'
    # own t interval (MS_seed / (S G), S - 1 degrees of freedom: the seeds are the units)
    num = ms_s + ms_g - ms_e
    if num > ms_s:
        parts = [(ms_s, n_s - 1), (ms_g, n_g - 1), (ms_e, (n_s - 1) * (n_g - 1))]
        df = num ** 2 / sum(v * v / d for v, d in parts)
    else:
        num, df = ms_s, n_s - 1
    if num <= 0.0:
        return m, m
    df = float(max(df, 1.0))
    half = float(stats.t.ppf(0.975, df) * math.sqrt(num / (n_s * n_g)))
    return m - half, m + half


def _paired(a: ArmResult, b: ArmResult, mode: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The two arms' arrays on ``mode``, paired by training seed and evaluation game: the seeds
    both have (rows in seed order) and the first games both have (the same dice). None when
    either was not graded on ``mode`` or they share no seed."""
    try:
        x, y = a.table(mode), b.table(mode)
    except KeyError:
        return None
    if a.seeds and b.seeds and len(a.seeds) == len(x) and len(b.seeds) == len(y):
        common = [s for s in a.seeds if s in b.seeds]
        if not common:
            return None
        x = x[[a.seeds.index(s) for s in common]]
        y = y[[b.seeds.index(s) for s in common]]
    elif x.shape[0] != y.shape[0]:
        return None
    n = min(x.shape[1], y.shape[1])
    return x[:, :n], y[:, :n]


def summarise(arms: dict[str, ArmResult], baseline: str,
              judge: dict[str, str | list[str]] | None = None, target: float = TARGET_HALF_WIDTH) -> list[dict]:
    """Per arm: mean regret per game with 95% CI, and the paired difference from the baseline
    on the decision mode the arm is judged on, with its minimum detectable effect.

    The difference of arm A from baseline B is paired by evaluation game (same dice) and by
    training seed: ``regret_A(s, g) - regret_B(s, g)``, both played in A's mode. Its 95%
    interval is a Student t over the games with one seed, and with several the crossed
    seeds × games random-effects interval of :func:`_interval` (Satterthwaite's degrees of
    freedom); the arm "matters" when the interval excludes 0.
    Its MDE (:func:`minimum_detectable_effect`) is the smallest true difference that interval's
    test would detect with 80% power.

    Args:
        arms: arm name -> its results (the baseline among them), in table order.
        baseline: the arm the others are compared with.
        judge: arm -> the mode it is judged on, or a list of modes (a row for each; default:
            the arm's main mode, ``ArmResult.mode``).
        target: the paired half-width (points per game) the seeds and games planned for each
            difference should reach (``seeds_needed``, ``games_needed``).

    Returns:
        one row (a dict) per compared arm, and one for the baseline on each mode its arms are
        judged on (where the baseline stands in the order): ``arm``, ``mode``, ``seeds``,
        ``games``, ``regret``, ``ci_low``, ``ci_high``, ``seed_means``, ``key`` (the MLflow
        metric prefix: the arm's name, with ``.MODE`` for the baseline off its main mode) and,
        where paired: ``diff``, ``diff_low``, ``diff_high``, ``half_width``, ``mde``,
        ``matters``, and with two seeds or more the difference's spread between training seeds,
        between games and the rest (``sd_seed``, ``sd_game``, ``sd_resid``, points per game:
        :func:`variance_components`) and the seeds that would reach the ±0.5 target at the same
        games, or at more games where those cannot (``seeds_needed``, ``games_needed``:
        :func:`design_for_target`); ``note`` says why an
        arm has no comparison.
    """
    judge = {a: (list(m) if isinstance(m, (list, tuple)) else [m]) for a, m in (judge or {}).items()}
    base = arms.get(baseline)

    def stats_row(name: str, x: np.ndarray, mode: str | None, n_seeds: int) -> dict:
        lo, hi = _interval(x)
        return {"arm": name, "mode": mode, "seeds": n_seeds, "games": int(x.shape[1]), "regret": float(x.mean()),
                "ci_low": lo, "ci_high": hi, "seed_means": [float(v) for v in x.mean(axis=1)], "key": _safe(name)}

    used = list(dict.fromkeys(m for n, r in arms.items() if n != baseline for m in judge.get(n, [r.mode])))
    rows = []
    for name, res in arms.items():
        if name == baseline:
            for mode in used or [res.mode]:
                try:
                    x = res.table(mode)
                except KeyError:
                    continue
                row = stats_row(name, x, mode, len(res.seeds))
                if mode is not None and mode != res.mode:
                    row["key"] = f"{_safe(name)}.{mode}"
                rows.append(row)
            continue
        for k, mode in enumerate(judge.get(name, [res.mode])):
            row = _compared_row(stats_row, name, res, base, baseline, mode, target)
            if k > 0:
                row["key"] = f"{_safe(name)}.{mode}"
            rows.append(row)
    return rows


def _compared_row(stats_row, name: str, res: ArmResult, base: ArmResult | None, baseline: str, mode,
                  target: float = 0.5) -> dict:
    """One compared arm's row of :func:`summarise` on ``mode`` (``stats_row`` makes its
    per-arm figures; the paired ones are added here)."""
    try:
        row = stats_row(name, res.table(mode), mode, len(res.seeds))
    except KeyError:
        row = stats_row(name, res.table(), res.mode, len(res.seeds))
        row["note"] = f"not graded on {mode}"
        return row
    pair = _paired(res, base, mode) if base is not None else None
    if pair is None:
        if base is not None:
            row["note"] = f"{baseline} not graded on {mode}" if mode not in base.graded() else "no paired seeds"
        return row
    d = pair[0] - pair[1]
    dlo, dhi = _interval(d)
    half = (dhi - dlo) / 2.0
    row.update(diff=float(d.mean()), diff_low=dlo, diff_high=dhi, half_width=half,
               mde=minimum_detectable_effect(half), matters=bool(dlo > 0 or dhi < 0))
    vc = variance_components(d)
    if vc is not None:
        n_seeds, n_games = design_for_target(vc, d.shape[1], target)
        row.update(sd_seed=math.sqrt(vc["seed"]), sd_game=math.sqrt(vc["game"]),
                   sd_resid=math.sqrt(vc["resid"]), seeds_needed=n_seeds, games_needed=n_games)
    return row


def _verdict(r: dict, baseline: str) -> str:
    if "diff" not in r:
        return r.get("note") or ("(baseline)" if r["arm"] == baseline else "")
    return ("worse" if r["diff_low"] > 0 else "better") if r["matters"] else "no clear difference"


def format_table(rows: list[dict], baseline: str, loss: str = "regret",
                 target: float | None = TARGET_HALF_WIDTH) -> str:
    """The result table as text: one line per row of :func:`summarise`, with the decision
    mode each line is played in and each compared arm's minimum detectable effect (MDE), then
    the notes on the intervals and one line per mode with the paired intervals' half-widths
    against ``target``.

    ``loss`` names what each game's number is: ``"regret"`` (exact, against the oracle) or, for
    a Yamb card with no oracle, ``"points below heuristic"`` (paired on the same dice).
    ``target``: the half-width (points per game) the paired intervals should reach (None: no
    line on it).
    """
    label = "regret/game" if loss == "regret" else "behind bot/game"
    if any(r.get("mode") in ("disagreements", "cross_entropy", "value_sq_error") for r in rows):
        label = "loss/game"
    w = max([9, *(len(r.get("mode") or "main") for r in rows)])
    head = (f"{'arm':26s} {'mode':{w}s} {'seeds':>5s} {'games':>6s} {label:>15s} {'95% CI':>18s} "
            f"{'vs ' + baseline:>14s} {'95% CI':>18s} {'MDE':>6s}  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        mode = r.get("mode") or "main"
        lead = f"{r['arm']:26s} {mode:{w}s} {r['seeds']:5d} {r.get('games', 0):6d} {r['regret']:15.2f} {ci:>18s}"
        if "diff" in r:
            dci = f"[{r['diff_low']:+.2f}, {r['diff_high']:+.2f}]"
            lines.append(f"{lead} {r['diff']:+14.2f} {dci:>18s} {r['mde']:6.2f}  {_verdict(r, baseline)}")
        elif r["arm"] == baseline:
            lines.append(f"{lead} {'(baseline)':>14s}")
        else:
            lines.append(f"{lead} {'':>14s} {'':>18s} {'':>6s}  {r.get('note', '')}".rstrip())
    spread = [f"{r['arm']}" + (f" [{r['mode']}]" if r.get("mode") else "") + ": "
              + ", ".join(f"{v:.1f}" for v in r["seed_means"]) for r in rows if len(r.get("seed_means", [])) > 1]
    lines.append("")
    if loss != "regret":
        lines.append(f"Each game's number: {loss} on the same dice (this card has no exact oracle).")
    if spread:
        lines.append("95% intervals: training seeds and evaluation games both random (two-way ANOVA, Satterthwaite's "
                     "degrees of freedom: few seeds give wide intervals), paired by seed and game.")
        lines += [f"  per-seed mean  {t}" for t in spread]
    else:
        lines.append("95% intervals over the evaluation games (one training seed per arm: seed-to-seed "
                     "spread is not included).")
    from yamblab.platform.plots import MODE_UNITS, MODE_WORDS

    for mode in dict.fromkeys(r.get("mode") for r in rows):
        if mode in MODE_UNITS:
            lines.append(f"mode {mode}: {MODE_WORDS[mode]}, {MODE_UNITS[mode]} per game"
                         + (" (one number per network: its interval is over the training seeds alone)"
                            if mode == "full_turn_exact" else " (summed over each game's positions of the set; "
                            "the games column counts the set's games)"))
    compared = [r for r in rows if "diff" in r]
    if compared:
        z = minimum_detectable_effect(1.0)
        lines.append(f"Each arm is compared with {baseline} in the mode it is judged on (played games: none, the "
                     f"policy head alone; one_step, full_turn: search; solver-graded: as named above). MDE: the "
                     f"smallest true paired difference a two-sided 5% test detects with 80% power ({z:.2f} x "
                     f"the paired interval's half-width).")
        for mode in dict.fromkeys(r.get("mode") for r in compared):
            these = [r for r in compared if r.get("mode") == mode]
            widths = ", ".join(f"{r['arm']} ±{r['half_width']:.2f}" for r in these)
            line = f"  mode {mode or 'main'}: paired 95% half-widths {widths}"
            if target is not None:
                ok = sum(r["half_width"] <= target + 1e-12 for r in these)
                worst = max(r["half_width"] for r in these)
                line += (f"; all within the ±{target:g} target" if ok == len(these) else
                         f"; {ok} of {len(these)} within the ±{target:g} target (widest ±{worst:.2f})")
            lines.append(line)
            for r in these:
                if "sd_seed" not in r:
                    continue
                line = (f"    {r['arm']}: the difference's SD between training seeds {r['sd_seed']:.2f}, "
                        f"between games {r['sd_game']:.2f}, rest {r['sd_resid']:.2f} (points/game; "
                        f"from {r['seeds']} seeds, so rough)")
                if target is not None:
                    # the row's design is for the default target: plan again for this table's one
                    vc = {"seed": r["sd_seed"] ** 2, "game": r["sd_game"] ** 2, "resid": r["sd_resid"] ** 2}
                    n_seeds, n_games = design_for_target(vc, r["games"], target)
                    line += f"; ±{target:g} needs about {n_seeds} training seeds at {n_games} games"
                    if n_games > r["games"]:
                        line += f" (at {r['games']} games the games' own spread alone is too wide)"
                lines.append(line)
    return "\n".join(lines)


def plot_table(rows: list[dict], baseline: str):
    """The arms side by side (a matplotlib figure): left, each arm's mean regret per game with
    its 95% interval and each training seed's mean as a dot; right, each arm's paired difference
    from the baseline with its 95% interval (green: clearly better, red: clearly worse). Where
    the rows span several decision modes, each label names its mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    several = len({r.get("mode") for r in rows}) > 1

    def label(r: dict) -> str:
        return f"{r['arm']} [{r['mode']}]" if several and r.get("mode") else r["arm"]

    has_diff = any("diff" in r for r in rows)
    fig, axes = plt.subplots(1, 2 if has_diff else 1, figsize=(max(6, 1.1 * len(rows) + 3) * (1.8 if has_diff else 1), 4.2),
                             squeeze=False)
    ax = axes[0][0]
    names = [label(r) for r in rows]
    x = np.arange(len(rows))
    means = np.array([r["regret"] for r in rows])
    err = np.array([[r["regret"] - r["ci_low"] for r in rows], [r["ci_high"] - r["regret"] for r in rows]])
    colors = ["tab:gray" if r["arm"] == baseline else ("tab:red" if r.get("matters") and r["diff"] > 0
              else "tab:green" if r.get("matters") else "tab:blue") for r in rows]
    ax.bar(x, means, yerr=err, capsize=4, color=colors, alpha=0.85)
    for i, r in enumerate(rows):
        sm = r.get("seed_means", [])
        if len(sm) > 1:
            ax.scatter(np.full(len(sm), i) + np.linspace(-0.15, 0.15, len(sm)), sm, s=14, color="black",
                       zorder=3, label="one training seed" if i == 0 else None)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("regret per game (points, 95% CI)")
    ax.set_title("Each arm (grey: baseline; dots: training seeds)")
    if any(len(r.get("seed_means", [])) > 1 for r in rows):
        ax.legend(loc="best", fontsize=8)
    if has_diff:
        ax2 = axes[0][1]
        d = [r for r in rows if "diff" in r]
        y = np.arange(len(d))
        dm = np.array([r["diff"] for r in d])
        derr = np.array([[r["diff"] - r["diff_low"] for r in d], [r["diff_high"] - r["diff"] for r in d]])
        dcol = ["tab:red" if r["matters"] and r["diff"] > 0 else "tab:green" if r["matters"] else "tab:blue" for r in d]
        for i in range(len(d)):
            ax2.errorbar(dm[i], y[i], xerr=derr[:, i:i + 1], fmt="o", color=dcol[i], capsize=4, lw=2)
        ax2.axvline(0.0, color="gray", lw=1, ls="--")
        ax2.set_yticks(y, [label(r) for r in d])
        ax2.invert_yaxis()
        ax2.set_xlabel(f"paired difference from {baseline} (points per game, 95% CI)")
        ax2.set_title("Which idea helps (left of 0: better)")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- the sweep
#: attempts a trial gets when its node (or one of its actors) is lost; each attempt after the
#: first resumes from the trial's last checkpoint
MAX_ATTEMPTS = 3


def _safe(name: str) -> str:
    """A file- and metric-safe form of an arm name (factor arms contain ``=`` and ``,``)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("_") or "arm"


def _lost(exc: BaseException) -> bool:
    """Whether a trial's failure is the cluster's (a node, a worker process or an object was
    lost) rather than the trial's own (an exception raised by its code)."""
    import ray.exceptions as rx

    kinds = tuple(k for k in (getattr(rx, n, None) for n in (
        "RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
        "ObjectFetchTimedOutError", "ActorPlacementGroupRemoved", "LocalRayletDiedError",
        "ActorUnschedulableError", "RaySystemError")) if isinstance(k, type))
    if isinstance(exc, rx.RayTaskError):
        cause = getattr(exc, "cause", None)
        return isinstance(cause, kinds)
    return isinstance(exc, kinds)


def _grid_key(t) -> tuple:
    """A grid trial's (arm, training seed): user attributes (parameters in older studies)."""
    return (t.user_attrs.get("arm", t.params.get("arm")), t.user_attrs.get("seed", t.params.get("seed")))


@dataclass
class Slot:
    """One trial to run (or to carry on) and its state while it runs.

    Attributes:
        key: ``ARM/seedN`` (grid) or ``trialN`` (tpe); params: the Optuna parameters to enqueue
            (``{}``: let the sampler choose); why: ``new``, ``changed`` (the arm's config changed
            since it ran), ``interrupted`` (its driver was killed) or ``failed``.
        run_dir, run_id: the checkpoint folder and MLflow child run of an earlier attempt.
    """

    key: str
    params: dict
    why: str = "new"
    run_dir: str | None = None
    run_id: str | None = None
    trial: Any = None
    cfg: Any = None
    name: str = ""
    actor: Any = None
    pg: Any = None
    it: int = 0
    logged: int = 0
    attempts: int = 0
    nodes: list = field(default_factory=list)
    last: dict = field(default_factory=dict)
    done: bool = False
    minutes: float = 0.0
    offset: int = 0
    counted: int = 0

    def budget(self) -> float | None:
        """The trial's time budget in minutes (``runtime.time_budget_minutes``), or None."""
        return self.cfg.runtime.time_budget_minutes if self.cfg is not None else None


@dataclass
class Plan:
    """What a (re)started sweep will do: trials kept, trials to run, arms left out."""

    kept: list[str] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    fresh_start: bool = True

    def describe(self, name: str) -> str:
        """The plan in words (printed when a sweep starts, and logged to its parent run)."""
        if self.fresh_start and not self.kept and not self.dropped and all(s.why == "new" for s in self.slots):
            return f"sweep {name}: {len(self.slots)} trials to run"
        lines = [f"sweep {name}: resuming: {len(self.kept)} finished trials kept, {len(self.slots)} to run"]
        by = {}
        for s in self.slots:
            by.setdefault(s.why, []).append(s.key)
        words = {"interrupted": "interrupted (carried on from their checkpoints)",
                 "changed": "changed since they ran (run again)", "new": "new (not run before)",
                 "failed": "failed before (run again, from a checkpoint if they left one)"}
        for why in ("interrupted", "changed", "new", "failed"):
            if by.get(why):
                lines.append(f"  {words[why]}: {', '.join(by[why])}")
        if self.kept:
            lines.append(f"  unchanged, kept: {', '.join(self.kept)}")
        if self.dropped:
            lines.append(f"  no longer in the spec (kept in the study, left out of the table): "
                         f"{', '.join(self.dropped)}")
        return "\n".join(lines)


class Sweep:
    """Run (or resume) the sweep described by a validated :class:`SweepConfig`.

    Resuming is by content: a grid trial is identified by its arm, its training seed and the
    digest of its whole config (:func:`config_digest`), so after an edit of the spec the
    unchanged arms are kept, changed and new arms run, arms no longer in the spec leave the
    table, and trials interrupted by a killed driver carry on from their checkpoints (in the same
    MLflow run). Within a run, a trial whose node dies is started again elsewhere and resumes
    from its last checkpoint (up to :data:`MAX_ATTEMPTS` attempts); its MLflow run and Optuna
    trial stay the same, and no iteration is logged twice.

    Args:
        spec: the sweep.
        base: the run config every trial starts from.
        tracking_uri: MLflow store (default: the spec's, else SQLite in the working directory).
        ray_address: an existing Ray cluster, else a local one is started.
        progress: show a progress bar and say what a resumed sweep keeps and runs (on stderr).

    Raises:
        ConfigError: an arm judged on a decision mode its trials or the baseline's do not grade
            (see :meth:`SweepConfig.judge_modes`).
    """

    def __init__(self, spec: SweepConfig, base: RunConfig, tracking_uri: str | None = None,
                 ray_address: str | None = None, progress: bool = True):
        #: arm -> the decision mode it is judged on (checked against the trials' configs first)
        self.judge = spec.judge_modes(base)
        self.spec = spec
        self.base = base
        #: a branched sweep's base: its run config (None for a checkpoint), its identity (a
        #: digest every trial's digest includes), and once trained its checkpoint and iteration
        self.base_cfg: RunConfig | None = None
        self.branch_id: str | None = None
        self.base_checkpoint: Path | None = None
        self.base_iteration = 0
        self._base_state: dict | None = None     # the base checkpoint, loaded once
        if spec.branch_from is not None:
            from yamblab.platform import branch

            b = spec.branch_from
            if b.checkpoint is not None:
                self._base_state, stored = branch.load_base(b.checkpoint)
                branch.check_branchable(spec, base, stored)
                self.branch_id = branch.file_digest(b.checkpoint)
            else:
                self.base_cfg = branch.base_config(spec, base)
                branch.check_branchable(spec, base, self.base_cfg)
                self.branch_id = config_digest(self.base_cfg)
        self.tracker = Tracker(tracking_uri or spec.tracking_uri, spec.experiment)
        self.ray_address = ray_address
        self.progress = progress
        self.messages: list[str] = []
        self.plan_text = ""

    def _say(self, msg: str) -> None:
        self.messages.append(msg)
        if self.progress:
            import sys

            print(msg, file=sys.stderr, flush=True)
        else:
            log.info(msg)

    # -- optuna
    def _study(self):
        import optuna

        storage = self.spec.storage_url()
        if isinstance(storage, str) and storage.startswith("journal:"):
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            path = Path(storage[len("journal:"):])
            path.parent.mkdir(parents=True, exist_ok=True)
            storage = JournalStorage(JournalFileBackend(str(path)))
        else:   # a database: parallel writers, connections checked before use
            try:
                storage = optuna.storages.RDBStorage(storage, engine_kwargs={"pool_pre_ping": True})
            except Exception as exc:  # noqa: BLE001 - a wrong URL or an unreachable server is the user's to fix
                from yamblab.errors import YamblabError

                msg = " ".join(str(exc).split())[:300]
                raise YamblabError(f"cannot open the Optuna storage {self.spec.storage}: {msg}") from None
        if self.spec.kind == "tpe":
            sampler = optuna.samplers.TPESampler(seed=self.spec.sampler_seed)
            pruner = (optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
                      if self.spec.pruning else optuna.pruners.NopPruner())
        else:
            sampler = optuna.samplers.RandomSampler(seed=0)  # every grid trial is enqueued
            pruner = optuna.pruners.NopPruner()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        return optuna.create_study(study_name=self.spec.name, storage=storage, sampler=sampler,
                                   pruner=pruner, direction="minimize", load_if_exists=True)

    def _parent_run(self, study) -> str:
        tags = {"yamblab.kind": "sweep", "yamblab.code_version": code_version(),
                "yamblab.sweep": self.spec.name, "yamblab.rules_hash": self.base.rules_obj.digest,
                "yamblab.training_seeds": ",".join(str(s) for s in self.spec.seeds)
                if self.spec.kind == "grid" else f"base {self.base.train.seed}",
                "yamblab.evaluation_seed": self.base.runtime.eval_seed,
                "yamblab.evaluation_games": self.base.runtime.eval_games}
        rid = study.user_attrs.get("mlflow_parent_run_id")
        if rid:
            try:
                self.tracker.client.get_run(rid)
                self.tracker.client.update_run(rid, status="RUNNING")
                self.tracker.set_tags(rid, tags)
                return rid
            except Exception:  # noqa: BLE001 - a store that lost the run gets a new parent
                pass
        rid = self.tracker.start_run(f"sweep:{self.spec.name}", params={"sweep": self.spec.model_dump(mode="json")},
                                     tags=tags)
        study.set_user_attr("mlflow_parent_run_id", rid)
        return rid

    def _digest(self, cfg: RunConfig) -> str:
        """A trial's identity: its config's digest, and in a branched sweep its base's too."""
        d = config_digest(cfg)
        if self.branch_id is None:
            return d
        import hashlib

        return hashlib.sha256(f"{d}:{self.branch_id}".encode()).hexdigest()[:12]

    def _want(self) -> dict[tuple[str, int], tuple[RunConfig, str]]:
        """(arm, seed) -> (its config, its digest), for every trial of a grid spec."""
        out = {}
        for arm, ov in self.spec.arm_overrides().items():
            for seed in self.spec.seeds:
                cfg = apply_overrides(self.base, {**self.spec.overrides, **ov, "train.seed": seed},
                                      source=f"sweep {self.spec.name}")
                out[(arm, seed)] = (cfg, self._digest(cfg))
        return out

    def plan(self, study) -> Plan:
        """What to run: trials left running by a killed driver are failed (and carried on from
        their checkpoints); a grid keeps every finished (arm, seed) whose config is unchanged."""
        import optuna

        TS = optuna.trial.TrialState
        trials = list(study.trials)
        plan = Plan(fresh_start=not trials)
        interrupted = set()
        for t in trials:  # trials left running by an interrupted driver are failed, then carried on
            if t.state == TS.RUNNING:
                study.tell(t.number, state=TS.FAIL)
                interrupted.add(t.number)
        if self.spec.kind == "grid":
            want = self._want()
            done, stale, carry = {}, set(), {}
            for t in sorted(trials, key=lambda t: t.number):
                key = _grid_key(t)
                d = t.user_attrs.get("config_digest")
                ok = key in want and (d is None or d == want[key][1])
                if t.state == TS.COMPLETE:
                    if ok:
                        done[key] = t
                    elif key in want:
                        stale.add(key)
                    elif key[0] not in self.spec.arm_overrides() and key[0] not in plan.dropped:
                        plan.dropped.append(str(key[0]))
                elif ok:   # failed or interrupted with this very config: carry on its run
                    carry[key] = (t, t.number in interrupted)
            for (arm, seed), (cfg, digest) in want.items():
                key = f"{arm}/seed{seed}"
                if (arm, seed) in done:
                    plan.kept.append(key)
                    continue
                why, run_id = "new", None
                if (arm, seed) in carry:
                    t, was_running = carry[(arm, seed)]
                    why = "interrupted" if was_running else "failed"
                    run_id = t.user_attrs.get("mlflow_run_id")
                elif (arm, seed) in stale:
                    why = "changed"
                plan.slots.append(Slot(key, {"arm": arm, "seed": seed}, why=why, run_id=run_id))
        else:
            n_done = sum(t.state in (TS.COMPLETE, TS.PRUNED) for t in trials)
            plan.kept = [f"trial{t.number}" for t in trials if t.state in (TS.COMPLETE, TS.PRUNED)]
            for t in trials:
                if t.number in interrupted and len(plan.slots) < self.spec.n_trials - n_done:
                    plan.slots.append(Slot(f"trial{t.number}", dict(t.params), why="interrupted",
                                           run_dir=t.user_attrs.get("run_dir"),
                                           run_id=t.user_attrs.get("mlflow_run_id")))
            while len(plan.slots) < self.spec.n_trials - n_done:
                plan.slots.append(Slot(f"new{len(plan.slots)}", {}))
        return plan

    def _pending(self, study) -> list[dict]:
        """Trial parameter sets still to run (see :meth:`plan`)."""
        return [s.params for s in self.plan(study).slots]

    def _trial_config(self, trial, params: dict) -> tuple[RunConfig, str]:
        if self.spec.kind == "grid":
            # the arm and seed are the trial's user attributes, not Optuna parameters: an edited
            # spec changes the list of arms, and a parameter's choices may not change in a study
            arms = self.spec.arm_overrides()
            arm, seed = params["arm"], params["seed"]
            trial.set_user_attr("arm", arm)
            trial.set_user_attr("seed", seed)
            overrides = {**self.spec.overrides, **arms[arm], "train.seed": seed}
            name = f"{arm}/seed{seed}"
        else:
            overrides = dict(self.spec.overrides)
            for key, rng in self.spec.params.items():
                if rng.choices is not None:
                    overrides[key] = trial.suggest_categorical(key, rng.choices)
                elif rng.integer:
                    overrides[key] = trial.suggest_int(key, int(rng.low), int(rng.high), log=rng.log)
                else:
                    overrides[key] = trial.suggest_float(key, rng.low, rng.high, log=rng.log)
            name = f"trial{trial.number}"
        cfg = apply_overrides(self.base, overrides, source=f"sweep {self.spec.name}")
        return cfg, name

    def run(self) -> list[dict]:
        """Run every pending trial and return the result table rows."""
        import ray

        study = self._study()
        parent = self._parent_run(study)
        plan = self.plan(study)
        self.plan_text = plan.describe(self.spec.name)
        self._say(self.plan_text)
        if not plan.fresh_start:
            n = int(study.user_attrs.get("resumes", 0)) + 1
            study.set_user_attr("resumes", n)
            self.tracker.log_text(parent, self.plan_text, f"resumes/resume-{n}.txt")
            self.tracker.log_text(parent, self.spec.model_dump_json(indent=2), f"resumes/spec-{n}.json")
        started_ray = False
        if plan.slots:
            if not ray.is_initialized():
                from yamblab.actors.cluster import init_ray

                init_ray(self.ray_address)
                started_ray = True
        try:
            if plan.slots and self.spec.branch_from is not None:
                self._ensure_base(parent)
            self._run_trials(study, parent, plan.slots)
        finally:
            if started_ray:
                ray.shutdown()
        rows = self._results(study, parent)
        return rows

    # -- a branched sweep's base
    def base_run_dir(self) -> Path | None:
        """The folder of the base this sweep trains (None for a checkpoint base, or no branch):
        ``RUN_DIR/bases/GAME-DIGEST``, shared by every sweep with the same base config."""
        if self.base_cfg is None:
            return None
        root = Path(self.base_cfg.runtime.run_dir).expanduser().absolute() / "bases"
        return root / f"{_safe(self.base_cfg.game)}-{self.branch_id}"

    def _ensure_base(self, parent: str) -> Path:
        """Train the base once (or carry on a base a killed driver left half trained), or reuse
        a finished one; sets :attr:`base_checkpoint` and :attr:`base_iteration`."""
        b = self.spec.branch_from
        if b.checkpoint is not None:
            self.base_checkpoint = Path(b.checkpoint).expanduser().absolute()
            self.base_iteration = int(self._base_state["iteration"])
            self._say(f"sweep {self.spec.name}: every trial branches from {self.base_checkpoint} "
                      f"(iteration {self.base_iteration})")
            return self.base_checkpoint
        from filelock import FileLock, Timeout

        run_dir = self.base_run_dir()
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{run_dir}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            self._say(f"sweep {self.spec.name}: another sweep is training the same base ({run_dir.name}); waiting for it")
            lock.acquire()
        try:
            return self._train_base(parent, run_dir)
        finally:
            lock.release()

    def _train_base(self, parent: str, run_dir: Path) -> Path:
        """:meth:`_ensure_base`'s work, under the base's lock."""
        from yamblab.platform.runtime import CHECKPOINT, TrainingRun

        b = self.spec.branch_from
        ckpt, done = run_dir / CHECKPOINT, run_dir / "base-done.json"
        if done.exists() and ckpt.exists():
            self.base_checkpoint = ckpt
            self.base_iteration = int(json.loads(done.read_text())["iteration"])
            self._say(f"sweep {self.spec.name}: base {run_dir.name} already trained ({self.base_iteration} "
                      f"iterations): reused")
            return ckpt
        cpus = b.cpus or self.spec.parallel * self.spec.trial_cpus
        length = f"{b.iterations} iterations" if b.iterations else f"{b.minutes:g} minutes"
        self._say(f"sweep {self.spec.name}: training the base once ({length} of the {self.spec.baseline_arm or 'baseline'} "
                  f"arm's config, seed {b.seed}, {cpus:g} CPUs) in {run_dir}"
                  + (" (carrying on its checkpoint)" if ckpt.exists() else ""))
        run = TrainingRun(self.base_cfg, run_dir, resume=ckpt.exists(), tracker=self.tracker,
                          progress=self.progress, cpus=cpus, parent_run_id=parent,
                          tags={"yamblab.kind": "base", "yamblab.sweep": self.spec.name,
                                "yamblab.config_digest": self.branch_id})
        try:
            run.run()
            run.finish()
        finally:
            run.shutdown()
        from yamblab.atomic import atomic_write

        atomic_write(done, [json.dumps({"iteration": run.iteration, "mlflow_run_id": run.run_id}).encode()])
        self.tracker.set_tags(parent, {"yamblab.base_run_dir": str(run_dir), "yamblab.base_run_id": run.run_id or ""})
        self.base_checkpoint, self.base_iteration = ckpt, run.iteration
        return ckpt

    # -- running trials
    def _open_trial(self, study, parent: str, slot: Slot) -> None:
        """Ask Optuna for the slot's trial and give it its config, folder and MLflow run."""
        if slot.params and self.spec.kind != "grid":
            study.enqueue_trial(slot.params)
        trial = study.ask()
        cfg, name = self._trial_config(trial, slot.params)
        digest = self._digest(cfg)
        # relative to the driver's working directory (on a cluster: a shared mount, see infra/README.md)
        root = Path(cfg.runtime.run_dir).expanduser().absolute() / "sweeps" / _safe(self.spec.name)
        if self.spec.kind == "grid":
            run_dir = root / f"{_safe(slot.params['arm'])}-seed{slot.params['seed']}-{digest}"
        else:
            run_dir = Path(slot.run_dir) if slot.run_dir else root / f"trial{trial.number}"
        tags = {"yamblab.kind": "trial", "yamblab.code_version": code_version(),
                "yamblab.rules_hash": cfg.rules_obj.digest, "yamblab.preset": cfg.model_preset,
                "yamblab.sweep": self.spec.name, "optuna.trial": trial.number,
                "yamblab.config_digest": digest, "yamblab.run_dir": str(run_dir)}
        if self.spec.kind == "grid":
            tags["yamblab.arm"] = slot.params["arm"]
        run_id = None
        if slot.run_id:   # an interrupted trial carries on in its own MLflow run
            try:
                self.tracker.client.get_run(slot.run_id)
                run_id = slot.run_id
                self.tracker.client.update_run(run_id, status="RUNNING")
                self.tracker.set_tags(run_id, {**tags, "yamblab.carried_on": "true"})
                hist = self.tracker.client.get_metric_history(run_id, "iteration")
                slot.logged = max((int(m.step) for m in hist), default=0)
            except Exception:  # noqa: BLE001 - a lost run: start a new one
                run_id = None
        if run_id is None:
            run_id = self.tracker.start_run(name, params=cfg.model_dump(mode="json"), parent_run_id=parent,
                                            tags=tags)
            self.tracker.log_text(run_id, cfg.to_yaml(), "config.yaml")
        trial.set_user_attr("mlflow_run_id", run_id)
        trial.set_user_attr("config_digest", digest)
        trial.set_user_attr("run_dir", str(run_dir))
        if self.base_checkpoint is not None:
            # a branched trial runs runtime.iterations more iterations after the base's, from a
            # first checkpoint written from the base's (once: a carried-on trial has its own)
            from yamblab.platform.branch import branch_checkpoint
            from yamblab.platform.runtime import CHECKPOINT

            cfg = cfg.model_copy(update={"runtime": cfg.runtime.model_copy(update={
                "iterations": self.base_iteration + cfg.runtime.iterations, "time_budget_minutes": None})})
            if not (run_dir / CHECKPOINT).exists():
                if self._base_state is None:
                    from yamblab.model.checkpoint import load_checkpoint

                    self._base_state = load_checkpoint(self.base_checkpoint)
                branch_checkpoint(self.base_checkpoint, cfg, run_dir, self.spec.branch_from.evaluate,
                                  state=self._base_state)
            slot.offset = self.base_iteration
            trial.set_user_attr("branch_iteration", self.base_iteration)
            self.tracker.set_tags(run_id, {"yamblab.branched_from": str(self.base_checkpoint),
                                           "yamblab.branch_iteration": self.base_iteration})
        slot.trial, slot.cfg, slot.name, slot.run_id, slot.run_dir = trial, cfg, name, run_id, str(run_dir)

    def _start_actor(self, slot: Slot):
        """Start the slot's trial actor in a fresh placement group; returns its ``info`` future."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from yamblab.actors.cluster import cluster_has_gpu
        from yamblab.platform.runtime import trial_bundles

        Actor = ray.remote(num_cpus=0, max_restarts=0)(TrialRunner)
        bundles, strategy = trial_bundles(slot.cfg.runtime, self.spec.trial_cpus, cluster_has_gpu())
        slot.pg = placement_group(bundles, strategy=strategy)
        slot.actor = Actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            slot.pg, placement_group_capture_child_tasks=True)).remote(
            slot.cfg, slot.run_dir, self.spec.trial_cpus, True)
        slot.attempts += 1
        return slot.actor.info.remote()

    def _run_trials(self, study, parent: str, slots: list[Slot]) -> None:
        import optuna
        import ray

        queue = list(slots)
        active: dict[Any, tuple[Slot, str]] = {}
        iters = self.base.runtime.iterations
        # Trials on a time budget show the budget (trial-minutes), not iterations they will
        # never reach; the others count iterations.
        # (an arm that sets another budget moves the bar by its own minutes)
        base_budget = self.base.runtime.time_budget_minutes
        timed = base_budget is not None
        bar = None
        if self.progress and queue:
            from tqdm.auto import tqdm

            if timed:
                bar = tqdm(total=len(queue) * base_budget, desc=f"sweep {self.spec.name}",
                           unit="trial-min", bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} trial-min of time budget "
                           "[{elapsed} elapsed]")
            else:
                bar = tqdm(total=len(queue) * iters, desc=f"sweep {self.spec.name}", unit="iterations")

        def advance(slot: Slot, metrics: dict | None = None, to_end: bool = False) -> None:
            """Move the bar: the trial's iterations (a branched trial's since its branch point),
            or its minutes since its last update."""
            if bar is None:
                return
            if not timed:
                now = iters if to_end else min(iters, max(0, slot.it - slot.offset))
                if now > slot.counted:
                    bar.update(now - slot.counted)
                    slot.counted = now
                return
            budget = slot.budget() or base_budget
            now = budget if to_end else min(budget, float((metrics or {}).get("minutes", slot.minutes)))
            if now > slot.minutes:
                bar.update(round(now - slot.minutes, 3))
                slot.minutes = now

        def launch(slot: Slot) -> None:
            self._open_trial(study, parent, slot)
            active[self._start_actor(slot)] = (slot, "info")

        def next_step(slot: Slot) -> None:
            if slot.it < slot.cfg.runtime.iterations and not slot.done:
                active[slot.actor.iteration.remote()] = (slot, "iteration")
            else:
                active[slot.actor.finish.remote()] = (slot, "finish")

        def log_iteration(slot: Slot, metrics: dict) -> None:
            step = int(metrics.get("iteration", slot.it))
            if metrics.get("branch_point"):      # a branch point: its evaluation, not a training step
                metrics = {k: v for k, v in metrics.items() if k.startswith("eval.")}
            if step > slot.logged:     # an iteration is logged once, whatever the attempts
                self.tracker.log_metrics(slot.run_id, metrics, step=step)
                slot.logged = step
                slot.last = dict(metrics)
                slot.it = max(slot.it, step)
                advance(slot, metrics)

        def late(slot: Slot, out: dict) -> None:
            """Log evaluations that finished after their iteration, at their iteration."""
            for ev in out.pop("late_evals", None) or []:
                step = int(ev["eval.iteration"])
                self.tracker.log_metrics(slot.run_id, ev, step=step)
                v = ev.get("eval.regret_mean")
                if self.spec.kind == "tpe" and v is not None and math.isfinite(v):
                    slot.trial.report(float(v), step)

        def close(slot: Slot) -> None:
            self._release(slot)
            if queue:
                launch(queue.pop(0))

        while queue and len(active) < self.spec.parallel:
            launch(queue.pop(0))
        while active:
            ready, _ = ray.wait(list(active), num_returns=1)
            fut = ready[0]
            slot, kind = active.pop(fut)
            trial, run_id = slot.trial, slot.run_id
            try:
                out = ray.get(fut)
            except Exception as exc:  # noqa: BLE001 - one failed trial must not stop the sweep
                if _lost(exc) and slot.attempts < MAX_ATTEMPTS:
                    self._say(f"trial {slot.name}: lost its node or an actor ({type(exc).__name__}) at "
                              f"iteration {slot.it}; starting it again from its last checkpoint "
                              f"(attempt {slot.attempts + 1} of {MAX_ATTEMPTS})")
                    self._release(slot)
                    active[self._start_actor(slot)] = (slot, "info")
                    continue
                log.error("trial %s failed: %s", slot.name, exc)
                self._say(f"trial {slot.name} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                self.tracker.end_run(run_id, "FAILED")
                close(slot)
                continue
            if kind == "info":
                slot.it = int(out["iteration"])
                slot.done = bool(out.get("done", False))
                slot.nodes.append(out["node_id"])
                tags = {"yamblab.node": out["node_id"], "yamblab.host": out["host"],
                        "yamblab.attempts": slot.attempts, "yamblab.nodes": ",".join(n[:12] for n in slot.nodes)}
                if out["resumed_from"] is not None:
                    tags["yamblab.resumed_from_iteration"] = out["resumed_from"]
                    if slot.attempts > 1 or slot.why != "new":
                        self._say(f"trial {slot.name}: resumed from its checkpoint at iteration {out['resumed_from']}")
                self.tracker.set_tags(run_id, tags)
                if slot.attempts == 1 and not timed:
                    advance(slot)
                if out["history"] and not slot.last:
                    slot.last = dict(out["history"][-1])      # logged by an earlier attempt or driver
                for m in out["history"]:      # iterations the checkpoint has and MLflow lacks
                    log_iteration(slot, m)
                    v = m.get("eval.regret_mean")
                    if (self.spec.kind == "tpe" and slot.attempts == 1 and v is not None and math.isfinite(v)):
                        trial.report(float(v), int(m["iteration"]))   # a carried-on trial's new Optuna trial
                next_step(slot)
                continue
            if kind == "finish":
                late(slot, out)
                regrets = np.asarray(out["per_game_regret"], dtype=np.float64)
                # only what the last iteration's record lacks (a final evaluation), never a value twice
                extra = {k: v for k, v in out.get("metrics", {}).items() if k not in slot.last}
                if extra:
                    self.tracker.log_metrics(run_id, extra, step=slot.it)
                import tempfile

                with tempfile.TemporaryDirectory(prefix="yamblab-trial-") as tmp:
                    for name, data in out.get("files", {}).items():
                        (Path(tmp) / name).write_bytes(data)
                        self.tracker.log_artifact(run_id, Path(tmp) / name)
                if out.get("network"):       # the resumable checkpoint stays in runs/
                    from yamblab.model.checkpoint import network_from_state

                    self.tracker.log_torch_model(run_id, network_from_state(out["network"]))
                trial.set_user_attr("per_game_regret", [round(float(x), 6) for x in regrets])
                main = slot.cfg.eval_depth
                by_mode = {main: [round(float(x), 6) for x in regrets]}
                for mode, ev in (out.get("modes") or {}).items():
                    got = [round(float(x), 6) for x in ev["per_game_regret"]]
                    if mode != main or len(got) > len(by_mode[main]):
                        by_mode[mode] = got
                trial.set_user_attr("eval_mode", main)
                trial.set_user_attr("per_game_regret_modes", by_mode)
                trial.set_user_attr("loss", out.get("loss", "regret"))
                trial.set_user_attr("attempts", slot.attempts)
                study.tell(trial, float(regrets.mean()))
                self.tracker.end_run(run_id)
                if timed:
                    advance(slot, to_end=True)
                close(slot)
                continue
            slot.it = int(out.get("iteration", slot.it + 1))
            slot.done = bool(out.pop("done", False))
            late(slot, out)
            log_iteration(slot, out)
            value = out.get("eval.regret_mean")
            if value is not None and self.spec.kind == "tpe" and math.isfinite(value):
                trial.report(float(value), slot.it)
                if trial.should_prune():
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    self.tracker.set_tags(run_id, {"yamblab.pruned": "true"})
                    self.tracker.end_run(run_id, "KILLED")
                    advance(slot, to_end=True)
                    close(slot)
                    continue
            next_step(slot)
        if bar is not None:
            bar.close()

    @staticmethod
    def _release(slot: Slot) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        if slot.actor is not None:
            try:
                ray.kill(slot.actor)
            except Exception:  # noqa: BLE001 - already gone with its node
                pass
        if slot.pg is not None:
            try:
                remove_placement_group(slot.pg)
            except Exception:  # noqa: BLE001
                pass
        slot.actor = slot.pg = None

    def _results(self, study, parent: str) -> list[dict]:
        import optuna

        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
                    and "per_game_regret" in t.user_attrs]
        want = self._want() if self.spec.kind == "grid" else {}
        if self.spec.kind == "grid":    # the latest finished trial of each (arm, seed) the spec has now
            latest: dict[tuple, Any] = {}
            for t in sorted(complete, key=lambda t: t.number):
                key = _grid_key(t)
                d = t.user_attrs.get("config_digest")
                if key in want and (d is None or d == want[key][1]):
                    latest[key] = t
            complete = list(latest.values())
        groups: dict[str, list] = {}
        for t in complete:
            key = _grid_key(t)[0] if self.spec.kind == "grid" else f"trial{t.number}"
            groups.setdefault(key, []).append(t)
        arms = {}
        for key, trials in groups.items():
            seed_of = (lambda t: _grid_key(t)[1]) if self.spec.kind == "grid" else (lambda t: t.number)
            trials = sorted(trials, key=lambda t: (seed_of(t), t.number))
            groups[key] = trials
            arms[key] = self._arm_result(key, trials, [seed_of(t) for t in trials], want)
        if self.spec.kind == "grid":
            order = [a for a in self.spec.arm_overrides() if a in arms]
            arms = {a: arms[a] for a in order}
            baseline = self.spec.baseline_arm or (order[0] if order else "")
        else:
            best = min(complete, key=lambda t: t.value).number if complete else None
            baseline = f"trial{best}" if best is not None else ""
        target = self.spec.target_half_width
        rows = summarise(arms, baseline, {a: m for a, m in self.judge.items() if a in arms}, target)
        for r in rows:
            r["training_seeds"] = [int(x) for x in arms[r["arm"]].seeds]
            r["evaluation_seed"] = int(self.base.runtime.eval_seed)
        loss = complete[0].user_attrs.get("loss", "regret") if complete else "regret"
        table = format_table(rows, baseline, loss, target)
        rt = self.base.runtime
        games = ", ".join(f"{m} {n}" for m, n in {self.base.eval_depth: rt.eval_games, **rt.eval_modes}.items())
        table += (f"\nTraining seeds (train.seed, one trial each): per arm above; evaluation: the same dice "
                  f"(seed {rt.eval_seed}, runtime.eval_seed) for every arm, the first games of them in each "
                  f"decision mode (games: {games}).")
        if rt.solver_eval:
            from yamblab.search.decision_set import DECISION_SEED

            table += (f"\nSolver-graded losses: the decision set of {rt.solver_games} games of the oracle's own play "
                      f"(dice seed {DECISION_SEED}), every arm graded on the same positions.")
        if self.base_checkpoint is not None or self.branch_id is not None:
            where = self.base_checkpoint or self.base_run_dir()
            table += (f"\nBranched: every trial continued the base {where} from its iteration "
                      f"{self.base_iteration or '?'} for {rt.iterations} iterations.")
        self.table_text = table
        self.baseline = baseline
        self.log_aggregates(parent, rows, baseline, table)
        if self.spec.kind == "grid":
            try:
                self.log_curves(parent, groups, baseline, loss)
            except Exception as exc:  # noqa: BLE001 - the table is logged already; the figures are extra
                log.warning("could not draw the arms' learning curves: %s", exc)
        self.tracker.end_run(parent)
        return rows

    def _arm_result(self, arm: str, trials: list, seeds: list[int], want: dict) -> ArmResult:
        """One arm's results from its finished trials' user attributes: the main mode's
        per-game regrets and every other mode's (trials from before modes were stored have
        their main mode only, named by their config)."""
        per_trial = []
        for t in trials:
            ua = t.user_attrs
            main = ua.get("eval_mode")
            if main is None:
                cfg = want.get(_grid_key(t), (self.base,))[0] if want else self.base
                main = cfg.eval_depth
            by_mode = dict(ua.get("per_game_regret_modes") or {})
            by_mode.setdefault(main, ua["per_game_regret"])
            per_trial.append((main, by_mode))
        main = per_trial[0][0]
        common = [m for m in per_trial[0][1] if all(m in bm for _, bm in per_trial)]

        def stack(mode: str) -> np.ndarray:
            xs = [np.asarray(bm[mode], dtype=np.float64) for _, bm in per_trial]
            n = min(len(x) for x in xs)
            return np.stack([x[:n] for x in xs])

        return ArmResult(arm, stack(main), seeds, mode=main,
                         modes={m: stack(m) for m in common if m != main})

    def log_aggregates(self, parent: str, rows: list[dict], baseline: str, table: str) -> None:
        """Log the per-arm aggregates to the sweep's parent run, so the MLflow UI answers "which
        idea helps" without an export: per row of the table (``KEY``: the arm's name; the
        baseline off its main mode is ``BASELINE.MODE``) the mean regret per game across
        training seeds and evaluation games with its 95% interval (``KEY.regret``,
        ``KEY.ci_low``, ``KEY.ci_high``), the paired difference from the baseline on the arm's
        mode with its interval and minimum detectable effect (``KEY.diff``, ``KEY.diff_low``,
        ``KEY.diff_high``, ``KEY.half_width``, ``KEY.mde``), with two seeds or more the
        difference's variance components and the seeds the ±0.5 target needs (``KEY.sd_seed``,
        ``KEY.sd_game``, ``KEY.sd_resid``, ``KEY.seeds_needed``, ``KEY.games_needed``), the number of seeds and games; the
        table as text, JSON and an MLflow table (``results_table.json``, with each row's
        ``mode``); and the comparison plot with intervals (``regret_by_arm.png``). A resumed
        sweep logs them again, one step further on."""
        self.tracker.log_text(parent, table, "results.txt")
        self.tracker.log_text(parent, json.dumps(rows, indent=2), "results.json")
        if not rows:
            return
        step = len(self.tracker.client.get_metric_history(parent, "arms"))
        metrics: dict[str, float] = {"arms": float(len({r["arm"] for r in rows}))}
        for r in rows:
            a = r.get("key") or _safe(r["arm"])
            metrics.update({f"{a}.regret": r["regret"], f"{a}.ci_low": r["ci_low"], f"{a}.ci_high": r["ci_high"],
                            f"{a}.seeds": float(r["seeds"]), f"{a}.games": float(r["games"])})
            if "diff" in r:
                metrics.update({f"{a}.diff": r["diff"], f"{a}.diff_low": r["diff_low"],
                                f"{a}.diff_high": r["diff_high"], f"{a}.half_width": r["half_width"],
                                f"{a}.mde": r["mde"]})
            for k in ("sd_seed", "sd_game", "sd_resid", "seeds_needed", "games_needed"):
                if r.get(k) is not None:
                    metrics[f"{a}.{k}"] = float(r[k])
        self.tracker.log_metrics(parent, metrics, step=step)
        cols = ["arm", "mode", "seeds", "games", "regret", "ci_low", "ci_high", "diff", "diff_low", "diff_high",
                "half_width", "mde", "sd_seed", "sd_game", "sd_resid", "seeds_needed", "games_needed"]
        data = {c: [r.get(c) for r in rows] for c in cols}
        data["verdict"] = [_verdict(r, baseline) for r in rows]
        data["training_seeds"] = [",".join(str(x) for x in r.get("training_seeds", [])) for r in rows]
        try:
            self.tracker.client.log_table(parent, data=data, artifact_file="results_table.json")
        except Exception as exc:  # noqa: BLE001 - the text and JSON forms are logged already
            log.warning("could not log the results as an MLflow table: %s", exc)
        self.tracker.log_figure(parent, plot_table(rows, baseline), "regret_by_arm.png")

    def curve_data(self, groups: dict[str, list], loss: str = "regret") -> dict[str, dict[str, list[dict]]]:
        """Each arm's evaluation history in every decision mode, read back from its trials'
        MLflow runs.

        Args:
            groups: arm -> its finished Optuna trials (their ``mlflow_run_id``, ``seed`` and
                ``eval_mode`` user attributes).
            loss: ``"regret"`` reads ``eval[.MODE].regret_*``; anything else (a Yamb card with
                no oracle) ``eval[.MODE].vs_baseline_*``.

        Returns:
            mode -> arm -> one dict per training seed: ``seed``, ``step`` (iterations, int),
            ``mean``, ``ci_low``, ``ci_high`` (the evaluation's loss per game and its 95% CI,
            points; the CI may be absent) and ``positions`` (self-play positions behind each
            evaluation, where logged), float lists of equal length.
        """
        key = "regret" if loss == "regret" else "vs_baseline"
        client = self.tracker.client
        out: dict[str, dict[str, list[dict]]] = {}

        def history(run_id: str, name: str) -> dict[int, float]:
            return {int(m.step): float(m.value) for m in client.get_metric_history(run_id, name)}

        for arm, trials in groups.items():
            for t in trials:
                run_id = t.user_attrs.get("mlflow_run_id")
                if not run_id:
                    continue
                main = t.user_attrs.get("eval_mode") or self.base.eval_depth
                modes = list(dict.fromkeys([main, *(t.user_attrs.get("per_game_regret_modes") or {})]))
                positions = history(run_id, "eval.selfplay_positions")
                for mode in modes:
                    prefix = "eval." if mode == main else f"eval.{mode}."
                    mean = history(run_id, f"{prefix}{key}_mean")
                    if not mean:
                        continue
                    lo, hi = history(run_id, f"{prefix}{key}_ci_low"), history(run_id, f"{prefix}{key}_ci_high")
                    steps = sorted(mean)
                    curve = {"seed": _grid_key(t)[1], "step": steps, "mean": [mean[k] for k in steps]}
                    if all(k in lo and k in hi for k in steps):
                        curve["ci_low"] = [lo[k] for k in steps]
                        curve["ci_high"] = [hi[k] for k in steps]
                    if all(k in positions for k in steps):
                        curve["positions"] = [positions[k] for k in steps]
                    out.setdefault(mode, {}).setdefault(arm, []).append(curve)
        return out

    def log_curves(self, parent: str, groups: dict[str, list], baseline: str, loss: str = "regret") -> list[str]:
        """Log the arms' learning curves overlaid to the sweep's parent run: one figure per
        decision mode (``curves_MODE.png``, see :func:`yamblab.platform.plots.arm_curves`) and
        the curves' data (``curves.json``, see :meth:`curve_data`).

        Returns:
            the names of the figures logged.
        """
        from yamblab.platform import plots

        data = self.curve_data(groups, loss)
        self.tracker.log_text(parent, json.dumps(data, indent=1), "curves.json")
        names = []
        for mode, curves in data.items():
            fig = plots.arm_curves(curves, mode, loss=loss, baseline=baseline,
                                   judged=[a for a in curves if mode in self.judge.get(a, []) and a != baseline])
            name = f"curves_{_safe(mode)}.png"
            self.tracker.log_figure(parent, fig, name)     # closes it
            names.append(name)
        return names
