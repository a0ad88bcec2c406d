"""A solver-graded evaluation set: fixed decision positions with the exact oracle's value of every
legal action, so that a network's policy and value heads are graded in one forward pass, without
playing games.

The positions are those the oracle's own optimal play visits on seeded games (Yahtzee under any
rule variant, or a single down, up or free Yamb column); each carries the network's view
(:class:`~yamblab.games.encoding.EncodedBatch`) and ``q``, the oracle's expected points still to
come after every legal action. A policy's **regret** at a position is the oracle's best value
minus the value of the policy's choice (the grading of "The Best Values Aren't the Averages",
the article that grades rules of thumb by the solver); the values come from the backward solver
(the "How The AI Works" page of a Yahtzee web game) through the same full-turn pass as
:mod:`yamblab.oracle.yahtzee.grading`.

Sets are cached like :class:`~yamblab.oracle.yahtzee.table.OracleTable`: one file per game rules digest,
set version, number of games and dice seed, in :func:`yamblab.oracle.yahtzee.table.cache_dir`, written
atomically with a checksum that is verified on load.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from yamblab.atomic import atomic_write
from yamblab.errors import DamagedFileError
from yamblab.games.encoding import N_ACTIONS, EncodedBatch
from yamblab.search.registry import check_solved, endgame_oracle, exact_search, has_endgame

__all__ = ["DECISION_KINDS", "DECISION_SEED", "SET_VERSION", "DecisionSet", "decision_set",
           "SolverLosses", "solver_losses", "cache_path"]

#: Decision kinds, by rolls left at the position: the int8 codes 0, 1, 2 of ``DecisionSet.kind``.
DECISION_KINDS = ("first_keep", "second_keep", "box")

#: The per-game losses of the decision set that a sweep can judge an arm on (the judge modes of
#: ``runtime.solver_eval``), each summed over a game's positions of the set, lower is better:
#: name -> (what it is, its unit per game). :func:`losses_from_predictions` gives one array per
#: name; a new loss is a new entry here and its array there (the run config, the sweep spec and
#: the plots read their names, words and units from this table).
SOLVER_LOSSES: dict[str, tuple[str, str]] = {
    "policy_regret": ("the policy head's exact expected regret on the decision set", "points"),
    "argmax_regret": ("the policy head's argmax regret on the decision set", "points"),
    "disagreements": ("decisions off the oracle's best on the decision set", "decisions"),
    "cross_entropy": ("cross-entropy against the oracle's best actions (nats)", "nats"),
    "value_sq_error": ("the value head's squared error against the oracle (points²)",
                       "points², mean over the game's positions"),
}

#: The dice seed of the decision set (distinct from the evaluator's seed, so the set's positions
#: are not the games an evaluation plays).
DECISION_SEED = 7_340_021

#: The version of the set's construction and file; part of the cache file name. A change to
#: what a set holds (the endgame oracle's ``state_keys`` included) moves it.
SET_VERSION = 2

#: Games played at once while recording (memory: a few MB per thousand games).
CHUNK = 4096

#: An action is optimal (and a policy "agrees") when its value is within this of the best, points.
TIE = 1e-9

#: Probabilities below this are floored in the cross-entropy.
PROB_FLOOR = 1e-12

_ENC_FIELDS = tuple(f.name for f in fields(EncodedBatch))


@dataclass
class DecisionSet:
    """Decision positions of one game with the oracle's value of every legal action.

    Attributes:
        label: the game's readable name, e.g. ``"yahtzee forced"``.
        digest: the game's rules digest (``game.digest``).
        games: number of games the positions come from.
        seed: their dice seed.
        encoded: :class:`EncodedBatch` of the N positions (the network's view; legal mask in the
            shared 208-action space).
        q: float64 (N, 208): the oracle's value of every legal action, in points still to come
            from the position (the points the action scores now included) under optimal play
            afterwards; ``-inf`` on illegal actions.
        value: float64 (N,): the oracle's value of the position, ``q.max(axis=1)``, on the same
            footing as a network's value head (expected points still to come from a position
            with dice).
        kind: int8 (N,): index into :data:`DECISION_KINDS` by rolls left: 0 ``first_keep`` (two
            or more rolls left), 1 ``second_keep`` (one roll left), 2 ``box`` (no roll left).
            Placing the dice early, with rolls left, is one of the actions of a keep position.
        game_index: int32 (N,): the game (0 .. games-1) each position comes from.
        endgame_states: a set of a game's endgame (a Yamb card), the endgame oracle's solved
            states, ``(keys int16 (m, L), values float64 (m,))``
            (:meth:`~yamblab.search.yamb_endgame.YambEndgameOracle.solved_states`): every card
            the set's endgames can reach, so that grading play from their openings
            (``runtime.exact_eval``) solves nothing again; empty otherwise.

    Positions are in the order of play: step by step, and at each step the unfinished games in
    game order (in chunks of :data:`CHUNK` games).
    """

    label: str
    digest: str
    games: int
    seed: int
    encoded: EncodedBatch = field(repr=False)
    q: np.ndarray = field(repr=False)
    value: np.ndarray = field(repr=False)
    kind: np.ndarray = field(repr=False)
    game_index: np.ndarray = field(repr=False)
    endgame_states: tuple[np.ndarray, np.ndarray] = field(
        repr=False, default_factory=lambda: (np.zeros((0, 0), np.int16), np.zeros(0)))

    def __len__(self) -> int:
        return int(self.value.shape[0])

    @property
    def legal(self) -> np.ndarray:
        """bool (N, 208): the legal actions (``encoded.legal``)."""
        return self.encoded.legal

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array of the set by name (encoded fields prefixed ``enc_``), in checksum order."""
        out = {f"enc_{k}": getattr(self.encoded, k) for k in _ENC_FIELDS}
        out.update(q=self.q, value=self.value, kind=self.kind, game_index=self.game_index,
                   endgame_keys=self.endgame_states[0], endgame_values=self.endgame_states[1])
        return out

    @property
    def checksum(self) -> str:
        """SHA-256 (first 16 hex digits) over the label, digest, games, seed and every array
        (dtype, shape and bytes)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.label, self.digest, int(self.games), int(self.seed)]).encode())
        for name, a in self.arrays().items():
            a = np.ascontiguousarray(a)
            h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
            h.update(a.tobytes())
        return h.hexdigest()[:16]

    def positions_per_game(self) -> float:
        """Positions per game."""
        return len(self) / max(int(self.games), 1)

    def summary(self) -> str:
        """One line: positions, positions per game and the share of each kind."""
        shares = "  ".join(f"{k} {np.mean(self.kind == i):.1%}" for i, k in enumerate(DECISION_KINDS))
        return (f"decision set {self.label}: {len(self)} positions from {self.games} games "
                f"({self.positions_per_game():.2f} per game), seed {self.seed}; {shares}")


# ----------------------------------------------------------------------------- building
def kinds_of(rolls_left) -> np.ndarray:
    """int8 decision kinds (:data:`DECISION_KINDS`) of positions with ``rolls_left`` rolls left:
    two or more → 0, one → 1, none → 2."""
    rl = np.asarray(rolls_left, np.int64)
    return np.where(rl >= 2, 0, np.where(rl == 1, 1, 2)).astype(np.int8)


def _concat_encoded(parts: list[EncodedBatch]) -> EncodedBatch:
    if not parts:
        return EncodedBatch.empty(0)
    return EncodedBatch(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in _ENC_FIELDS})


def _take_encoded(enc: EncodedBatch, rows: np.ndarray) -> EncodedBatch:
    return EncodedBatch(**{k: getattr(enc, k)[rows] for k in _ENC_FIELDS})


def set_digest(game) -> str:
    """The digest a decision set of ``game`` carries: its rules', and for a game graded on its
    endgame alone, the number of open boxes the endgame starts at."""
    return f"{game.digest}-endgame{endgame_oracle(game).k}" if has_endgame(game) else game.digest


def build_decision_set(game, games: int, seed: int, progress: bool = False) -> DecisionSet:
    """Record the positions of the oracle's optimal play (no cache); see :func:`decision_set`."""
    from yamblab.games.protocol import step_shared

    if has_endgame(game):
        return _build_endgame_set(game, games, seed, progress)
    search = exact_search(game)
    encs, qs, kinds, gidx = [], [], [], []
    bar = _bar(progress, games, f"decision set {game.label}")
    for start in range(0, int(games), CHUNK):
        n = min(CHUNK, int(games) - start)
        batch = game.new_batch(n, seed=int(seed), first_game=start)
        search.reset()
        while not np.asarray(batch.done).all():
            live = np.flatnonzero(~np.asarray(batch.done))
            q = search.q(batch)
            # record only the unfinished games of this step
            encs.append(_take_encoded(game.encode(batch), live))
            qs.append(q[live])
            kinds.append(kinds_of(game.rolls_left(batch)[live]))
            gidx.append((start + live).astype(np.int32))
            step_shared(game, batch, np.argmax(q, axis=1))
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    return _assemble(game, games, seed, encs, qs, kinds, gidx, label=f"{game.name} {game.label}")


