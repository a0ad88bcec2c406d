"""kill -9 at random moments, repeatedly: the driver of ``yamblab train`` (its roles in process,
and as Ray actors) and of ``yamblab sweep`` (its whole process group) is killed at seeded random
moments and the command run again each time, until it finishes; the result must equal an
undisturbed run's.

A kill point is an event seen from outside the driver and a delay after it: the command's start,
the k-th checkpoint written in this attempt, a checkpoint being written (its temporary file is
there), the k-th write to a sweep's Optuna journal, or a sweep trial's plots reaching MLflow (the
trial is finishing). After each kill every process of the driver's tree (a sweep's or a training
run's local Ray cluster and its actors) must be gone, and so must every process the attempt
started wherever it went: each carries the attempt's mark in its environment (Ray's actor
processes sit in process groups of their own, which the kill of the driver's group does not
reach, and are left to init when their raylet dies).

Then, against the undisturbed run: the same table digit for digit (a sweep) and the same metric
at every step (a training run, and every trial of the sweep; timings aside); one MLflow run per
training run and per trial, all finished, and one finished Optuna trial per (arm, seed); no
(metric, step) logged twice; no temporary file left; every checkpoint loads. The kill points
tried and their outcomes are printed, and written as JSON to ``$YAMBLAB_KILL9_REPORT`` when set.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: metrics that measure time (or the machine's speed), not learning: they differ between any two runs
TIMING = re.compile(r"(^|\.)(seconds|minutes|busy_seconds|[a-z_]*_per_s)$|^(time|utilisation|machine)\.")
#: a sweep trial's object-store figures: measured by the attempt that ran the iteration, so an
#: iteration whose driver died before logging it has none (its other metrics come from the
#: trial's checkpoint), and a one-iteration trial may have none of these keys at all
ATTEMPT = re.compile(r"^traffic\.")

TRAIN = ["--set", "runtime.actors=in_process", "--set", "runtime.max_policy_lag=0",
         "--set", "runtime.iterations=6", "--set", "runtime.eval_games=8",
         "--set", "train.games_per_iteration=8"]
#: the same run with its roles as Ray actors (the default) of a local Ray cluster: no policy lag
#: and one self-play worker make the Ray loop repeat itself digit for digit (see its test)
TRAIN_RAY = ["--set", "runtime.actors=ray", "--set", "runtime.workers=1", "--set", "runtime.max_policy_lag=0",
             "--set", "runtime.iterations=6", "--set", "runtime.eval_games=8",
             "--set", "train.games_per_iteration=8"]
SWEEP = f"""name: kill9
kind: grid
base: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}
overrides:
  runtime.actors: in_process
  runtime.max_policy_lag: 0
  runtime.iterations: 1
  runtime.eval_games: 8
  train.games_per_iteration: 8
arms: {{baseline: {{}}, no-kl: {{train.kl_targets: false}}}}
seeds: [0, 1]
parallel: 2
trial_cpus: 1
"""
REPORT: dict = {}
#: the environment variable that marks the processes of an attempt (its value: the attempt's log)
MARK = "YAMBLAB_KILL9_ATTEMPT"


# ------------------------------------------------------------------ processes
def _table() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, state letter), from /proc."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(d.name)] = (int(fields[1]), fields[0])
            except (OSError, IndexError, ValueError):
                pass
    return out


def _tree(root: int) -> set[int]:
    """``root`` and all its descendants now."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in _table().items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        out.add(p)
        todo.extend(kids.get(p, []))
    return out


def _living(pids: set[int]) -> set[int]:
    t = _table()
    return {p for p in pids if p in t and t[p][1] != "Z"}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def _pgid(pid: int) -> int | str:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return "?"


def _marked(mark: str, ray_tmp: str | None = None) -> dict[int, tuple[int, str]]:
    """The live processes that inherited ``MARK=mark`` (every process an attempt started, Ray's
    included, whatever its parent, process group or session now), and those whose command line
    names ``ray_tmp`` (the Ray session folders of the test's attempts: a Ray process that lost
    the mark with its environment): pid -> (process group, command line)."""
    needle = f"\0{MARK}={mark}\0".encode()
    named = ray_tmp.rstrip("/").encode() + b"/" if ray_tmp else None
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle not in b"\0" + (d / "environ").read_bytes() and \
                        (named is None or named not in (d / "cmdline").read_bytes()):
                    continue
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                out[int(d.name)] = (int(fields[2]), _cmdline(int(d.name)))
    return out


