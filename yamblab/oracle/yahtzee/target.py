"""The target-score objective (timpalpant/yahtzee): play to maximise P(final score ≥ T), for any T.

For every boundary state the table holds the tail distribution of the points still to come,
``P(at least s more points)`` for ``s = 0 .. max_points``, each entry under the play that
maximises that very probability; timpalpant/yahtzee builds the same table (1,500 float32 entries per
state, 1.8 GB) with three vector operations: shift by the points just scored, a
probability-weighted add over rolls, an element-wise max over choices. The Cython kernel
(:mod:`yamblab.oracle.yahtzee._target`) documents the layout. ``P(final ≥ T)`` from a position with
``k`` points on the card is entry ``T - k`` of its state.

Its size, build time and P(final ≥ 300) against simulated play: docs/serving.md
(``benchmarks/target_score.py``).

The table is cached like the expected-value table (:mod:`yamblab.oracle.yahtzee.table`): one file per
(variant, max_points) in ``$YAMBLAB_CACHE_DIR``, written atomically with a SHA-256 checksum; a
damaged or foreign file is reported and rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from yamblab.atomic import atomic_write
from yamblab.errors import DamagedFileError, UnreachablePositionError
from yamblab.games.dice import KEEP_OFFSET, hold_to_keep, keep_faces, roll_index, validate_dice
from yamblab.games.yahtzee.rules import BOX_LABELS, BoundaryState, YahtzeeRules
from yamblab.oracle.yahtzee.table import cache_dir

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
DEFAULT_MAX_POINTS = 300

__all__ = ["TargetTable", "TargetAdvice", "DEFAULT_MAX_POINTS"]


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class TargetAdvice:
    """One legal action and the probability of reaching the target after it.

    Attributes:
        kind: ``"keep"`` or ``"box"``; label: e.g. ``"keep 5 5"``, ``"score Chance"``.
        probability: P(final ≥ target) after this action under target-maximising play.
        loss: probability given away against the best action (0 for the best).
        hold_mask, box, keep: as in :class:`yamblab.oracle.yahtzee.advice.Advice`.
    """

    kind: str
    label: str
    probability: float
    loss: float
    hold_mask: int | None = None
    box: int | None = None
    keep: int | None = None


@dataclass(frozen=True)
class TargetTable:
    """Tail distributions of the points still to come, for one rule variant.

    Attributes:
        rules: the variant.
        max_points: the largest number of points still needed that the table answers.
        data: float32 (size,) the vectors, in the kernel's layout.
        off: int64 (12288,) start of each (mask12, ystate) group in ``data``.
        width: int32 (12288,) entries per vector of each group.
        build_seconds: wall time of the backward pass (0 when loaded from the cache).
    """

    rules: YahtzeeRules
    max_points: int
    data: np.ndarray
    off: np.ndarray
    width: np.ndarray
    build_seconds: float = 0.0

    def _args(self):
        r = self.rules
        return self.data, self.off, self.width, r.joker_code, r.upper_bonus, r.yahtzee_bonus

    @classmethod
    def build(cls, rules: YahtzeeRules, max_points: int = DEFAULT_MAX_POINTS, progress: bool = False,
              n_threads: int = 0) -> "TargetTable":
        """Run the backward pass (minutes; ``progress`` shows a bar over boundary states).

        Raises:
            ValueError: ``max_points`` outside 1..2000.
        """
        import time

        from yamblab.oracle.yahtzee import _target

        if not 1 <= int(max_points) <= 2000:
            raise ValueError(f"max_points={max_points} must be 1..2000")
        bar = cb = None
        if progress:
            from tqdm.auto import tqdm

            masks = np.arange(4096)
            upper_max = sum(((masks >> f) & 1) * 5 * (f + 1) for f in range(6))
            lanes = 3 * int((np.minimum(upper_max, 63) + 1).sum()) if rules.upper_bonus else 4096 * 3
            bar = tqdm(total=lanes - (128 if rules.upper_bonus else 2), desc=f"target table {rules.name}",
                       unit="states")
            cb = bar.update
        t0 = time.perf_counter()
        try:
            data, off, wid = _target.solve(rules.joker_code, rules.upper_bonus, rules.yahtzee_bonus,
                                           int(max_points), n_threads, cb)
        finally:
            if bar is not None:
                bar.close()
        dt = time.perf_counter() - t0
        for a in (data, off, wid):
            a.setflags(write=False)
        return cls(rules, int(max_points), data, off, wid, dt)

    # ------------------------------------------------------------------ cache
    def save(self, path: str | Path) -> Path:
        """Write the table atomically with its checksum."""
        meta = {"format": FORMAT_VERSION, "rules": self.rules.key, "max_points": self.max_points,
                "sha256": _digest(self.data, self.off, self.width)}
        buf = io.BytesIO()
        np.savez(buf, data=self.data, off=self.off, width=self.width,
                 meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        atomic_write(Path(path), buf.getvalue())
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, rules: YahtzeeRules, max_points: int) -> "TargetTable":
        """Read and check a table written by :meth:`save`.

        Raises:
            DamagedFileError: unreadable, truncated, for other rules or another size, or a
                checksum that does not match.
            FileNotFoundError: no such file.
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data, off, wid = z["data"], z["off"], z["width"]     # each read once, no copy
                meta = json.loads(bytes(z["meta"]).decode())
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            raise DamagedFileError(f"target cache {path} is unreadable ({exc.__class__.__name__}: {exc})") from None
        if meta.get("format") != FORMAT_VERSION or meta.get("rules") != rules.key \
                or meta.get("max_points") != int(max_points):
            raise DamagedFileError(f"target cache {path} was built for {meta.get('rules')} up to "
                                   f"{meta.get('max_points')} points, not {rules.key} up to {max_points}")
        if data.dtype != np.float32 or off.shape != (12288,) or wid.shape != (12288,):
            raise DamagedFileError(f"target cache {path} holds arrays of the wrong type or shape")
        if _digest(data, off, wid) != meta.get("sha256"):
            raise DamagedFileError(f"target cache {path} fails its checksum")
        for a in (data, off, wid):
            a.setflags(write=False)
        return cls(rules, int(max_points), data, off.astype(np.int64), wid.astype(np.int32))

    @classmethod
    def cache_path(cls, rules: YahtzeeRules, max_points: int = DEFAULT_MAX_POINTS, directory=None) -> Path:
        """Where the table of ``rules`` up to ``max_points`` is cached."""
        return Path(directory or cache_dir()) / f"yahtzee-target-{rules.digest}-{int(max_points)}.npz"

    @classmethod
    def get(cls, rules: YahtzeeRules, max_points: int = DEFAULT_MAX_POINTS, directory=None,
            progress: bool = False, rebuild: bool = False) -> "TargetTable":
        """Load the cached table, or build and cache it (a damaged file is reported and rebuilt)."""
        path = cls.cache_path(rules, max_points, directory)
        if not rebuild and path.exists():
            try:
                return cls.load(path, rules, max_points)
            except DamagedFileError as exc:
                log.warning("%s; rebuilding it", exc)
        table = cls.build(rules, max_points, progress=progress)
        try:
            table.save(path)
        except OSError as exc:
            log.warning("could not cache the target table at %s: %s", path, exc)
        return table

    # ------------------------------------------------------------------ look-ups
    def _check_need(self, need: int) -> int:
        need = int(need)
        if need > self.max_points:
            raise UnreachablePositionError(
                f"the target needs {need} more points; this table answers up to {self.max_points} "
                "(build it with a larger max_points)")
        return need

    def probability(self, state: BoundaryState, need: int) -> float:
        """P(at least ``need`` more points) from a boundary state under target-maximising play.

        Raises:
            UnreachablePositionError: ``need`` beyond ``max_points``.
        """
        need = self._check_need(need)
        if need <= 0:
            return 1.0
        g = state.mask12() * 3 + state.ystate
        w = int(self.width[g])
        if need >= w:
            return 0.0
        u = state.upper if self.rules.upper_bonus else 0
        return float(self.data[int(self.off[g]) + u * w + need])

    def advise(self, state: BoundaryState, dice, rolls_left: int, need: int) -> list[TargetAdvice]:
        """Every legal action ranked by P(at least ``need`` more points) after it.

        Args:
            state: the card's boundary state (not full); dice: five faces in order;
            rolls_left: 0, 1 or 2; need: the target minus the points on the card.

        Raises:
            InvalidDiceError, UnreachablePositionError: bad dice, a full card, rolls left
                outside 0..2, or ``need`` beyond ``max_points``.
        """
        from yamblab.oracle.yahtzee import _target

        arr = validate_dice(dice)
        if rolls_left not in (0, 1, 2):
            raise UnreachablePositionError(f"rolls left must be 0, 1 or 2, got {rolls_left}")
        if state.is_terminal:
            raise UnreachablePositionError("the scorecard is full: there is nothing left to decide")
        need = self._check_need(need)
        s = np.array([[state.mask12(), state.ystate, state.upper]], dtype=np.int64)
        r = roll_index(arr)
        nd = np.array([need], dtype=np.int64)
        box = _target.box_probabilities(*self._args(), s, np.array([r], dtype=np.int64), nd)[0]
        acts = [("box", f"score {BOX_LABELS[b]}", float(box[b]), None, b, None) for b in range(13) if box[b] >= 0]
        if rolls_left > 0:
            e1, e2, _ = _target.turn_probabilities(*self._args(), s, nd)
            E = (e1 if rolls_left == 2 else e2)[0]
            seen = set()
            for h in range(32):
                k = hold_to_keep(arr, h)
                if k in seen:
                    continue
                seen.add(k)
                faces = keep_faces(k)
                label = ("keep all (reroll nothing)" if k == r + int(KEEP_OFFSET[5])
                         else "reroll all" if not faces else "keep " + " ".join(map(str, faces)))
                acts.append(("keep", label, float(E[k]), h, None, k))
        best = max(a[2] for a in acts)
        out = [TargetAdvice(a[0], a[1], a[2], best - a[2], a[3], a[4], a[5]) for a in acts]
        out.sort(key=lambda a: (-a.probability, a.kind != "box"))
        return out

    def action_probabilities(self, batch, target: int):
        """P(final ≥ target) after every action of every game of an engine batch.

        Returns:
            ``(box float32 (n, 13) with -1 where illegal, hold float32 (n, 32) with -1 where no
            roll is left)``.
        """
        from yamblab.oracle.yahtzee import _target

        states = np.ascontiguousarray(batch.boundary_states())
        need = np.minimum(int(target) - batch.total.astype(np.int64), self.max_points)
        if (int(target) - batch.total.astype(np.int64) > self.max_points).any():
            raise UnreachablePositionError(f"target {target} needs more than {self.max_points} points")
        box = _target.box_probabilities(*self._args(), states, batch.roll_indices(), need)
        e1, e2, _ = _target.turn_probabilities(*self._args(), states, need)
        keeps = batch.hold_keeps().astype(np.int64)
        rl = batch.rolls_left
        E = np.where((rl == 2)[:, None], e1, e2)
        hold = np.take_along_axis(E, keeps, axis=1)
        hold[rl == 0] = -1
        return box, hold


def simulate_target_play(table: TargetTable, target: int, games: int, seed: int = 0, chunk: int = 2000) -> np.ndarray:
    """Final scores of seeded games played to maximise P(final ≥ target): int64 (games,).

    Each decision takes the action with the highest probability in :meth:`TargetTable.action_probabilities`
    (ties to the first box, then the lowest hold mask); the dice are the engine's, game ``i``
    of ``seed``.
    """
    from yamblab.games.yahtzee.engine import new_batch

    out = []
    for start in range(0, int(games), chunk):
        n = min(chunk, int(games) - start)
        b = new_batch(n, table.rules, seed=seed, first_game=start)
        while not b.done.all():
            box, hold = table.action_probabilities(b, target)
            allv = np.concatenate([box, hold], axis=1)
            a = np.argmax(allv, axis=1)
            a[b.done] = 0
            b.step(a)
        out.append(b.total.astype(np.int64))
    return np.concatenate(out)