def _assemble(game, games, seed, encs, qs, kinds, gidx, label: str, endgame=None) -> DecisionSet:
    q = np.concatenate(qs) if qs else np.zeros((0, N_ACTIONS))
    enc = _concat_encoded(encs)
    bad = np.isfinite(q) != enc.legal
    if bad.any():   # pragma: no cover - a bug in the search or the encoding, not bad input
        raise RuntimeError(f"the oracle's values and the legal mask disagree at {int(bad.any(axis=1).sum())} positions")
    return DecisionSet(
        label=label, digest=set_digest(game), games=int(games), seed=int(seed),
        encoded=enc, q=q, value=q.max(axis=1) if len(q) else np.zeros(0),
        kind=np.concatenate(kinds) if kinds else np.zeros(0, np.int8),
        game_index=np.concatenate(gidx) if gidx else np.zeros(0, np.int32),
        **({"endgame_states": endgame.solved_states()} if endgame is not None else {}))


def _build_endgame_set(game, games: int, seed: int, progress: bool) -> DecisionSet:
    """The endgame positions of a game whose whole has no oracle (a Yamb card): the heuristic bot
    plays each game to the endgame oracle's ``k`` open boxes, the oracle plays the rest, and
    every position from there is recorded with the oracle's exact action values."""
    oracle = endgame_oracle(game)
    encs, qs, kinds, gidx = [], [], [], []
    bar = _bar(progress, games, f"decision set {game.label} (endgame, {oracle.k} open boxes)")
    for start in range(0, int(games), CHUNK):
        n = min(CHUNK, int(games) - start)
        batch = game.new_batch(n, seed=int(seed), first_game=start)
        for late, q in oracle.play(batch):
            encs.append(_take_encoded(game.encode(batch), late))
            qs.append(q)
            kinds.append(kinds_of(game.rolls_left(batch)[late]))
            gidx.append((start + late).astype(np.int32))
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    return _assemble(game, games, seed, encs, qs, kinds, gidx, label=f"{game.name} {game.label}, endgame {oracle.k}",
                     endgame=oracle)