# ------------------------------------------------------------------ events
@dataclass
class Point:
    """Kill ``delay`` seconds after the ``k``-th ``event`` of an attempt: ``start`` (the launch),
    ``checkpoint`` (a checkpoint replaced), ``write`` (a checkpoint's temporary file seen: the
    kill lands mid-write), ``journal`` (the Optuna journal grew) or ``plots`` (a trial's
    learning curve reached MLflow: the trial is finishing). A ``start`` point's delay is
    ``share`` of the time the chain's previous attempt took to its first checkpoint (set when
    the attempt starts), so it falls in the start-up of any attempt, the last ones included."""

    event: str
    k: int = 1
    delay: float = 0.0
    share: float = 0.0

    def __str__(self):
        return f"start+{self.delay:.2f}s" if self.event == "start" else f"{self.event}#{self.k}+{self.delay:.2f}s"


@dataclass
class Watch:
    """An attempt's events, read from the folder ``cwd`` (checkpoints in the run folders under
    ``runs/`` or the sweep's trial folders, the Optuna journal, MLflow's artifact folders)."""

    cwd: Path
    seen: dict = field(default_factory=dict)

    def reset(self) -> None:
        self.seen = {"ino": self._inodes(), "size": self._journal(), "plots_now": self._plots(),
                     "old_tmp": self._temps(), "checkpoint": 0, "write": 0, "journal": 0, "plots": 0}

    def _folders(self) -> list[str]:
        out = []
        for top in (self.cwd / "runs", self.cwd / "runs" / "sweeps" / "kill9"):
            try:
                out += [e.path for e in os.scandir(top) if e.is_dir()]
            except OSError:
                pass
        return out

    def _inodes(self) -> dict[str, int]:
        out = {}
        for d in self._folders():
            try:
                out[d] = os.stat(os.path.join(d, "checkpoint.pt")).st_ino
            except OSError:
                pass
        return out

    def _temps(self) -> set[str]:
        """The checkpoints' temporary files there now."""
        out = set()
        for d in self._folders():
            try:
                out |= {os.path.join(d, n) for n in os.listdir(d) if n.startswith(".checkpoint.pt.") and n.endswith(".tmp")}
            except OSError:
                pass
        return out

    def _journal(self) -> int:
        try:
            return os.stat(self.cwd / ".yamblab" / "sweeps" / "kill9.journal").st_size
        except OSError:
            return 0

    def _plots(self) -> int:
        return len(list(self.cwd.glob("mlruns/*/*/artifacts/learning_curve.png")))

    def count(self, event: str) -> int:
        """How many ``event``s this attempt has seen so far (polled)."""
        s = self.seen
        if event == "checkpoint":
            now = self._inodes()
            s["checkpoint"] += sum(1 for p, i in now.items() if s["ino"].get(p) != i)
            s["ino"] = now
        elif event == "write":          # one this attempt is writing (not one a killed writer left)
            s["write"] += bool(self._temps() - s["old_tmp"])
        elif event == "journal":
            size = self._journal()
            s["journal"] += size > s["size"]
            s["size"] = size
        elif event == "plots":
            now = self._plots()
            s["plots"] += max(0, now - s["plots_now"])
            s["plots_now"] = now
        return s.get(event, 0)


