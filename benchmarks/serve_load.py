"""Benchmark: ``yamblab serve`` under a bounded mixed load (prints figures; not a test).

Starts ``yamblab serve`` as its own process on a free port of 127.0.0.1 (or drives a server
already running, ``--url``), builds a pool of real positions and games from the server itself
(greedy and random agents' games on seeded dice, replayed at several points), then lets
``--clients`` clients each send one request at a time (a closed loop: at most that many requests
in flight) for ``--seconds`` seconds, each request drawn at random from four kinds:

* ``advice``: every legal keep and box of a position (``POST /api/yahtzee/advice``);
* ``grade``: a whole recorded game, graded decision by decision (``POST /api/yahtzee/grade``);
* ``replay``: a seeded game with a prefix of its moves, half of them with the advice now
  (``POST /api/yahtzee/replay``);
* ``agent_move``: the oracle's, greedy's or random's move in a position (``POST /api/yahtzee/agent/move``).

It prints requests per second, p50 and p99 latency (milliseconds) per kind and overall, the
errors (any answer but 200, or no answer: there should be none; the exit status is 1 if there
were) and the server's resident memory (``VmRSS`` from ``/proc``, Linux) sampled every
``--sample-every`` seconds: at the start of the load, half-way and at the end, with its largest
value and its change over the second half (flat memory: no growth while the load goes on).

    python benchmarks/serve_load.py                       # 4 clients, 180 s
    python benchmarks/serve_load.py --seconds 30 --clients 8
    python benchmarks/serve_load.py --url http://127.0.0.1:8000/ --pid PID   # a running server

The clients run in this process, on the same machine as the server: on a small machine they
take CPU from it, so the figures are those of the pair.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("advice", "grade", "replay", "agent_move")
AGENTS = ("oracle", "greedy", "random")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, deadline: float, proc: subprocess.Popen | None = None) -> None:
    """Wait until something accepts connections on 127.0.0.1:``port``.

    Raises:
        RuntimeError: the deadline (``time.time()`` seconds) passed, or ``proc`` ended first.
    """
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server ended with status {proc.returncode} before it listened")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after the deadline")


@contextlib.contextmanager
def start_server(args: list[str] = (), timeout: float = 120.0):
    """Run ``yamblab serve`` (this Python's ``yamblab.cli.main``) on a free port; always stopped.

    Args:
        args: further options of ``yamblab serve`` (``--rules``, ``--checkpoint`` …).
        timeout: seconds to wait for its tables to load and its socket to listen.

    Yields:
        ``(url, pid)``: the base URL (``http://127.0.0.1:PORT/``) and the server's process id.

    Raises:
        RuntimeError: the server did not print its URL or listen within ``timeout`` (its
            output is in the message).
    """
    port = free_port()
    cmd = [sys.executable, "-m", "yamblab.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.time() + timeout
        url = None
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "open http://" in line:
                url = line.split("open ")[1].split()[0]
                break
        if url is None:
            raise RuntimeError("yamblab serve did not start:\n" + "".join(lines))
        # the URL is printed just before uvicorn binds; its later output is drained so that a
        # full pipe never blocks it
        threading.Thread(target=lambda: [lines.append(x) for x in proc.stdout], daemon=True).start()
        wait_for_port(port, deadline, proc)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (``VmRSS`` of ``/proc/PID/status``; Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise OSError(f"no VmRSS in /proc/{pid}/status")


def _rolls_left(moves: list[dict]):
    rl = 2
    for m in moves:
        yield rl
        rl = 2 if "box" in m["move"] else rl - 1


def build_pool(client, games: int = 8, points: int = 6, seed: int = 0) -> dict:
    """Positions, recorded games and move lists from the server itself (``client``: an
    ``httpx.Client`` on its base URL): ``games`` greedy and ``games`` random agent games on
    seeded dice, each replayed at ``points`` random points to get the position there.

    Returns:
        ``{"positions": [position dicts], "games": [(seed, game, moves)], "decisions": [[decision dicts]]}``.

    Raises:
        RuntimeError: the server answered a request with anything but 200.
    """
    rng = random.Random(seed)
    out = {"positions": [], "games": [], "decisions": []}

    def post(path, body):
        r = client.post(path, json=body)
        if r.status_code != 200:
            raise RuntimeError(f"{path}: {r.status_code} {r.text[:300]}")
        return r.json()

    for agent in ("greedy", "random"):
        for k in range(games):
            g = post("/api/yahtzee/agent/game", {"agent": agent, "seed": 1000 + k, "game": k})
            moves = [m["move"] for m in g["moves"]]
            out["games"].append((1000 + k, k, moves))
            out["decisions"].append([{"dice": m["dice"], "rolls_left": rl, "move": m["move"]}
                                     for m, rl in zip(g["moves"], _rolls_left(g["moves"]))])
            for n in rng.sample(range(len(moves)), min(points, len(moves))):
                pos = post("/api/yahtzee/replay", {"seed": 1000 + k, "game": k, "moves": moves[:n]})["position"]
                out["positions"].append({"card": pos["card"], "dice": pos["dice"], "rolls_left": pos["rolls_left"],
                                         "yahtzee_bonuses": pos["yahtzee_bonuses"]})
    return out


def request_for(kind: str, pool: dict, rng: random.Random) -> tuple[str, dict]:
    """The path and JSON body of a request of ``kind`` (one of :data:`KINDS`) drawn from ``pool``."""
    if kind == "advice":
        return "/api/yahtzee/advice", rng.choice(pool["positions"])
    if kind == "grade":
        return "/api/yahtzee/grade", {"decisions": rng.choice(pool["decisions"])}
    if kind == "replay":
        seed, game, moves = rng.choice(pool["games"])
        return "/api/yahtzee/replay", {"seed": seed, "game": game, "moves": moves[:rng.randint(0, len(moves) - 1)],
                                       "advice": rng.random() < 0.5}
    if kind == "agent_move":
        return "/api/yahtzee/agent/move", {**rng.choice(pool["positions"]), "agent": rng.choice(AGENTS)}
    raise ValueError(f"unknown kind {kind!r}")


def run_load(url: str, seconds: float, clients: int = 4, pid: int | None = None, sample_every: float = 2.0,
             seed: int = 0, pool_games: int = 8) -> dict:
    """Drive the server at ``url`` with ``clients`` closed-loop clients for ``seconds`` seconds.

    Args:
        url: the server's base URL.
        seconds: how long the load lasts (after the pool is built).
        clients: concurrent clients (threads, one ``httpx.Client`` each; one request in flight each).
        pid: the server's process id, to sample its resident memory; None: not sampled.
        sample_every: seconds between memory samples.
        seed: seeds the pool and each client's choice of requests.
        pool_games: games of each agent in the pool (:func:`build_pool`).

    Returns:
        ``{"seconds", "clients", "requests": {kind: n}, "latency_ms": {kind: array}, "errors":
        [messages], "rss": [(t seconds, MB)]}``; ``latency_ms`` also has ``"all"``.
    """
    import httpx

    with httpx.Client(base_url=url, timeout=60.0) as c:
        pool = build_pool(c, games=pool_games, seed=seed)
    lat: dict[str, list[float]] = {k: [] for k in KINDS}
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    rss: list[tuple[float, float]] = []
    t0 = time.perf_counter()

    def sampler():
        while True:
            rss.append((time.perf_counter() - t0, rss_mb(pid)))
            if stop.wait(sample_every):
                rss.append((time.perf_counter() - t0, rss_mb(pid)))
                return

    def client(i: int):
        rng = random.Random(seed * 1000 + i)
        with httpx.Client(base_url=url, timeout=60.0) as c:
            while not stop.is_set():
                kind = rng.choice(KINDS)
                path, body = request_for(kind, pool, rng)
                t = time.perf_counter()
                try:
                    r = c.post(path, json=body)
                    bad = None if r.status_code == 200 else f"{kind}: {r.status_code} {r.text[:200]}"
                except httpx.HTTPError as exc:
                    bad = f"{kind}: {exc.__class__.__name__}: {exc}"
                dt = (time.perf_counter() - t) * 1000.0
                with lock:
                    lat[kind].append(dt)
                    if bad:
                        errors.append(bad)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    if pid is not None:
        threads.append(threading.Thread(target=sampler, daemon=True))
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    wall = time.perf_counter() - t0
    out = {k: np.array(v) for k, v in lat.items()}
    out["all"] = np.concatenate([out[k] for k in KINDS])
    return {"seconds": wall, "clients": clients, "requests": {k: len(v) for k, v in out.items()},
            "latency_ms": out, "errors": errors, "rss": rss}


def report(res: dict) -> str:
    """The figures of :func:`run_load` as a table, with the memory line and the error count."""
    lines = [f"{'kind':<12}{'requests':>10}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"]
    for k in (*KINDS, "all"):
        a = res["latency_ms"][k]
        p50, p99 = (np.percentile(a, [50, 99]) if len(a) else (float("nan"), float("nan")))
        lines.append(f"{k:<12}{len(a):>10}{len(a) / res['seconds']:>9.1f}{p50:>9.1f}{p99:>9.1f}")
    if res["rss"]:
        t = np.array([s[0] for s in res["rss"]])
        mb = np.array([s[1] for s in res["rss"]])
        mid = int(np.argmin(np.abs(t - t[-1] / 2)))
        lines.append(f"server memory (RSS, MB): start {mb[0]:.1f}, half-way {mb[mid]:.1f}, end {mb[-1]:.1f}; "
                     f"largest {mb.max():.1f}; second half {mb[-1] - mb[mid]:+.1f} MB "
                     f"({len(mb)} samples)")
    lines.append(f"errors: {len(res['errors'])}")
    lines.extend(f"  {e}" for e in res["errors"][:10])
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=180.0, help="how long the load lasts (default 180)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients, one request in flight each")
    ap.add_argument("--url", help="drive a server already running at this URL instead of starting one")
    ap.add_argument("--pid", type=int, help="with --url: the server's process id, to sample its memory")
    ap.add_argument("--sample-every", type=float, default=2.0, help="seconds between memory samples")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from yamblab.training.placement import machine_description

    with contextlib.ExitStack() as stack:
        if args.url:
            url, pid = args.url, args.pid
        else:
            url, pid = stack.enter_context(start_server())
        print(f"yamblab serve at {url}: {args.clients} clients for {args.seconds:g} s, "
              f"on {machine_description()} (clients and server share it)", flush=True)
        res = run_load(url, args.seconds, args.clients, pid, args.sample_every, args.seed)
    print(report(res))
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