def _bar(progress: bool, games: int, desc: str):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=int(games), desc=desc, unit="games")


# ----------------------------------------------------------------------------- cache
def cache_path(game, games: int, seed: int, directory: str | Path | None = None) -> Path:
    """Where the decision set of ``game`` (``games`` games of dice seed ``seed``) is cached."""
    from yamblab.oracle.yahtzee.table import cache_dir

    return Path(directory or cache_dir()) / f"decision-set-{set_digest(game)}-v{SET_VERSION}-{int(games)}g-s{int(seed)}.npz"


def save(dset: DecisionSet, path: str | Path) -> Path:
    """Write ``dset`` atomically (compressed ``.npz``) with its checksum."""
    meta = {"version": SET_VERSION, "label": dset.label, "digest": dset.digest, "games": int(dset.games),
            "seed": int(dset.seed), "checksum": dset.checksum}
    buf = io.BytesIO()
    np.savez_compressed(buf, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **dset.arrays())
    return atomic_write(path, buf.getvalue())


def load(path: str | Path) -> DecisionSet:
    """Read a set written by :func:`save` and verify it.

    Raises:
        DamagedFileError (a :class:`~yamblab.errors.YamblabError`): the file is unreadable, of
            another set version, or fails its checksum; the message names the file and says to
            delete it.
        FileNotFoundError: no such file.
    """
    path = Path(path)
    hint = "delete it to rebuild the set"
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("version") != SET_VERSION:
                raise DamagedFileError(f"decision set cache {path} has version {meta.get('version')}, expected "
                                       f"{SET_VERSION}; {hint}")
            arrays = {k: np.array(z[k]) for k in z.files if k != "meta"}
        enc = EncodedBatch(**{k: arrays[f"enc_{k}"] for k in _ENC_FIELDS})
        dset = DecisionSet(label=meta["label"], digest=meta["digest"], games=int(meta["games"]),
                           seed=int(meta["seed"]), encoded=enc, q=arrays["q"], value=arrays["value"],
                           kind=arrays["kind"], game_index=arrays["game_index"],
                           endgame_states=(arrays["endgame_keys"], arrays["endgame_values"]))
    except (FileNotFoundError, DamagedFileError):
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        raise DamagedFileError(f"decision set cache {path} is unreadable ({exc.__class__.__name__}: {exc}); "
                               f"{hint}") from None
    if dset.checksum != meta.get("checksum"):
        raise DamagedFileError(f"decision set cache {path} fails its checksum; {hint}")
    return dset