# ------------------------------------------------------------------ one attempt
def _attempt(cmd: list[str], cwd: Path, env: dict, log: Path, point: Point | None, watch: Watch,
             timeout: float = 400) -> dict:
    """Run ``cmd`` in a process group of its own; kill the group at ``point`` (None: let it
    finish), then wait for every process of its tree, and every process marked as the
    attempt's (:data:`MARK`), to be gone.

    Returns:
        ``rc`` (None when killed), ``killed``, ``at_s`` (seconds after the launch),
        ``first_checkpoint_s``, ``processes`` (of the tree), ``outside_group`` (the command
        lines of the attempt's processes the kill of the driver's group did not reach: process
        groups of their own) and ``gone_s`` (how long they all took to vanish after the kill).
    """
    mark, ray_tmp = str(log.resolve()), env.get("RAY_TMPDIR")
    env = {**env, MARK: mark}
    watch.reset()
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    fired = 0.0 if point is not None and point.event == "start" else None
    tree: set[int] = set()
    scanned, first_ckpt = -1.0, None
    try:
        while proc.poll() is None:
            now = time.monotonic() - t0
            assert now < timeout, f"{' '.join(cmd[3:5])} took over {timeout:.0f} s:\n{log.read_text()[-3000:]}"
            if first_ckpt is None and watch.count("checkpoint"):
                first_ckpt = now
            if point is not None:
                if fired is None and watch.count(point.event) >= point.k:
                    fired = now
                if fired is not None and now >= fired + point.delay:
                    tree |= _tree(proc.pid)
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
            if now - scanned >= 0.5:
                tree |= _tree(proc.pid)
                scanned = now
            time.sleep(0.002 if point is not None and point.event == "write" and fired is None else 0.05)
    except BaseException:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
    killed = proc.returncode == -signal.SIGKILL
    at = time.monotonic() - t0
    outside = sorted((c.split() or ["?"])[0] for g, c in _marked(mark, ray_tmp).values() if g != proc.pid) \
        if killed else []
    gone = time.monotonic()
    while (_living(tree) or _marked(mark, ray_tmp)) and time.monotonic() - gone < 60:
        time.sleep(0.2)
    left = {p: (_pgid(p), _cmdline(p)) for p in _living(tree)} | _marked(mark, ray_tmp)
    assert not left, f"processes of the {'killed' if killed else 'finished'} driver still running 60 s later: " + \
        "; ".join(f"{p} (process group {g}) {c}" for p, (g, c) in sorted(left.items()))
    return {"rc": None if killed else proc.returncode, "killed": killed, "at_s": round(at, 2),
            "first_checkpoint_s": first_ckpt, "processes": len(tree), "outside_group": outside,
            "gone_s": round(time.monotonic() - gone, 2)}


def _stood(kind: str, folder: Path) -> str:
    """Where the run stood after a kill: the checkpoint's iteration (train), the trials finished
    and the trials' checkpointed iterations (sweep)."""
    from yamblab.model.checkpoint import load_checkpoint

    ckpts = sorted(folder.glob("runs/*/checkpoint.pt") if kind == "train" else
                   folder.glob("runs/sweeps/kill9/*/checkpoint.pt"))
    its = [int(load_checkpoint(p)["iteration"]) for p in ckpts]
    if kind == "train":
        return f"checkpoint at iteration {its[0]}" if its else "no checkpoint"
    journal = folder / ".yamblab" / "sweeps" / "kill9.journal"
    done = 0
    if journal.exists():
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        try:
            study = optuna.load_study(study_name="kill9", storage=JournalStorage(JournalFileBackend(str(journal))))
            done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
        except KeyError:          # killed before the study was made
            pass
    return f"{done} trials finished, trial checkpoints at iterations {its}"


# ------------------------------------------------------------------ the chains
def _env(ray_tmp: str) -> dict:
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    return env


def _cmd(kind: str, folder: Path, train: list[str] = TRAIN) -> list[str]:
    """The command to (re)run in ``folder``: a sweep's is always the same; a training run's is
    the resume command the run printed when it started, else the first one (with ``train``'s
    settings)."""
    yamblab = [sys.executable, "-m", "yamblab.cli.main"]
    if kind == "sweep":
        return [*yamblab, "sweep", str(folder / "kill9.yaml")]
    for log in sorted(folder.glob("attempt-*.log"), reverse=True):
        m = re.search(r"resume with: yamblab train --resume (\S+)", log.read_text())
        if m:
            return [*yamblab, "train", "--resume", m.group(1)]
    return [*yamblab, "train", "-c", str(ROOT / "configs" / "yahtzee-tiny.yaml"), *train]


