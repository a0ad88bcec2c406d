"""A real scale-out stack on one machine: PostgreSQL, an MLflow server on it, a two-node Ray cluster.

Used by the cluster test (``tests/test_cluster.py``) and usable by hand to try the cluster path
before renting machines::

    python infra/localcluster.py up        # prints the addresses, keeps them until Ctrl-C

Everything runs from a private folder (a PostgreSQL data directory made with ``initdb``, the
MLflow artifact root, Ray's temp dir) on free, non-default ports, with Ray's token
authentication on (``RAY_AUTH_MODE=token``, a fresh ``RAY_AUTH_TOKEN``); :meth:`Stack.stop`
stops exactly the processes it started, never another Ray cluster or database on the machine.

PostgreSQL comes from the distribution's package (Debian: ``apt-get install postgresql``;
:func:`find_postgres` installs it when run as root with apt-get and ``install=True``). As root
the server runs as the ``postgres`` user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class Unavailable(RuntimeError):
    """A piece of the stack cannot run on this machine (the reason says which and why)."""


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now and that this process has not handed out before.

    The kernel may give the same ephemeral port to two ``bind(0)`` calls once the first socket is
    closed, and a Ray node is started with eight ports chosen before any is used: two of them once
    came out equal and ``ray start`` refused the pair. Remembering every port handed out keeps them
    distinct for the life of the process.
    """
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise Unavailable("no free TCP port on 127.0.0.1 that was not already handed out (1,000 tries)")


def find_postgres(install: bool = False) -> Path:
    """The folder of PostgreSQL's server programs (``initdb``, ``pg_ctl``, ``createdb``).

    Args:
        install: when they are missing, install Debian's ``postgresql`` package (root and
            apt-get only).

    Raises:
        Unavailable: not installed and not installable here (the message says why).
    """
    def look() -> Path | None:
        for cand in [shutil.which("pg_ctl"), *sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)]:
            if cand and Path(cand).exists():
                d = Path(os.path.realpath(cand)).parent
                if (d / "initdb").exists() and (d / "postgres").exists():
                    return d
        return None

    found = look()
    if found or not install:
        if found:
            return found
        raise Unavailable("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    if os.geteuid() != 0:
        raise Unavailable("PostgreSQL is not installed and installing it needs root (apt-get install postgresql)")
    if not shutil.which("apt-get"):
        raise Unavailable("PostgreSQL is not installed and this machine has no apt-get to install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # policy-rc.d 101: the package must not start the system's own cluster on port 5432
    policy = Path("/usr/sbin/policy-rc.d")
    made_policy = not policy.exists()
    if made_policy:
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    try:
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]):
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                raise Unavailable(f"`{' '.join(cmd)}` failed: {(r.stderr or r.stdout).strip()[-400:]}")
    finally:
        if made_policy:
            policy.unlink(missing_ok=True)
    found = look()
    if not found:
        raise Unavailable("apt-get installed postgresql but its server programs were not found")
    return found