def decision_set(game, games: int = 600, seed: int = DECISION_SEED, cache: bool | str | Path = True,
                 progress: bool = False) -> DecisionSet:
    """Build (or load from the cache) the positions visited by the oracle's own optimal play on
    ``games`` games of dice seed ``seed``, with the oracle's value of every legal action.

    The oracle is Yahtzee's table (:meth:`~yamblab.oracle.yahtzee.table.OracleTable.get` of the game's
    rules) or a single Yamb column's (:func:`~yamblab.oracle.yamb.oracles.column_oracle`), played
    by its full-turn search (optimal play; ties go to the first action of the shared space). At
    every step each unfinished game's position is recorded with the search's Q, which is the
    same value the regret grading uses (:class:`~yamblab.oracle.yahtzee.grading.Grader`,
    :func:`~yamblab.oracle.yamb.grading.column_regrets`). About 37 positions per Yahtzee game
    (about 22,000 for 600 games); a Yamb column's decision kinds are mapped by rolls left
    (two or more: ``first_keep``; a turn with more rolls puts all its early keeps there).

    Args:
        game: a :class:`~yamblab.games.protocol.Game` (``make_game``).
        games: number of games (game numbers 0 .. games-1 of dice seed ``seed``).
        seed: the dice seed.
        cache: True: load from / save to :func:`yamblab.oracle.yahtzee.table.cache_dir`; a folder (str
            or Path): use that folder; False: build, neither reading nor writing a set file (the
            oracle table keeps its own cache).
        progress: a progress bar over games while building.

    Returns:
        :class:`DecisionSet`.

    Raises:
        ValueError: ``games`` < 1.
        ConfigError: a game with neither an exact oracle nor an endgame oracle.
        DamagedFileError (a :class:`~yamblab.errors.YamblabError`): a cache file that is
            unreadable or fails its checksum (never rebuilt over: delete it).
    """
    if int(games) < 1:
        raise ValueError(f"number of games must be at least 1, got {games}")
    if not has_endgame(game):
        check_solved(game)
    if cache is False:
        return build_decision_set(game, games, seed, progress)
    path = cache_path(game, games, seed, None if cache is True else cache)
    if path.exists():
        dset = load(path)
        if dset.digest != set_digest(game) or dset.games != int(games) or dset.seed != int(seed):
            raise DamagedFileError(f"decision set cache {path} holds {dset.label} ({dset.games} games, seed "
                                   f"{dset.seed}), not this set; delete it to rebuild the set")
        return dset
    dset = build_decision_set(game, games, seed, progress)
    try:
        save(dset, path)
    except OSError as exc:  # a read-only cache folder must not stop the work
        import logging

        logging.getLogger(__name__).warning("could not cache the decision set at %s: %s", path, exc)
    return dset


# ----------------------------------------------------------------------------- grading
@dataclass
class SolverLosses:
    """A network graded on a :class:`DecisionSet`.

    Attributes:
        metrics: for each kind ``k`` in ``first_keep``, ``second_keep``, ``box``, ``all``:
            ``k.expected_regret`` and ``k.argmax_regret`` (mean points per decision),
            ``k.agreement`` (share 0..1), ``k.cross_entropy`` (mean nats), ``k.value_rmse`` and
            ``k.value_bias`` (points), ``k.positions`` (count; the means are NaN for a kind with
            no position); and per game ``policy_regret``, ``argmax_regret`` (points per game),
            ``decisions_per_game``, and ``seconds``.
        per_game: float64 (games,) each, summed over a game's positions: ``policy_regret``
            (expected regret, points), ``argmax_regret`` (points), ``disagreements`` (count),
            ``cross_entropy`` (nats); and ``value_sq_error``, the mean squared value error over
            the game's positions (points²). ``per_game["policy_regret"].mean()`` equals
            ``metrics["policy_regret"]``.
        seconds: wall time of the forward pass and the grading.
    """

    metrics: dict[str, float]
    per_game: dict[str, np.ndarray]
    seconds: float