def _chain(kind: str, folder: Path, points: list[Point], env: dict, startup_s: float = 0.0,
           train: list[str] = TRAIN) -> list[dict]:
    """Run the command in ``folder``, killing it at each of ``points`` in turn, then once more
    to the end; returns the attempts. An attempt that finishes before its kill point ends the
    chain (the points left are returned unused: the attempts killed are the first ones).
    ``startup_s``: the time to a first checkpoint, before an attempt of the chain says it;
    ``train``: a training run's settings."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "sweep":
        (folder / "kill9.yaml").write_text(SWEEP)
    watch = Watch(folder)
    attempts = []
    for i, point in enumerate([*points, None]):
        cmd = _cmd(kind, folder, train)
        log = folder / f"attempt-{i:02d}.log"
        if point is not None and point.event == "start":
            point.delay = point.share * startup_s
        res = _attempt(cmd, folder, env, log, point, watch)
        startup_s = res["first_checkpoint_s"] or startup_s
        text = log.read_text()
        m = re.search(r"\(iteration \d+ of \d+\)", text) or re.search(r"resuming: \d+ finished trials kept", text)
        res.update(attempt=i, point=str(point or "none"), command=" ".join(cmd[3:5]),
                   began=m.group(0) if m else ("nothing (killed first)" if kind == "train" else "a new sweep"))
        attempts.append(res)
        if res["killed"]:
            res["stood"] = _stood(kind, folder)
            continue
        assert res["rc"] == 0, f"{kind} attempt {i} ({res['point']}) failed:\n{text[-4000:]}"
        if point is not None:
            res["point"] = f"{point} (not reached: the run finished first)"
        break
    return attempts


def _chains(kind: str, tmp_path: Path, points: list[Point], env: dict,
            startup_s: float, train: list[str] = TRAIN) -> list[tuple[Path, list[dict]]]:
    """:func:`_chain` in fresh folders until every kill point has killed an attempt (a point
    a chain's run finishes before goes to the next chain, with the points after it)."""
    out, todo = [], list(points)
    while todo:
        assert len(out) < 3, f"{kind}: {len(todo)} kill points left unreached after three fresh runs"
        folder = tmp_path / f"killed-{len(out)}"
        attempts = _chain(kind, folder, todo, env, startup_s, train)
        out.append((folder, attempts))
        todo = todo[sum(a["killed"] for a in attempts):]
    return out


def _points(kind: str, rng: random.Random, n: int) -> list[Point]:
    """``n`` kill points, shuffled: some in an attempt's start-up (imports, Ray, MLflow, the
    resumed state), some mid-write, the rest after the attempt's first checkpoints, journal
    writes and (a sweep) finishing trials."""
    kinds = (("start", "write", "checkpoint", "checkpoint") if kind == "train" else
             ("start", "checkpoint", "journal", "write", "plots", "checkpoint"))
    out = []
    for i in range(n):
        e = kinds[i % len(kinds)]
        if e == "start":
            out.append(Point("start", 0, share=rng.uniform(0.05, 0.6)))
        elif e == "write":
            out.append(Point("write"))
        elif e == "checkpoint":
            out.append(Point("checkpoint", 1 if kind == "train" else rng.randint(1, 3), rng.uniform(0.0, 1.0)))
        elif e == "journal":
            out.append(Point("journal", rng.randint(1, 8), rng.uniform(0.0, 0.2)))
        else:
            out.append(Point("plots", 1, rng.uniform(0.0, 1.5)))
    rng.shuffle(out)
    return out


def _show(kind: str, chains: list[tuple[Path, list[dict]]]) -> None:
    print(f"\n{kind}: kill points tried (rerun: what the next attempt said when it started)")
    for n, (_, attempts) in enumerate(chains):
        for a, nxt in zip(attempts, attempts[1:] + [None]):
            if a["killed"]:
                apart = f", {len(a['outside_group'])} in groups of their own" if a["outside_group"] else ""
                print(f"  {n}.{a['attempt']:<2d} {a['point']:<20} killed at {a['at_s']:5.1f} s ({a['stood']}; "
                      f"{a['processes']} processes{apart}, gone in {a['gone_s']:.1f} s); rerun: {nxt['began']}")
            else:
                print(f"  {n}.{a['attempt']:<2d} {a['point']}: finished in {a['at_s']:.1f} s")


def _record(kind: str, **data) -> None:
    REPORT[kind] = data
    if os.environ.get("YAMBLAB_KILL9_REPORT"):
        Path(os.environ["YAMBLAB_KILL9_REPORT"]).write_text(json.dumps(REPORT, indent=2))


# ------------------------------------------------------------------ checks
def _files_whole(folder: Path) -> None:
    """No temporary file of an atomic write left anywhere, and every checkpoint loads."""
    from yamblab.model.checkpoint import load_checkpoint

    tmp = [str(p.relative_to(folder)) for p in folder.rglob("*.tmp")]
    assert not tmp, f"half-written files left: {tmp}"
    for p in folder.rglob("checkpoint.pt"):
        load_checkpoint(p)


def _metrics(uri: str, run_id: str) -> dict[str, dict[int, float]]:
    """A run's metric histories, key -> {step: value}, each (key, step) logged exactly once."""
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=uri)
    out = {}
    for key in c.get_run(run_id).data.metrics:
        steps = [m.step for m in c.get_metric_history(run_id, key)]
        twice = sorted({s for s in steps if steps.count(s) > 1})
        assert not twice, f"run {run_id}: {key} logged twice at steps {twice}"
        out[key] = {m.step: m.value for m in c.get_metric_history(run_id, key)}
    return out


