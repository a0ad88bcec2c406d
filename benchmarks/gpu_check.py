"""GPU check: configs/yamb-gpu.yaml's speeds on one machine, written as JSON section by section.

Sections (``--sections``, default all, in this order):

* ``learner``: optimiser steps/s and samples/s of the seed-sized network at the config's batch
  size: GPU bf16, GPU fp32, CPU fp32 (bf16 autocast does nothing on a CPU: recorded, not measured).
* ``inference``: leaves/s of ``YambNet.predict_value`` on positions with dice: GPU bf16 and
  fp32 at a few chunk sizes, CPU fp32.
* ``selfplay``: self-play positions/s with one-step search, leaf de-duplication on and off on
  the same games, and their ratio (on the GPU when there is one, else on the CPU); games may
  be cut after their first turns to fit the time box (the JSON says how many turns).
* ``loop``: self-play, replay buffer and learner in one process for ``--loop-seconds`` (capped by
  what the budget leaves), with GPU busy share, peak GPU memory and the projection of the seed
  run (1,000 iterations of 200 games) in hours.
* ``checkpoint``: bytes and seconds of the learner's checkpoint, and of the loop buffer's replay
  segments (``yamblab.actors.replay.save_replay``; ``numpy.save`` stands in without it).

Contract: without a GPU the JSON says so (``no_gpu``) and only the CPU half runs. Every section
is timed, and a section that fails records its error and traceback tail while the next one runs.
The JSON file (``--out``) is rewritten atomically after every section. A section that no longer
fits the wall budget (``--budget``) is skipped as ``skipped: time budget``; one that runs past
the hard limit (``--hard-limit``) is stopped by an alarm. The script imports the standard
library, numpy, torch, yaml and yamblab (games, search, model, learners, actors.replay,
training.config), and records any of ray, mlflow, optuna, sqlalchemy, fastapi, matplotlib
found imported.

    bash benchmarks/gpu_check.sh                    # on the GPU machine: set up and run
    python benchmarks/gpu_check.py [--out gpu_check.json] [--quick] [--sections learner,loop]
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

try:
    from yamblab.actors.replay import ReplayBuffer
    from yamblab.games.encoding import EncodedBatch
    from yamblab.learners.learner import Learner
    from yamblab.learners.samples import SampleBatch
    from yamblab.learners.selfplay import SelfPlay
    from yamblab.model.checkpoint import load_checkpoint, save_checkpoint
    from yamblab.model.config import ModelConfig
    from yamblab.model.network import YambNet
    from yamblab.search.yamb_search import YambOneStepSearch
    from yamblab.training.config import load_run_config
    IMPORT_ERROR = None
except Exception:  # noqa: BLE001 - recorded in the JSON by main()
    IMPORT_ERROR = traceback.format_exc()

#: what self-play's figures are of
NETWORK_NOTE = ("the seed-sized network as the learner section left it (near its initial weights): its play is "
                "untrained, which changes how often it rerolls, not the leaves a decision values")
SECTIONS = ("learner", "inference", "selfplay", "loop", "checkpoint")
FORBIDDEN = ("ray", "mlflow", "optuna", "sqlalchemy", "fastapi", "matplotlib")
CONFIG = ROOT / "configs" / "yamb-gpu.yaml"
#: the seed run the projection is for (the YoloYamb post's size)
SEED_RUN_ITERATIONS, SEED_RUN_GAMES = 1000, 200


class SectionTimeout(Exception):
    """The hard time limit came during a section."""


def _alarm(signum, frame):
    raise SectionTimeout("stopped by the hard time limit")


def clean(x):
    """``x`` with numpy scalars as Python numbers and non-finite floats as None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` whole: a temporary file beside ``path``, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(clean(data), f, indent=1, allow_nan=False)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def forbidden_imported() -> list[str]:
    return sorted(m for m in FORBIDDEN if m in sys.modules)


_CUT_CLASSES: dict = {}


def cut_batch(batch, limit, deadline: float | None):
    """``batch`` (sharing its engine) whose game ``g`` counts as finished once it has played
    ``limit[g]`` turns; at ``deadline`` (a ``time.perf_counter()`` time) each game's limit
    becomes the end of the turn it is playing. ``batch.limit`` holds the limits."""
    base = type(batch)
    if base not in _CUT_CLASSES:
        class Cut(base):
            @property
            def done(self):
                turn = np.asarray(self.turn, np.int64)
                if self.deadline is not None and time.perf_counter() > self.deadline:
                    self.limit = np.minimum(self.limit, turn + 1)
                    self.deadline = None
                return np.asarray(super().done) | (turn >= self.limit)
        _CUT_CLASSES[base] = Cut
    cut = object.__new__(_CUT_CLASSES[base])
    cut.__dict__.update(batch.__dict__)
    cut.limit = np.broadcast_to(np.asarray(limit, np.int64), (batch.n,)).copy()
    cut.deadline = deadline
    return cut


class _CutGame:
    """``game`` whose new batches stop as :func:`cut_batch` says; ``last`` is the last batch."""

    def __init__(self, game, limit, seconds: float | None):
        self._game = game
        self._limit = limit
        self._seconds = seconds
        self.last = None

    def __getattr__(self, name):
        return getattr(self._game, name)

    def new_batch(self, n: int, seed: int, first_game: int = 0):
        deadline = None if self._seconds is None else time.perf_counter() + self._seconds
        self.last = cut_batch(self._game.new_batch(n, seed=seed, first_game=first_game), self._limit, deadline)
        return self.last


class GpuUtilSampler:
    """Samples the GPU's utilisation (%) every ``period`` seconds in a background thread:
    ``torch.cuda.utilization()`` (NVML), else ``nvidia-smi``; ``method`` says which (None: neither)."""

    def __init__(self, period: float = 0.5):
        self.period = period
        self.samples: list[float] = []
        self.errors: list[str] = []
        self.method = None
        self._stop = threading.Event()
        self._thread = None
        idx = torch.cuda.current_device()
        try:
            torch.cuda.utilization(idx)
            self.method = "torch.cuda.utilization (NVML)"
            self._read = lambda: float(torch.cuda.utilization(idx))
        except Exception as exc:  # noqa: BLE001 - no NVML: try the command-line tool
            self.errors.append(f"torch.cuda.utilization: {exc.__class__.__name__}: {exc}")
            cmd = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", str(idx)]

            def read():
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
                return float(out.stdout.strip().splitlines()[0])
            try:
                read()
                self.method = "nvidia-smi"
                self._read = read
            except Exception as exc2:  # noqa: BLE001
                self.errors.append(f"nvidia-smi: {exc2.__class__.__name__}: {exc2}")

    def start(self) -> None:
        if self.method is None:
            return
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self._read())
            except Exception as exc:  # noqa: BLE001
                if len(self.errors) < 5:
                    self.errors.append(f"{exc.__class__.__name__}: {exc}")
            self._stop.wait(self.period)

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        s = np.asarray(self.samples, np.float64)
        return {"method": self.method, "period_s": self.period, "samples": int(s.size),
                "mean_utilization_pct": float(s.mean()) if s.size else None,
                "busy_share": float(s.mean() / 100.0) if s.size else None,
                "share_of_samples_busy": float((s > 0).mean()) if s.size else None,
                "errors": self.errors}


class Check:
    """The run: options, the report being written, and what sections hand to later ones."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.quick = args.quick
        self.gpu = torch.cuda.is_available() and not args.no_gpu
        self.cfg = load_run_config(CONFIG)
        train = self.cfg.train
        if self.quick:
            train = train.model_copy(update={"batch_size": 64})
        self.train = train
        self.samples_cache = None
        self.learner = None           # the last learner that trained (for the checkpoint)
        self.buffer = None            # the loop's replay buffer
        self.learner_rates = {}       # device/precision -> steps/s
        self.report = {
            "check": "yamblab benchmarks/gpu_check.py", "format": 1, "finished": False,
            "gpu": self.gpu,
            "no_gpu": None if self.gpu else (
                "no GPU: " + ("--no-gpu given" if torch.cuda.is_available() else "torch.cuda.is_available() is False")
                + "; only the CPU half ran"),
            "options": {"quick": self.quick, "budget_s": args.budget, "hard_limit_s": args.hard_limit,
                        "loop_seconds": args.loop_seconds, "sections": args.sections,
                        "cpu_threads": torch.get_num_threads()},
            "env": self.environment(),
            "config": self.config_summary(),
            "sections": {},
            "forbidden_modules_checked": list(FORBIDDEN),
            "forbidden_modules_imported": forbidden_imported(),
        }

    # ------------------------------------------------------------------ bookkeeping
    def elapsed(self) -> float:
        return time.perf_counter() - T_START

    def left(self) -> float:
        return self.args.budget - self.elapsed()

    def log(self, msg: str) -> None:
        print(f"[{self.elapsed():6.1f} s] {msg}", flush=True)

    def save(self) -> None:
        self.report["wall_seconds"] = self.elapsed()
        self.report["forbidden_modules_imported"] = forbidden_imported()
        self.report["env"]["loadavg_now"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        write_json(self.out, self.report)

    def environment(self) -> dict:
        env = {"python": platform.python_version(), "platform": platform.platform(),
               "cpu_count": os.cpu_count(), "cpu": cpu_model(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
               "cuda_available": torch.cuda.is_available(), "torch_threads": torch.get_num_threads(),
               "numpy": np.__version__, "git_commit": git_commit(),
               "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
               "float32_matmul_precision": torch.get_float32_matmul_precision(),
               "dedup_switch": hasattr(YambOneStepSearch, "dedup")}
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            env.update(device=torch.cuda.get_device_name(0), gpu_memory_gib=p.total_memory / 2**30,
                       gpu_capability=f"{p.major}.{p.minor}", gpu_count=torch.cuda.device_count(),
                       bf16_supported=torch.cuda.is_bf16_supported())
        else:
            env["device"] = f"CPU only: {os.cpu_count()} x {cpu_model()}"
        return env

    def config_summary(self) -> dict:
        cfg = self.cfg
        rules = cfg.game_obj.rules
        return {"file": str(CONFIG.relative_to(ROOT)), "name": cfg.name, "game": cfg.game, "preset": cfg.preset,
                "size": cfg.size, "n_dice": rules.n_dice, "n_turns": int(rules.n_turns),
                "parameters": sum(p.numel() for p in YambNet(cfg.model).parameters()),
                "model": cfg.model.model_dump(mode="json"),
                "search": cfg.search.model_dump(mode="json"),
                "train": {k: getattr(cfg.train, k) for k in ("batch_size", "games_per_iteration", "replay_ratio", "lr",
                                                            "kl_targets", "bot", "bot_share", "value_target_mix")},
                "train_bot_taper_iterations": cfg.train.bot_taper_iterations,
                "runtime": {k: getattr(cfg.runtime, k, None) for k in (
                    "iterations", "bf16", "replay_positions", "eval_every", "eval_games", "learner_compile",
                    "learner_gpus", "worker_gpus", "eval_gpus")},
                "batch_size_used": self.train.batch_size}

    def section(self, name: str, fn, need_s: float) -> None:
        """Run section ``name`` (``fn(res)`` fills ``res``) unless unselected or out of budget;
        record its status, wall seconds and any error, then write the JSON."""
        rec = {"status": None, "seconds": 0.0, "results": {}}
        self.report["sections"][name] = rec
        if name not in self.args.sections:
            rec["status"] = "skipped: not selected"
            self.save()
            return
        if self.left() < need_s or self.elapsed() >= self.args.hard_limit:
            rec["status"] = "skipped: time budget"
            rec["note"] = f"{self.left():.0f} s of the {self.args.budget:.0f} s budget left; the section needs ~{need_s:.0f} s"
            self.log(f"{name}: skipped (time budget)")
            self.save()
            return
        self.log(f"{name}: start")
        rec["status"] = "running"
        t0 = time.perf_counter()
        hard = self.args.hard_limit - self.elapsed()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, max(1.0, hard))
        try:
            fn(rec["results"])
            rec["status"] = "ok"
        except Exception as exc:  # noqa: BLE001 - every failure is recorded and the next section runs
            rec["status"] = "timeout" if isinstance(exc, SectionTimeout) else "error"
            rec["error"] = f"{exc.__class__.__name__}: {exc}"
            rec["traceback"] = traceback.format_exc()[-3000:]
            self.log(f"{name}: {rec['status']}: {rec['error']}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            try:
                if self.gpu:
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001
                pass
            rec["seconds"] = time.perf_counter() - t0
            self.save()
        self.log(f"{name}: {rec['status']} in {rec['seconds']:.1f} s")

    # ------------------------------------------------------------------ shared inputs
    def samples(self) -> SampleBatch:
        """Real jamb_nn positions (with their targets) from 8 games of a tiny network's play
        without search: cheap, and the encoding does not depend on the network."""
        if self.samples_cache is None:
            cfg = self.cfg
            tiny = ModelConfig.preset("tiny", value_max=cfg.model.value_max, value_bins=cfg.model.value_bins)
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                sp = SelfPlay(tiny, cfg.train, cfg.search.model_copy(update={"depth": "none"}), cfg.game_obj)
                self.samples_cache, _ = sp.play_games(8, seed=7)
            finally:
                torch.set_num_threads(threads)
        return self.samples_cache

    def weights(self) -> tuple[int, dict]:
        learner = self.learner or Learner(self.cfg.model, self.train, device="cpu")
        return learner.get_weights()

    # ------------------------------------------------------------------ 1: learner
    def run_learner(self, res: dict) -> None:
        s = self.samples()
        bs = self.train.batch_size
        res["batch_size"] = bs
        res["samples_source"] = (f"{len(s)} real positions from 8 games of jamb_nn self-play by a tiny network "
                                 "without search, drawn with replacement")
        runs = []
        if self.gpu:
            runs += [("cuda", True), ("cuda", False)]
        runs.append(("cpu", False))
        res["cpu_bf16"] = {"measured": False,
                           "note": "bf16 autocast does nothing on a CPU by design (yamblab.model.network.autocast): "
                                   "a CPU learner runs fp32"}
        for device, bf16 in runs:
            key = f"{device}_{'bf16' if bf16 else 'fp32'}"
            if device == "cuda":
                warmup, box, per_call = (1, 0.5, 2) if self.quick else (2, 8.0, 8)
            else:       # a shorter box where the GPU half needs the budget
                warmup, box, per_call = (1, 0.5, 1) if self.quick else (1, 10.0 if self.gpu else 20.0, 1)
            try:
                res[key] = self._time_learner(s, device, bf16, warmup, box, per_call)
                self.log(f"learner {key}: {res[key]['steps_per_s']:.2f} steps/s, {res[key]['samples_per_s']:,.0f} samples/s")
            except Exception as exc:  # noqa: BLE001 - the other devices still run
                res[key] = {"error": f"{exc.__class__.__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
                if isinstance(exc, SectionTimeout):
                    raise
        if "cuda_bf16" in res and "cuda_fp32" in res and "steps_per_s" in res["cuda_fp32"] \
                and "steps_per_s" in res["cuda_bf16"]:
            res["gpu_bf16_over_fp32"] = res["cuda_bf16"]["steps_per_s"] / res["cuda_fp32"]["steps_per_s"]

    def _time_learner(self, s: SampleBatch, device: str, bf16: bool, warmup: int, box: float, per_call: int) -> dict:
        cfg, bs = self.cfg, self.train.batch_size
        rng = np.random.default_rng(11)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        learner = Learner(cfg.model, self.train, device=device, bf16=bf16)
        learner.train_iteration(s.take(rng.integers(0, len(s), bs * warmup)), health=False)
        batch = s.take(rng.integers(0, len(s), bs * per_call))
        sync(device)
        steps0, t0 = learner.steps, time.perf_counter()
        while True:
            m = learner.train_iteration(batch, health=False)
            sync(device)
            dt = time.perf_counter() - t0
            if dt >= box:
                break
        steps = learner.steps - steps0
        out = {"device": device, "precision": "bf16 autocast" if bf16 else "fp32", "warmup_steps": warmup,
               "steps": steps, "steps_per_call": per_call, "seconds": dt, "steps_per_s": steps / dt,
               "samples_per_s": steps * bs / dt, "loss_total": m.get("total"),
               "threads": torch.get_num_threads() if device == "cpu" else None}
        if device == "cuda":
            out["peak_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        self.learner = learner
        self.learner_rates[(device, bf16)] = out["steps_per_s"]
        return out

    # ------------------------------------------------------------------ 2: inference
    def run_inference(self, res: dict) -> None:
        s = self.samples()
        with_dice = np.flatnonzero(s.dice[:, 0] != 0)
        res["positions_source"] = (f"{with_dice.size} distinct positions with dice (one-step search's leaves are such "
                                   "positions), repeated to the batch size")
        res["value_heads"] = "float32 under bf16 autocast too (by design)"
        res["timed"] = ("whole predict_value calls: the encoded positions to the device, the forward passes in "
                        "chunks, the values back (what the search pays)")
        cfg = self.cfg

        def encoded(n: int) -> EncodedBatch:
            idx = with_dice[np.arange(n) % with_dice.size]
            return EncodedBatch(**{f.name: getattr(s, f.name)[idx] for f in dataclasses.fields(EncodedBatch)})

        runs = []
        if self.gpu:
            n = 8192 if self.quick else 131072
            chunks = (1024, 4096) if self.quick else (4096, 16384, 65536)
            runs += [("cuda", True, n, chunks), ("cuda", False, n, chunks)]
        runs.append(("cpu", False, 128 if self.quick else 1024, (cfg.search.leaf_chunk,)))
        for device, bf16, n, chunks in runs:
            key = f"{device}_{'bf16' if bf16 else 'fp32'}"
            try:
                torch.manual_seed(0)
                net = YambNet(cfg.model).to(device).eval()
                net.inference_bf16 = bf16
                enc = encoded(n)
                box = (0.3 if self.quick else 2.0) if device == "cuda" else (
                    0.5 if self.quick else (4.0 if self.gpu else 8.0))
                each = {}
                for chunk in chunks:
                    each[str(chunk)] = self._time_inference(net, enc, chunk, box, device)
                best = max(each, key=lambda c: each[c]["leaves_per_s"])
                res[key] = {"device": device, "precision": "bf16 autocast" if bf16 else "fp32", "positions": n,
                            "by_chunk": each, "best_chunk": int(best), "best_leaves_per_s": each[best]["leaves_per_s"],
                            "threads": torch.get_num_threads() if device == "cpu" else None}
                self.log(f"inference {key}: best {each[best]['leaves_per_s']:,.0f} leaves/s (chunk {best})")
                del net
            except Exception as exc:  # noqa: BLE001
                res[key] = {"error": f"{exc.__class__.__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
                if isinstance(exc, SectionTimeout):
                    raise
        res["cpu_bf16"] = {"measured": False, "note": "bf16 autocast does nothing on a CPU by design"}

    @staticmethod
    def _time_inference(net, enc: EncodedBatch, chunk: int, box: float, device: str) -> dict:
        warm = EncodedBatch(**{f.name: getattr(enc, f.name)[:min(len(enc), chunk)] for f in dataclasses.fields(enc)})
        net.predict_value(warm, chunk)
        sync(device)
        n, calls, t0 = 0, 0, time.perf_counter()
        while True:
            v = net.predict_value(enc, chunk)
            n += len(enc)
            calls += 1
            dt = time.perf_counter() - t0
            if dt >= box:
                break
        return {"chunk": chunk, "calls": calls, "leaves": n, "seconds": dt, "leaves_per_s": n / dt,
                "finite": bool(np.isfinite(v).all())}

    # ------------------------------------------------------------------ 3: self-play
    def _selfplay(self, device: str):
        cfg = self.cfg
        sp = SelfPlay(cfg.model, cfg.train, cfg.search, cfg.game_obj, device=device, bf16=cfg.runtime.bf16)
        version, w = self.weights()
        sp.set_weights(w, version)
        return sp

    def _play(self, sp, n: int, seed: int, seconds: float | None = None, limit=None, dedup: bool | None = None,
              first_game: int = 0):
        """``sp.play_games(n, seed)`` with leaf de-duplication set to ``dedup`` (None: as it is),
        each game stopped after ``limit`` turns (an int or one per game; None: whole games) or at
        the end of the turn it plays ``seconds`` after the start.

        Returns:
            ``(samples, figures)``; ``figures["limit"]`` gives the same games again.
        """
        n_turns = int(self.cfg.game_obj.rules.n_turns)
        game = sp.game
        old = YambOneStepSearch.__dict__.get("dedup")
        if dedup is not None:
            if old is None:
                raise RuntimeError("YambOneStepSearch has no dedup switch in this tree")
            YambOneStepSearch.dedup = dedup
        cut = _CutGame(game, n_turns if limit is None else limit, seconds)
        sp.game = cut
        try:
            sync(sp.device)
            t0 = time.perf_counter()
            samples, stats = sp.play_games(n, seed=seed, first_game=first_game)
            sync(sp.device)
            dt = time.perf_counter() - t0
        finally:
            sp.game = game
            if dedup is not None:
                YambOneStepSearch.dedup = old
        b = cut.last
        turns = np.minimum(np.asarray(b.turn, np.int64), b.limit)
        whole = bool((turns >= n_turns).all())
        return samples, {"games": n, "dedup": dedup, "whole_games": whole, "turns_played_mean": float(turns.mean()),
                         "seconds": dt, "positions": int(stats["positions"]),
                         "leaf_positions": int(stats["leaf_positions"]), "positions_per_s": stats["positions"] / dt,
                         "leaves_per_s": stats["leaf_positions"] / dt, "games_per_s": n / dt if whole else None,
                         "score_mean": stats["score_mean"] if whole else None, "limit": b.limit.tolist()}

    def run_selfplay(self, res: dict) -> None:
        device = "cuda" if self.gpu else "cpu"
        n_turns = int(self.cfg.game_obj.rules.n_turns)
        # games, and the seconds the run with de-duplication on may take before its games finish
        # their turn (off replays them: about twice as long); the loop and the checkpoint need
        # about ``after`` seconds of the budget after this section
        if self.quick:
            n, box = (4 if self.gpu else 1), 0.5
        else:
            n, box, after = (32, 20.0, 110.0) if self.gpu else (1, 25.0, 85.0)
            box = max(1.0, min(box, (self.left() - after) / 3.5))
        res.update(device=device, bf16=self.cfg.runtime.bf16 if self.gpu else False, games=n,
                   threads=torch.get_num_threads(), dedup_switch=hasattr(YambOneStepSearch, "dedup"),
                   positions_counted="decisions plus turn-start positions (play_games' samples)",
                   network=NETWORK_NOTE,
                   leaves_counted="positions the network valued (after de-duplication when on)",
                   time_box_s=box)
        sp = self._selfplay(device)
        _, on = self._play(sp, n, seed=202, seconds=box, dedup=True)
        self.log(f"selfplay dedup on: {on['positions_per_s']:.2f} positions/s ({on['turns_played_mean']:.1f} turns)")
        _, off = self._play(sp, n, seed=202, limit=on["limit"], dedup=False)
        self.log(f"selfplay dedup off: {off['positions_per_s']:.2f} positions/s")
        whole = on["whole_games"]
        res.update(on=on, off=off, whole_games=whole, turns_played_mean=on["turns_played_mean"],
                   dedup_ratio_positions_per_s=on["positions_per_s"] / off["positions_per_s"],
                   leaves_off_over_on=off["leaf_positions"] / max(1, on["leaf_positions"]),
                   same_games=on["positions"] == off["positions"],
                   what=(f"{n} game{'s' if n > 1 else ''} of yamb-gpu's self-play (seed-sized network, one-step search) "
                         f"on the {device.upper()}, " + ("whole games" if whole else
                                                         f"their first {on['turns_played_mean']:.3g} of {n_turns} turns "
                                                         f"(stopped at the end of the turn after {box:.0f} s)")
                         + ", de-duplication on, then off on the same dice (bf16 rounding may change "
                           "a move, so the games are the same only where same_games says so)"))
        res["seconds_per_game_turn"] = on["seconds"] / (n * max(on["turns_played_mean"], 1e-9))
        self.log(f"selfplay: de-duplication on/off = {res['dedup_ratio_positions_per_s']:.2f}x positions/s")

    # ------------------------------------------------------------------ 4: loop
    def run_loop(self, res: dict) -> None:
        cfg, train = self.cfg, self.train
        device = "cuda" if self.gpu else "cpu"
        n_turns = int(cfg.game_obj.rules.n_turns)
        reserve = 5.0 if self.quick else 20.0          # for the checkpoint section and the summary
        loop_s = min(self.args.loop_seconds, max(1.0, self.left() - reserve))
        # the config's games on a GPU, 1 game on a CPU; each iteration's self-play stops at the
        # end of the turn its games play after ``sp_box`` seconds, so that at least two
        # iterations (with their learner steps) fit
        games = (8 if self.quick else cfg.train.games_per_iteration) if self.gpu else 1
        sp_box = loop_s / 3.0
        res.update(device=device, bf16=cfg.runtime.bf16 if self.gpu else False,
                   loop_seconds_requested=self.args.loop_seconds, loop_seconds_given=loop_s,
                   loop_seconds_note=None if loop_s >= self.args.loop_seconds else
                   f"scaled down to {loop_s:.0f} s so the whole check stays within its {self.args.budget:.0f} s budget",
                   games_per_iteration=games, selfplay_time_box_s=sp_box,
                   selfplay_cut=f"each iteration's games stop at the end of the turn they play {sp_box:.0f} s into "
                                "self-play (whole games when they finish before)",
                   bot_games=f"none: network games only (the config's bot share {cfg.train.bot_share:g} tapers to 0 "
                             f"over its first {cfg.train.bot_taper_iterations} iterations)",
                   order="sequential in one process: self-play, buffer, learner, weights to self-play (the Ray "
                         "runtime overlaps self-play and learner in separate processes)",
                   health_metrics="on (train_iteration's default, as the runtime calls it)",
                   network="a fresh learner's, published to self-play after every iteration")
        sp = self._selfplay(device)
        learner = Learner(cfg.model, train, device=device, bf16=bool(cfg.runtime.bf16 and self.gpu))
        v, w = learner.get_weights()
        sp.set_weights(w, v)
        buffer = ReplayBuffer(cfg.runtime.replay_positions, seed=3)
        self.buffer = buffer
        iters = []
        res["iterations"] = iters
        sampler = None
        if self.gpu:
            torch.cuda.reset_peak_memory_stats()
            sampler = GpuUtilSampler()
            sampler.start()
        t_loop = time.perf_counter()
        try:
            while True:
                spent = time.perf_counter() - t_loop
                if iters and spent + iters[-1]["seconds"] > loop_s:
                    break
                it = len(iters)
                samples, st = self._play(sp, games, seed=5000 + it, seconds=sp_box, first_game=it * games)
                t1 = time.perf_counter()
                buffer.add({f.name: getattr(samples, f.name) for f in dataclasses.fields(samples)})
                n = train.samples_for(st["positions"])
                batch = SampleBatch(**buffer.sample(n))
                metrics = learner.train_iteration(batch, health=True)
                sync(device)
                self.learner = learner
                t2 = time.perf_counter()
                v, w = learner.get_weights()
                sp.set_weights(w, v)
                t3 = time.perf_counter()
                rec = {"selfplay_s": st["seconds"], "learner_s": t2 - t1, "publish_s": t3 - t2,
                       "seconds": st["seconds"] + (t3 - t1), "positions": st["positions"],
                       "leaf_positions": st["leaf_positions"], "turns_played_mean": st["turns_played_mean"],
                       "whole_games": st["whole_games"],
                       "learner_steps": int(metrics["steps"]) - (iters[-1]["learner_steps_total"] if iters else 0),
                       "learner_steps_total": int(metrics["steps"]), "samples_trained": n,
                       "loss_total": metrics.get("total")}
                iters.append(rec)
                self.save()
                self.log(f"loop iteration {it}: self-play {rec['selfplay_s']:.1f} s ({rec['positions']} positions, "
                         f"{rec['turns_played_mean']:.1f} turns), learner {rec['learner_s']:.1f} s "
                         f"({rec['learner_steps']} steps), publish {rec['publish_s']:.2f} s")
        finally:
            res["wall_s"] = time.perf_counter() - t_loop
            if sampler is not None:
                res["gpu_utilization"] = sampler.stop()
                res["peak_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
                res["peak_memory_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
            self._loop_summary(res, iters, games, n_turns)

    def _loop_summary(self, res: dict, iters: list, games: int, n_turns: int) -> None:
        res["iterations_done"] = len(iters)
        if not iters:
            return
        use = iters[1:] if len(iters) >= 2 else iters
        mean = {k: float(np.mean([r[k] for r in use])) for k in ("selfplay_s", "learner_s", "publish_s", "seconds",
                                                                 "positions", "turns_played_mean")}
        res["per_iteration"] = {**mean, "averaged_over": "iterations after the first" if len(iters) >= 2 else
                                "the only iteration (it includes warm-up)"}
        res["buffer_positions"] = len(self.buffer)
        turns = mean["turns_played_mean"]
        scale = (SEED_RUN_GAMES / games) * (n_turns / turns)
        hours = SEED_RUN_ITERATIONS * mean["seconds"] * scale / 3600.0
        rt = self.cfg.runtime
        sp_per_game = mean["selfplay_s"] * (n_turns / turns) / games
        hours_eval = hours + SEED_RUN_ITERATIONS * sp_per_game * (rt.eval_games / rt.eval_every) / 3600.0
        whole = all(r["whole_games"] for r in use)
        res["projection"] = {
            "run": f"{SEED_RUN_ITERATIONS} iterations of {SEED_RUN_GAMES} games (the YoloYamb post's seed run)",
            "formula": f"hours = {SEED_RUN_ITERATIONS} x seconds_per_iteration x ({SEED_RUN_GAMES} / games_per_iteration)"
                       f" x ({n_turns} / turns_played_per_game) / 3600",
            "seconds_per_iteration": mean["seconds"], "games_per_iteration": games,
            "turns_played_per_game": turns, "whole_games": whole,
            "hours": hours, "fits_24h": hours <= 24.0,
            "hours_with_evaluation": hours_eval,
            "evaluation_formula": f"hours + {SEED_RUN_ITERATIONS} x self-play seconds per whole game x "
                                  f"({rt.eval_games} evaluation games every {rt.eval_every} iterations) / 3600 "
                                  "(evaluation games cost what self-play games cost)",
            "fits_24h_with_evaluation": hours_eval <= 24.0,
            "assumes": "time linear in games per iteration" + ("" if whole else
                                                               f" and in turns (measured over the games' first "
                                                               f"{turns:.3g} turns, whose cards have the most open boxes)"),
        }
        self.log(f"loop: {len(iters)} iterations; projection {hours:.1f} h for the seed run "
                 f"({'fits' if hours <= 24 else 'does not fit'} in 24 h)")

    # ------------------------------------------------------------------ 5: checkpoint
    def run_checkpoint(self, res: dict) -> None:
        learner = self.learner
        if learner is None:
            learner = Learner(self.cfg.model, self.train, device="cuda" if self.gpu else "cpu")
            s = self.samples()
            learner.train_iteration(s.take(np.arange(min(len(s), self.train.batch_size))), health=False)
            res["learner_note"] = "no earlier section trained a learner: one optimiser step made here"
        res["learner_device"] = str(learner.device)
        res["learner_steps"] = learner.steps
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as d:
            t0 = time.perf_counter()
            payload = learner.state_dict()
            t1 = time.perf_counter()
            path = save_checkpoint(Path(d) / "checkpoint.pt", payload)
            t2 = time.perf_counter()
            load_checkpoint(path)
            t3 = time.perf_counter()
            res["checkpoint"] = {"what": "Learner.state_dict(): weights, EMA weights, AdamW state",
                                 "bytes": path.stat().st_size, "mib": path.stat().st_size / 2**20,
                                 "state_dict_s": t1 - t0, "save_s": t2 - t1, "load_s": t3 - t2}
            self.log(f"checkpoint: {path.stat().st_size / 2**20:.1f} MiB, saved in {t2 - t1:.2f} s")
            buffer = self.buffer
            if buffer is None or len(buffer) == 0:
                buffer = ReplayBuffer(self.cfg.runtime.replay_positions)
                s = self.samples()
                buffer.add({f.name: getattr(s, f.name) for f in dataclasses.fields(s)})
                res["buffer_note"] = "no loop buffer: the sample positions stand in"
            n = len(buffer)
            try:
                from yamblab.actors.replay import save_replay
            except ImportError:
                save_replay = None
            t0 = time.perf_counter()
            if save_replay is not None:
                segs = save_replay(Path(d) / "replay", buffer.state_dict(data=False), [], buffer.positions)
                nbytes, how = sum(int(x["bytes"]) for x in segs), f"yamblab.actors.replay.save_replay ({len(segs)} segment(s))"
            else:
                nbytes = 0
                for k, v in buffer.all().items():
                    p = Path(d) / f"{k}.npy"
                    np.save(p, v)
                    nbytes += p.stat().st_size
                how = "numpy.save of the buffer's arrays (stand-in: no segment writer in this tree)"
            dt = time.perf_counter() - t0
            cap = self.cfg.runtime.replay_positions
            res["replay"] = {"how": how, "stand_in": save_replay is None, "positions": n, "bytes": nbytes,
                             "seconds": dt, "mib_per_s": nbytes / 2**20 / dt if dt > 0 else None,
                             "bytes_per_position": nbytes / max(1, n), "full_buffer_positions": cap,
                             "full_buffer_gib_extrapolated": nbytes / max(1, n) * cap / 2**30}
            self.log(f"replay: {n} positions, {nbytes / 2**20:.1f} MiB in {dt:.2f} s ({how})")

    # ------------------------------------------------------------------ summary
    def summary(self) -> list[str]:
        r, S = self.report, self.report["sections"]
        lines = [f"yamblab GPU check ({r['env'].get('device')}; torch {r['env']['torch']}, CUDA {r['env']['torch_cuda']}, "
                 f"Python {r['env']['python']}, {r['env']['cpu_count']} CPUs)"]
        if r["no_gpu"]:
            lines.append(f"  {r['no_gpu']}")
        for name in SECTIONS:
            rec = S.get(name, {})
            status = rec.get("status")
            lines.append(f"  {name}: {status} ({rec.get('seconds', 0.0):.1f} s)"
                         + (f": {rec['error']}" if rec.get("error") else ""))
            res = rec.get("results", {})
            if name == "learner":
                for k in ("cuda_bf16", "cuda_fp32", "cpu_fp32"):
                    if "steps_per_s" in res.get(k, {}):
                        lines.append(f"    {k}: {res[k]['steps_per_s']:.2f} steps/s, {res[k]['samples_per_s']:,.0f} samples/s")
            elif name == "inference":
                for k in ("cuda_bf16", "cuda_fp32", "cpu_fp32"):
                    if "best_leaves_per_s" in res.get(k, {}):
                        lines.append(f"    {k}: {res[k]['best_leaves_per_s']:,.0f} leaves/s (chunk {res[k]['best_chunk']})")
            elif name == "selfplay" and "dedup_ratio_positions_per_s" in res:
                lines.append(f"    {res['what']}")
                lines.append(f"    de-duplication on: {res['on']['positions_per_s']:.2f} positions/s, "
                             f"off: {res['off']['positions_per_s']:.2f}; ratio {res['dedup_ratio_positions_per_s']:.2f}")
            elif name == "loop" and res.get("iterations_done"):
                p = res.get("per_iteration", {})
                lines.append(f"    {res['iterations_done']} iterations of {res['games_per_iteration']} games x "
                             f"{p['turns_played_mean']:.3g} turns: self-play {p['selfplay_s']:.1f} s, "
                             f"learner {p['learner_s']:.1f} s")
                if "gpu_utilization" in res:
                    u = res["gpu_utilization"]
                    lines.append(f"    GPU busy share {u['busy_share']} ({u['method']}); peak memory "
                                 f"{res['peak_memory_allocated_gib']:.2f} GiB allocated, "
                                 f"{res['peak_memory_reserved_gib']:.2f} GiB reserved")
                pr = res.get("projection")
                if pr:
                    lines.append(f"    seed run (1000 x 200 games): {pr['hours']:.1f} h "
                                 f"({'fits' if pr['fits_24h'] else 'does not fit'} in 24 h); "
                                 f"with evaluation {pr['hours_with_evaluation']:.1f} h")
            elif name == "checkpoint" and "checkpoint" in res:
                c, rp = res["checkpoint"], res.get("replay", {})
                lines.append(f"    checkpoint {c['mib']:.1f} MiB in {c['save_s']:.2f} s")
                if rp:
                    lines.append(f"    replay {rp['positions']} positions, {rp['bytes'] / 2**20:.1f} MiB in "
                                 f"{rp['seconds']:.2f} s ({'numpy.save stand-in' if rp['stand_in'] else 'segments'})")
        lines.append(f"  forbidden modules imported: {r['forbidden_modules_imported'] or 'none'}")
        lines.append(f"  wall {self.elapsed():.1f} s; JSON: {self.out}")
        return lines

    def run(self) -> None:
        self.log(f"GPU check: {self.report['env'].get('device')}; JSON to {self.out}")
        if self.report["no_gpu"]:
            self.log(self.report["no_gpu"])
        self.save()
        q = self.quick
        for name, fn, need in (("learner", self.run_learner, 5 if q else 30),
                               ("inference", self.run_inference, 3 if q else 15),
                               ("selfplay", self.run_selfplay, 5 if q else 40),
                               ("loop", self.run_loop, 5 if q else 30),
                               ("checkpoint", self.run_checkpoint, 2 if q else 8)):
            try:
                self.section(name, fn, need)
            except SectionTimeout:      # the alarm came while the section was being recorded
                self.report["sections"][name].update(status="timeout", error="stopped by the hard time limit")
                self.save()
        self.report["finished"] = True
        try:
            self.report["summary"] = self.summary()
        except Exception:  # noqa: BLE001 - the figures are in the JSON already
            self.report["summary"] = ["summary failed:", traceback.format_exc()[-2000:]]
        self.save()
        print("\n".join(self.report["summary"]), flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu_check.json", help="the JSON file (default: gpu_check.json here)")
    p.add_argument("--quick", action="store_true", help="tiny time boxes and batches (the test)")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    p.add_argument("--loop-seconds", type=float, default=180.0, help="the loop's length (capped by the budget)")
    p.add_argument("--budget", type=float, default=None, help="wall budget in seconds (default 270; --quick 50)")
    p.add_argument("--hard-limit", type=float, default=None, help="a section still running then is stopped "
                   "(default: the budget + 20 s)")
    p.add_argument("--cpu-threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--no-gpu", action="store_true", help="the CPU half only, even with a GPU")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        p.error(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    if args.budget is None:
        args.budget = 50.0 if args.quick else 270.0
    if args.hard_limit is None:
        args.hard_limit = args.budget + 20.0
    if args.quick and args.loop_seconds == 180.0:
        args.loop_seconds = 3.0
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    if IMPORT_ERROR is not None:
        write_json(Path(args.out), {"check": "yamblab benchmarks/gpu_check.py", "finished": False,
                                    "import_error": IMPORT_ERROR[-3000:], "python": platform.python_version(),
                                    "torch": torch.__version__, "cuda_available": torch.cuda.is_available()})
        print(IMPORT_ERROR, file=sys.stderr)
        sys.exit(f"gpu_check: yamblab does not import (recorded in {args.out})")
    try:
        check = Check(args)
    except Exception:  # noqa: BLE001 - the run's one chance leaves a record
        write_json(Path(args.out), {"check": "yamblab benchmarks/gpu_check.py", "finished": False,
                                    "start_error": traceback.format_exc()[-3000:]})
        raise
    check.run()


if __name__ == "__main__":
    main()
