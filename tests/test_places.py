"""The places a command reaches for are checked before any work: a Ray cluster that cannot be
joined, a folder or store it cannot write, a port it cannot listen on. Each is one line with
status 2, named within seconds, and nothing is left behind (no run folder, study or MLflow run)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "yahtzee-tiny.yaml")
SWEEP = str(ROOT / "experiments" / "test-sweep.yaml")


def _yamblab(*args, cwd: Path, env: dict | None = None, timeout: float = 60):
    """Run the command; returns (status, output, seconds)."""
    t0 = time.time()
    res = subprocess.run([sys.executable, "-m", "yamblab.cli.main", *args], cwd=cwd, capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=timeout)
    return res.returncode, res.stdout + res.stderr, time.time() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nothing_left(folder: Path) -> None:
    left = sorted(p.name for p in folder.iterdir())
    assert left == [], f"left behind: {left}"


# ------------------------------------------------------------------ clusters
@pytest.mark.parametrize("address,named", [
    ("nowhere.invalid:6379", "no host 'nowhere.invalid'"),
    ("127.0.0.1:{free}", "Connection refused on port"),
    ("no port here", "expected HOST:PORT"),
])
@pytest.mark.parametrize("command", ["train", "sweep"])
def test_a_cluster_that_cannot_be_reached_is_named_at_once(tmp_path, address, named, command):
    address = address.format(free=_free_port())
    args = ["train", "-c", TINY] if command == "train" else ["sweep", SWEEP]
    code, out, took = _yamblab(*args, "--address", address, cwd=tmp_path)
    assert code == 2 and named in out and "Traceback" not in out, out
    assert out.strip().splitlines()[-1].startswith("error: cannot join the Ray cluster at") or "--address" in out
    assert took < 15
    _nothing_left(tmp_path)


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """A Ray head started by hand (``ray start --head --block``, token authentication on, as Ray
    makes it by default) with a token of its own; stopped with its process group."""
    home = tmp_path_factory.mktemp("head-home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("a" * 32)
    port = _free_port()
    env = {**os.environ, "HOME": str(home), "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    for var in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    ray = shutil.which("ray", path=os.path.dirname(sys.executable))
    proc = subprocess.Popen([ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
                             "--include-dashboard=false", f"--temp-dir={tmp_path_factory.mktemp('ray')}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.skip("ray start --head did not come up within 60 s")
    time.sleep(2)
    yield f"127.0.0.1:{port}"
    os.killpg(proc.pid, signal.SIGKILL)      # the head's whole session: its GCS, raylet and workers
    proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("token,mode,named", [
    (None, None, "it wants a token"), ("b" * 32, None, "it refused this machine's token"),
    (None, "token", "RAY_AUTH_MODE is token but this machine has no token")])
def test_a_cluster_that_refuses_the_driver_is_named_within_15_seconds(tmp_path, ray_head, token, mode, named,
                                                                      monkeypatch):
    """Joining a token-authenticated cluster without its token, or with another one: Ray itself
    retried for 20 s, then raised a ConnectionError traceback (with RAY_AUTH_MODE=token and no
    token: an AuthenticationError traceback at once)."""
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    env = {"HOME": str(tmp_path)}
    if token:
        env["RAY_AUTH_TOKEN"] = token
    if mode:
        env["RAY_AUTH_MODE"] = mode
    code, out, took = _yamblab("train", "-c", TINY, "--address", ray_head, cwd=tmp_path, env=env)
    assert code == 2 and named in out and "RAY_AUTH_TOKEN" in out and "Traceback" not in out, out
    assert took < 15, f"{took:.1f} s"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_cluster_of_another_ray_version_is_named():
    from yamblab.actors.cluster import _join_failure

    inner = RuntimeError("Version mismatch: The cluster was started with:\n    Ray: 2.59.0\n    Python: 3.11.7\n"
                         "This process on node 10.0.0.2 was started with:\n    Ray: 2.60.0\n    Python: 3.11.7")
    try:
        raise ConnectionError("Failed to connect") from inner
    except ConnectionError as exc:
        msg = _join_failure("head:6379", exc, sent_token=False)
    assert "another Ray or Python version" in msg and "Ray: 2.59.0" in msg and "\n" not in msg


# ------------------------------------------------------------------ places to write
@pytest.fixture()
def read_only(tmp_path):
    """A folder no write can go into: a read-only tmpfs for root (whom permissions do not stop),
    a folder without write permission for anyone else."""
    where = tmp_path / "ro"
    where.mkdir()
    if os.geteuid() == 0:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here: {res.stderr.strip()}")
        yield where
        subprocess.run(["umount", "-l", str(where)], check=False)
    else:
        where.chmod(0o555)
        yield where
        where.chmod(0o755)


@pytest.mark.parametrize("command", [["train", "-c", TINY], ["sweep", SWEEP]])
def test_a_read_only_working_folder_is_named_at_once(read_only, command):
    """It used to retry for 105 s, then print a 215-line sqlalchemy traceback."""
    code, out, took = _yamblab(*command, cwd=read_only)
    assert code == 2 and "cannot write" in out and "read-only file system" in out or "permission denied" in out, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1 and took < 15, out


def test_places_a_run_cannot_write_are_named(tmp_path, read_only):
    (tmp_path / "afile").write_text("")
    cases = [(["--set", f"runtime.run_dir={tmp_path / 'afile' / 'runs'}"], "afile is a file, not a folder"),
             (["--set", f"runtime.run_dir={read_only / 'runs'}"], f"cannot write run folders at {read_only / 'runs'}"),
             (["--tracking-uri", f"sqlite:///{read_only / 'm.db'}"], "cannot write the MLflow database m.db"),
             (["--tracking-uri", str(read_only / "mlruns")], "cannot write the MLflow store")]
    work = tmp_path / "work"
    work.mkdir()
    for extra, named in cases:
        code, out, _ = _yamblab("train", "-c", TINY, *extra, cwd=work)
        assert code == 2 and named in out and "Traceback" not in out, (extra, out)
    code, out, _ = _yamblab("sweep", SWEEP, "--storage", str(read_only / "j.journal"), cwd=work)
    assert code == 2 and "cannot write the Optuna journal" in out, out
    _nothing_left(work)


def test_a_busy_port_is_named_before_the_tables_load(tmp_path):
    """It printed its address as if it served, then uvicorn's error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        code, out, took = _yamblab("serve", "--port", str(port), cwd=tmp_path)
    assert code == 2 and f"port {port} is already in use" in out and "open http" not in out, out
    assert "loading tables" not in out and "Traceback" not in out


@pytest.mark.ray
def test_cpus_the_cluster_cannot_place_are_named_before_the_run_folder(tmp_path):
    """A role asking for more CPUs than the local cluster has would wait for ever."""
    code, out, _ = _yamblab("train", "-c", TINY, "--set", "runtime.workers=1", "--set", "runtime.worker_cpus=64",
                            cwd=tmp_path, env={"RAY_ADDRESS": ""})
    assert code == 2 and "runtime declares" in out and "the Ray cluster offers" in out and "Traceback" not in out, out
    _nothing_left(tmp_path)