def _same_metrics(got: dict, ref: dict, what: str) -> None:
    differ = {k for k in set(got) ^ set(ref) if not (ATTEMPT.search(k) and k in ref)}
    assert not differ, f"{what}: metrics {sorted(differ)} differ from the undisturbed run's"
    for key in ref:
        if ATTEMPT.search(key):         # none at all when no attempt that ran an iteration logged it
            assert set(got.get(key, {})) <= set(ref[key]), f"{what}: {key} at steps {sorted(got.get(key, {}))}"
        elif TIMING.search(key):
            assert set(got[key]) == set(ref[key]), f"{what}: {key} at steps {sorted(got[key])} != {sorted(ref[key])}"
        else:
            assert got[key] == ref[key], f"{what}: {key} {got[key]} != undisturbed {ref[key]}"


def _runs(folder: Path):
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    exp = c.get_experiment_by_name("yamblab")
    return [] if exp is None else c.search_runs([exp.experiment_id], max_results=1000)


@pytest.fixture()
def env():
    d = tempfile.mkdtemp(prefix="ylk9-", dir="/tmp")     # Ray's files (short: its socket paths)
    yield _env(d)
    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ the tests
def test_a_writer_killed_mid_write_leaves_no_temporary_file_for_long(tmp_path):
    """The next write of the same file removes what a killed writer left (a dead process's
    temporary file, on this host), never a live writer's."""
    import socket

    from yamblab.atomic import atomic_write

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    left = tmp_path / f".checkpoint.pt.{host}-{dead.pid}.abc123.tmp"
    live = tmp_path / f".checkpoint.pt.{host}-{os.getppid()}.def456.tmp"
    other = tmp_path / f".checkpoint.pt.another-host-{dead.pid}.ghi789.tmp"
    for f in (left, live, other):
        f.write_bytes(b"half a checkpoint")
    atomic_write(tmp_path / "checkpoint.pt", b"whole")
    assert not left.exists() and live.exists() and other.exists()
    assert (tmp_path / "checkpoint.pt").read_bytes() == b"whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["checkpoint.pt", live.name, other.name])


def _killed_train(tmp_path: Path, env: dict, points: list[Point], train: list[str], name: str) -> None:
    """An undisturbed ``yamblab train`` with ``train``'s settings, then the same killed at
    ``points``; the killed runs must end as the undisturbed one (reported as ``name``)."""
    from yamblab.model.checkpoint import load_checkpoint

    t0 = time.monotonic()
    ref = _chain("train", tmp_path / "ref", [], env, train=train)
    t1 = time.monotonic()
    chains = _chains("train", tmp_path, points, env, ref[0]["first_checkpoint_s"], train)
    _show(name, chains)
    _record(name, undisturbed_s=round(t1 - t0, 1), killed_s=round(time.monotonic() - t1, 1),
            chains=[a for _, a in chains])

    ref_runs = _runs(tmp_path / "ref")
    for folder, _ in chains:
        runs = _runs(folder)
        assert len(runs) == 1, f"{len(runs)} MLflow runs for one training run"
        assert runs[0].info.status == "FINISHED"
        _same_metrics(_metrics(f"sqlite:///{folder / 'mlflow.db'}", runs[0].info.run_id),
                      _metrics(f"sqlite:///{tmp_path / 'ref' / 'mlflow.db'}", ref_runs[0].info.run_id), "train")
        _files_whole(folder)
        runs_dirs = list((folder / "runs").iterdir())
        assert len(runs_dirs) == 1, runs_dirs
        hist = json.loads(load_checkpoint(runs_dirs[0] / "checkpoint.pt")["history"])
        assert [h["iteration"] for h in hist] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_train_killed_at_14_moments_ends_as_if_undisturbed(tmp_path, env):
    """``yamblab train`` (in-process roles, 6 iterations) killed at 14 moments."""
    _killed_train(tmp_path, env, _points("train", random.Random(9), 14), TRAIN, "train")