def _pids_matching(*needles: str) -> list[int]:
    """Processes whose command line contains every one of ``needles`` (read from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(n in cmd for n in needles):
            out.append(int(d.name))
    return out


def _kill(pids: list[int], pgids: list[int] = (), grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, the given processes and process groups."""
    def send(sig):
        for g in pgids:
            try:
                os.killpg(g, sig)
            except OSError:
                pass
        for p in pids:
            try:
                os.kill(p, sig)
            except OSError:
                pass

    send(signal.SIGTERM)
    end = time.time() + grace
    while time.time() < end and any(Path(f"/proc/{p}").exists() and _alive(p) for p in pids):
        time.sleep(0.2)
    send(signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    except OSError:
        return False


@dataclass
class RayNode:
    """One ``ray start`` node of the stack: its node-manager port identifies its processes."""

    name: str
    node_manager_port: int
    cpus: float
    resources: dict
    node_id: str = ""
    pgid: int | None = None

    def pids(self) -> list[int]:
        """Its raylet, agents and worker processes."""
        p = self.node_manager_port
        return sorted(set(_pids_matching(f"node_manager_port={p}") + _pids_matching(f"node-manager-port={p}")))


@dataclass
class Stack:
    """PostgreSQL + MLflow server + a Ray cluster of several nodes, in ``root`` (see module doc).

    Attributes:
        root: the private folder; pg_port, mlflow_port, ray_port: their ports.
        env: the environment a driver needs to join the cluster (token authentication).
    """

    root: Path
    pg_bin: Path | None = None
    pg_port: int = field(default_factory=free_port)
    mlflow_port: int = field(default_factory=free_port)
    ray_port: int = field(default_factory=free_port)
    env: dict = field(default_factory=dict)
    nodes: list[RayNode] = field(default_factory=list)
    _procs: list = field(default_factory=list)
    _pg_started: bool = False
    log: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.ray_tmp = Path(tempfile.mkdtemp(prefix="ylray-", dir="/tmp"))   # short: Ray's socket paths
        self.pg_dir = Path(tempfile.mkdtemp(prefix="ylpg-", dir="/tmp"))     # the postgres user can reach it
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "1"}
        self.env.pop("RAY_ADDRESS", None)
        self._port_base = 20000 + (secrets.randbelow(120) * 100)   # below the ephemeral ports (32768+)

    # ---------------------------------------------------------------- addresses
    @property
    def db_user(self) -> str:
        return "yamblab"

    def db_url(self, database: str) -> str:
        """``postgresql://`` URL of a database on the stack's server."""
        return f"postgresql://{self.db_user}@127.0.0.1:{self.pg_port}/{database}"

    @property
    def tracking_uri(self) -> str:
        return f"http://127.0.0.1:{self.mlflow_port}"

    @property
    def ray_address(self) -> str:
        return f"127.0.0.1:{self.ray_port}"

    def _run(self, cmd: list[str], timeout: float = 120, user: str | None = None, **kw) -> str:
        if user:
            cmd = ["runuser", "-u", user, "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        if r.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-1500:]}")
        return r.stdout

    # ---------------------------------------------------------------- PostgreSQL
    def start_postgres(self, databases=("mlflow", "optuna")) -> None:
        """A private PostgreSQL server (``initdb`` + ``pg_ctl``) with the given databases."""
        self.pg_bin = self.pg_bin or find_postgres()
        data = self.pg_dir / "data"
        user = None
        if os.geteuid() == 0:          # PostgreSQL refuses root: the package's postgres user runs it
            user = "postgres"
            shutil.chown(self.pg_dir, "postgres")
        self._pg_user = user
        self._run([str(self.pg_bin / "initdb"), "-D", str(data), "-A", "trust", "-U", self.db_user,
                   "--no-sync", "-E", "UTF8"], user=user)
        self._run([str(self.pg_bin / "pg_ctl"), "-D", str(data), "-l", str(self.pg_dir / "postgres.log"), "-w",
                   "-t", "60", "-o", f"-p {self.pg_port} -k {data} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=200", "start"], user=user)
        self._pg_started = True
        for db in databases:
            self._run([str(self.pg_bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.pg_port), "-U",
                       self.db_user, db], user=user)
        self.log.append(f"postgres on {self.pg_port}")

    def stop_postgres(self) -> None:
        if self._pg_started:
            try:
                self._run([str(self.pg_bin / "pg_ctl"), "-D", str(self.pg_dir / "data"), "-m", "immediate",
                           "-w", "stop"], user=self._pg_user, timeout=60)
            except Exception:  # noqa: BLE001 - then by force
                _kill(_pids_matching(str(self.pg_dir / "data")))
            self._pg_started = False

    # ---------------------------------------------------------------- MLflow
    def start_mlflow(self, timeout: float = 120) -> None:
        """``mlflow server`` on the PostgreSQL database ``mlflow``, artifacts served from ``root``."""
        art = self.root / "mlartifacts"
        art.mkdir(exist_ok=True)
        cmd = [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri", self.db_url("mlflow"),
               "--artifacts-destination", str(art), "--serve-artifacts", "--host", "127.0.0.1",
               "--port", str(self.mlflow_port), "--workers", "1"]
        logf = open(self.root / "mlflow.log", "w")
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, env=self.env)
        self._procs.append(p)
        end = time.time() + timeout
        while time.time() < end:
            if p.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(self.root / 'mlflow.log').read_text()[-1500:]}")
            try:
                with urllib.request.urlopen(f"{self.tracking_uri}/health", timeout=2) as r:
                    if r.status == 200:
                        self.log.append(f"mlflow on {self.mlflow_port}")
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("mlflow server did not answer in time")

    # ---------------------------------------------------------------- Ray
    def _ray(self) -> str:
        return str(Path(sys.executable).parent / "ray")

    def start_ray_node(self, name: str, cpus: float, resources: dict | None = None,
                       object_store_mb: int = 256) -> RayNode:
        """``ray start --head`` for the first node, ``ray start --address …`` for the others; each
        with its own CPUs, custom resources and ports."""
        import json

        head = not self.nodes
        k = len(self.nodes)
        base = self._port_base + 100 * k
        node = RayNode(name, free_port(), cpus, dict(resources or {}))
        cmd = [self._ray(), "start", f"--num-cpus={cpus}", f"--resources={json.dumps(node.resources)}",
               f"--object-store-memory={object_store_mb * 2**20}", "--node-ip-address=127.0.0.1",
               f"--node-manager-port={node.node_manager_port}", f"--object-manager-port={free_port()}",
               f"--min-worker-port={base}", f"--max-worker-port={base + 99}",
               f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}",
               "--disable-usage-stats"]
        if head:
            cmd += ["--head", f"--port={self.ray_port}", f"--temp-dir={self.ray_tmp}", "--include-dashboard=false",
                    f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}"]
        else:
            cmd += [f"--address={self.ray_address}"]
        self._run(cmd, timeout=180, env=self.env, start_new_session=True)   # a process group per node
        pids = [p for p in node.pids() if "raylet" in Path(f"/proc/{p}/cmdline").read_text(errors="replace").split("\0")[0]]
        if not pids:
            raise RuntimeError(f"ray node {name}: no raylet found after `ray start`")
        raylet_cmd = Path(f"/proc/{pids[0]}/cmdline").read_text(errors="replace").split("\0")
        node.node_id = next(a.split("=", 1)[1] for a in raylet_cmd if a.startswith("--node_id="))
        node.pgid = os.getpgid(pids[0])
        self.nodes.append(node)
        self.log.append(f"ray node {name} ({node.node_id[:8]})")
        return node

    def kill_node(self, node: RayNode) -> None:
        """Kill a node at once (SIGKILL to its raylet, agents and workers), as a machine dies."""
        _kill(node.pids(), [node.pgid] if node.pgid else [], grace=0.0)

    def stop_ray(self) -> None:
        """Stop every process of this cluster (found by its private temp dir and its nodes)."""
        pids = set(_pids_matching(str(self.ray_tmp)))
        for n in self.nodes:
            pids.update(n.pids())
        _kill(sorted(pids), [n.pgid for n in self.nodes if n.pgid], grace=3.0)
        self.nodes.clear()

    # ---------------------------------------------------------------- all
    def stop(self) -> None:
        """Stop everything this stack started (Ray, MLflow, PostgreSQL), whatever state it is in."""
        errors = []
        for step in (self.stop_ray, self._stop_procs, self.stop_postgres):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - stop the rest anyway
                errors.append(f"{step.__name__}: {exc}")
        shutil.rmtree(self.ray_tmp, ignore_errors=True)
        shutil.rmtree(self.pg_dir, ignore_errors=True)
        if errors:
            raise RuntimeError("; ".join(errors))

    def _stop_procs(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        self._procs.clear()

    def leftovers(self) -> list[int]:
        """Processes of this stack still alive (empty after :meth:`stop`)."""
        left = (set(_pids_matching(str(self.ray_tmp))) | set(_pids_matching(str(self.root)))
                | set(_pids_matching(str(self.pg_dir))))
        return sorted(p for p in left if _alive(p))


def main() -> None:  # pragma: no cover - by hand
    """``python infra/localcluster.py up``: start the stack and keep it until Ctrl-C."""
    if sys.argv[1:] != ["up"]:
        print(__doc__)
        sys.exit(2)
    root = Path(tempfile.mkdtemp(prefix="yamblab-stack-"))
    st = Stack(root)
    try:
        st.pg_bin = find_postgres(install=True)
        st.start_postgres()
        st.start_mlflow()
        st.start_ray_node("head", 1, {"head": 1})
        st.start_ray_node("node2", 1, {"node2": 1})
        print(f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN={st.env['RAY_AUTH_TOKEN']}\n"
              f"yamblab sweep experiments/cluster-test.yaml --address {st.ray_address} "
              f"--storage {st.db_url('optuna')} --tracking-uri {st.tracking_uri}\n(Ctrl-C stops everything)",
              flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        st.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    main()