def position_losses(prior: np.ndarray, value: np.ndarray, dset: DecisionSet) -> dict[str, np.ndarray]:
    """Per-position losses of a policy and value against the oracle, float64 (N,) each.

    Args:
        prior: float (N, 208) action probabilities (a network's prior: zero on illegal actions).
        value: float (N,) predicted points still to come.
        dset: the set.

    Returns:
        ``expected_regret`` = best − Σ_a prior[a]·q[a] (q taken as 0 on illegal actions),
        ``argmax_regret`` = best − q[argmax prior] (argmax over the legal actions),
        ``agree`` (1.0 when q[argmax prior] ≥ best − 1e-9: any optimal action agrees),
        ``cross_entropy`` = −log max(Σ prior over the actions within 1e-9 of best, 1e-12) nats,
        ``value_error`` = value − best points.
    """
    q, best, legal = dset.q, dset.value, dset.encoded.legal
    p = np.asarray(prior, np.float64)
    q0 = np.where(legal, q, 0.0)
    expected = best - np.einsum("ij,ij->i", p, q0)
    pick = np.argmax(np.where(legal, p, -1.0), axis=1)
    chosen = q[np.arange(len(best)), pick]
    opt = legal & (q >= best[:, None] - TIE)
    mass = np.where(opt, p, 0.0).sum(axis=1)
    return {
        "expected_regret": expected,
        "argmax_regret": best - chosen,
        "agree": (chosen >= best - TIE).astype(np.float64),
        "cross_entropy": -np.log(np.maximum(mass, PROB_FLOOR)),
        "value_error": np.asarray(value, np.float64) - best,
    }


def losses_from_predictions(prior: np.ndarray, value: np.ndarray, dset: DecisionSet,
                            seconds: float = 0.0) -> SolverLosses:
    """:class:`SolverLosses` from predictions already made (see :func:`solver_losses`)."""
    t0 = time.perf_counter()
    pos = position_losses(prior, value, dset)
    metrics: dict[str, float] = {}
    nan = float("nan")
    for code, k in list(enumerate(DECISION_KINDS)) + [(-1, "all")]:
        m = np.ones(len(dset), bool) if code < 0 else dset.kind == code
        cnt = int(m.sum())
        err = pos["value_error"][m]
        metrics[f"{k}.expected_regret"] = float(pos["expected_regret"][m].mean()) if cnt else nan
        metrics[f"{k}.argmax_regret"] = float(pos["argmax_regret"][m].mean()) if cnt else nan
        metrics[f"{k}.agreement"] = float(pos["agree"][m].mean()) if cnt else nan
        metrics[f"{k}.cross_entropy"] = float(pos["cross_entropy"][m].mean()) if cnt else nan
        metrics[f"{k}.value_rmse"] = float(np.sqrt(np.mean(err ** 2))) if cnt else nan
        metrics[f"{k}.value_bias"] = float(err.mean()) if cnt else nan
        metrics[f"{k}.positions"] = float(cnt)
    G = int(dset.games)
    gi = dset.game_index.astype(np.int64)

    def by_game(x: np.ndarray) -> np.ndarray:
        return np.bincount(gi, weights=x, minlength=G).astype(np.float64)

    count = by_game(np.ones(len(dset)))
    per_game = {
        "policy_regret": by_game(pos["expected_regret"]),
        "argmax_regret": by_game(pos["argmax_regret"]),
        "disagreements": by_game(1.0 - pos["agree"]),
        "cross_entropy": by_game(pos["cross_entropy"]),
        "value_sq_error": by_game(pos["value_error"] ** 2) / np.maximum(count, 1.0),
    }
    metrics["policy_regret"] = float(pos["expected_regret"].sum() / G)
    metrics["argmax_regret"] = float(pos["argmax_regret"].sum() / G)
    metrics["decisions_per_game"] = len(dset) / G
    seconds = seconds + time.perf_counter() - t0
    metrics["seconds"] = seconds
    return SolverLosses(metrics=metrics, per_game=per_game, seconds=seconds)


def solver_losses(net, dset: DecisionSet, chunk: int = 8192) -> SolverLosses:
    """Grade a network's policy and value heads on every position of ``dset`` (one batched
    forward pass; no game is played).

    Per position, with ``best = dset.value`` (the oracle's value; regret as in "The Best Values
    Aren't the Averages"): expected regret ``best − Σ_a prior[a]·q[a]`` (points; q taken as 0
    where illegal, where the prior is 0); argmax regret ``best − q[argmax prior]`` (points;
    argmax over the legal actions); agreement, 1 when ``q[argmax prior] ≥ best − 1e-9`` (any
    optimal action agrees); cross-entropy against the optimal action(s)
    ``−log max(Σ prior over the actions within 1e-9 of best, 1e-12)`` (nats); value error
    ``value − best`` (points). See :class:`SolverLosses` for the keys.

    Args:
        net: anything with ``predict(enc, chunk) -> (prior float (N, 208), value float (N,))``,
            e.g. a :class:`~yamblab.model.network.YambNet`.
        dset: the set.
        chunk: positions per forward pass.

    Returns:
        :class:`SolverLosses`.
    """
    t0 = time.perf_counter()
    prior, value = net.predict(dset.encoded, chunk)
    return losses_from_predictions(prior, value, dset, time.perf_counter() - t0)