@pytest.mark.slow
@pytest.mark.ray
def test_train_with_ray_actors_killed_at_3_moments_ends_as_if_undisturbed(tmp_path, env):
    """``yamblab train`` with its roles as Ray actors (``runtime.actors: ray``, the default: the
    driver starts a local Ray cluster, each role an actor process of it; 6 iterations) killed at
    3 moments: mid-write, in the start-up (Ray's included) and after a checkpoint.

    ``runtime.max_policy_lag: 0`` and ``runtime.workers: 1`` make the Ray loop repeat itself
    digit for digit (two undisturbed runs log the same metrics, timings aside). No policy lag:
    every batch of games plays with the weights of all the iterations before it and every
    evaluation is waited for at its iteration; with a lag, an evaluation that falls due while the
    evaluator is busy waits for it, so which iterations are graded follows the machine's speed,
    and a resumed run plays the batch that was playing ahead with newer weights than the
    undisturbed run gave it. One worker: the games of an iteration are split into jobs by the
    number of workers, which ``"auto"`` takes from the machine's CPUs (a different split plays
    different games); one worker also makes this the in-process case's run, which logs the
    same games (its learner's figures agree to float rounding only: another torch thread count).

    The driver's process group is what is killed: Ray's worker processes (the actors) sit in
    process groups of their own, out of its reach, and must go by themselves once their raylet
    is dead; they are checked as every process of the attempt is (:func:`_attempt`). An actor
    goes within a few seconds; a worker the raylet was still starting at the kill waits for the
    dead GCS until Ray's ``py_gcs_connect_timeout_s`` (30 s) before it exits."""
    _killed_train(tmp_path, env, _points("train", random.Random(15), 3), TRAIN_RAY, "train-ray")


@pytest.mark.slow
def test_sweep_killed_at_6_moments_ends_as_if_undisturbed(tmp_path, env):
    """``yamblab sweep`` (2 arms x 2 seeds, one iteration each, two one-CPU trials at a time)
    killed at 6 moments."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    t0 = time.monotonic()
    ref = _chain("sweep", tmp_path / "ref", [], env)
    t1 = time.monotonic()
    chains = _chains("sweep", tmp_path, _points("sweep", random.Random(19), 6), env, ref[0]["first_checkpoint_s"])
    _show("sweep", chains)
    _record("sweep", undisturbed_s=round(t1 - t0, 1), killed_s=round(time.monotonic() - t1, 1),
            chains=[a for _, a in chains])

    def table(folder: Path) -> str:
        text = sorted(folder.glob("attempt-*.log"))[-1].read_text()
        start = text.index("\nsweep kill9: oracle regret per game")
        return text[start:text.index("\nwall time")]

    ref_runs = _runs(tmp_path / "ref")
    by_name = {r.data.tags["mlflow.runName"]: r.info.run_id for r in ref_runs}
    for folder, _ in chains:
        assert table(folder) == table(tmp_path / "ref")
        journal = folder / ".yamblab" / "sweeps" / "kill9.journal"
        study = optuna.load_study(study_name="kill9", storage=JournalStorage(JournalFileBackend(str(journal))))
        done = sorted((t.user_attrs["arm"], t.user_attrs["seed"]) for t in study.trials
                      if t.state == optuna.trial.TrialState.COMPLETE)
        assert done == [("baseline", 0), ("baseline", 1), ("no-kl", 0), ("no-kl", 1)]
        runs = _runs(folder)
        trials = [r for r in runs if r.data.tags.get("yamblab.kind") == "trial"]
        keys = sorted((r.data.tags["yamblab.arm"], r.data.tags["yamblab.training_seed"]) for r in trials)
        assert keys == [("baseline", "0"), ("baseline", "1"), ("no-kl", "0"), ("no-kl", "1")], keys
        assert len(runs) == 5 and all(r.info.status == "FINISHED" for r in runs), \
            [(r.data.tags.get("mlflow.runName"), r.info.status) for r in runs]
        for r in trials:
            name = r.data.tags["mlflow.runName"]
            _same_metrics(_metrics(f"sqlite:///{folder / 'mlflow.db'}", r.info.run_id),
                          _metrics(f"sqlite:///{tmp_path / 'ref' / 'mlflow.db'}", by_name[name]), name)
        _files_whole(folder)
