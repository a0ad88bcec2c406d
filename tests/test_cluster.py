"""The scale-out path end to end: sweeps on a two-node Ray cluster, PostgreSQL-backed MLflow and Optuna.

Everything is started here (infra/localcluster.py) and stopped at the end, pass or fail:
PostgreSQL from the distribution's package (installed with apt-get when run as root; skipped with
the reason otherwise), ``mlflow server`` on it, an Optuna RDB storage on the same server, and a
Ray cluster of two ``ray start`` nodes with token authentication. ``yamblab sweep`` runs as a
separate process with ``--address``, ``--storage postgresql://…`` and ``--tracking-uri http://…``.

1. Throughput: the same 4-trial sweep on the head alone, then with the second node: trials per
   minute, one node against two.
2. Faults, with two sweeps writing to the same MLflow server and Optuna storage at once: the
   second node is killed while one of its trials is half done (its trials resume on the other
   nodes from their checkpoints; a replacement node joins); the other sweep's driver is killed
   and the command rerun (the study resumes). Afterwards every (arm, seed) has exactly one
   finished Optuna trial and one MLflow child run, and every iteration is logged exactly once.

The figures (wall time, trials per minute, object-store traffic per iteration) are printed and,
with ``YAMBLAB_CLUSTER_REPORT=FILE``, written to FILE as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.cluster, pytest.mark.slow]

FIGURES: dict = {}
SMALL = ("overrides:\n  runtime.worker_cpus: 0.5\n  runtime.learner_cpus: 0.25\n  runtime.eval_cpus: 0.25\n"
         "  runtime.iterations: {it}\n  runtime.eval_every: 1\n  runtime.eval_games: 6\n"
         "  train.games_per_iteration: 4\n")


def _spec(folder: Path, name: str, arms: dict, seeds: list[int], iterations: int) -> Path:
    """A small grid spec on the tiny config, one CPU per trial, two trials at once."""
    arms_yaml = "".join(f"  {a}: {json.dumps(ov)}\n" for a, ov in arms.items())
    p = folder / f"{name}.yaml"
    p.write_text(f"name: {name}\nkind: grid\nbase: {ROOT / 'configs' / 'yahtzee-tiny.yaml'}\n"
                 + SMALL.format(it=iterations) + f"arms:\n{arms_yaml}seeds: {json.dumps(seeds)}\n"
                 "parallel: 2\ntrial_cpus: 1\n")
    return p


@pytest.fixture(scope="module")
def stack():
    """PostgreSQL + MLflow server + the Ray head node (the second node joins in the tests)."""
    sys.path.insert(0, str(ROOT / "infra"))
    from localcluster import Stack, Unavailable, find_postgres

    t0 = time.perf_counter()
    try:
        pg_bin = find_postgres(install=True)
    except Unavailable as exc:
        pytest.skip(f"the cluster test needs PostgreSQL: {exc}")
    root = Path(tempfile.mkdtemp(prefix="yamblab-cluster-"))
    st = Stack(root, pg_bin=pg_bin)
    try:
        st.start_postgres()
        st.start_mlflow()
        st.start_ray_node("head", 1, {"head": 1})
        FIGURES["startup_s"] = round(time.perf_counter() - t0, 1)
        yield st
    finally:
        try:
            st.stop()
        finally:
            left = st.leftovers()
            FIGURES["wall_s"] = round(time.perf_counter() - t0, 1)
            print(f"\ncluster test figures: {json.dumps(FIGURES)}")
            if os.environ.get("YAMBLAB_CLUSTER_REPORT"):
                Path(os.environ["YAMBLAB_CLUSTER_REPORT"]).write_text(json.dumps(FIGURES, indent=2))
            import shutil

            shutil.rmtree(root, ignore_errors=True)
        assert not left, f"processes of the cluster test still running: {left}"


def _sweep(st, spec: Path, cwd: Path, log: Path) -> subprocess.Popen:
    """``yamblab sweep SPEC --address … --storage postgresql://… --tracking-uri http://…`` as a
    process of its own (its own process group, so that it can be killed like a crashed driver)."""
    exe = Path(sys.executable).parent / "yamblab"
    cmd = [str(exe), "sweep", str(spec), "--address", st.ray_address, "--storage", st.db_url("optuna"),
           "--tracking-uri", st.tracking_uri]
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(cmd, cwd=cwd, env=st.env, stdout=open(log, "a"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait(p: subprocess.Popen, log: Path, timeout: float = 600) -> str:
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError(f"sweep did not finish in {timeout:.0f} s:\n{log.read_text()[-3000:]}")
    text = log.read_text()
    assert rc == 0, f"sweep failed ({rc}):\n{text[-4000:]}"
    return text


def _client(st):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=st.tracking_uri)


def _children(st, sweep: str) -> list:
    c = _client(st)
    exp = c.get_experiment_by_name("yamblab")
    return c.search_runs([exp.experiment_id], f"tags.`yamblab.sweep` = '{sweep}' and tags.`yamblab.kind` = 'trial'",
                         max_results=1000)


def _study(st, name: str):
    import optuna

    return optuna.load_study(study_name=name, storage=st.db_url("optuna"))


def _trials_per_minute(st, sweep: str) -> float:
    runs = _children(st, sweep)
    start = min(r.info.start_time for r in runs)
    end = max(r.info.end_time for r in runs)
    return len(runs) / ((end - start) / 60000.0)


def _check_sweep(st, name: str, keys: set[tuple[str, int]], iterations: int, log: Path) -> list:
    """Exactly one finished Optuna trial and one finished MLflow child run per (arm, seed), with
    each iteration logged once; the parent run holds the aggregates."""
    import optuna

    study = _study(st, name)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    got = sorted((t.user_attrs["arm"], t.user_attrs["seed"]) for t in done)
    tail = "\n".join(x for x in log.read_text().splitlines() if "WARNING" not in x and "View " not in x)[-3000:]
    assert got == sorted(keys), f"{name}: finished trials {got}, expected one each of {sorted(keys)}:\n{tail}"
    runs = _children(st, name)
    assert sorted((r.data.tags["yamblab.arm"], int(r.data.tags["yamblab.training_seed"])) for r in runs) == sorted(keys)
    c = _client(st)
    for r in runs:
        assert r.info.status == "FINISHED"
        steps = [m.step for m in c.get_metric_history(r.info.run_id, "iteration")]
        assert steps == list(range(1, iterations + 1)), f"{r.data.tags['mlflow.runName']}: iterations logged {steps}"
        games = c.get_metric_history(r.info.run_id, "games_played")
        assert [int(m.value) for m in sorted(games, key=lambda m: m.step)] == [4 * i for i in range(1, iterations + 1)]
        assert "yamblab.evaluation_seed" in r.data.tags
        names = {a.path for a in c.list_artifacts(r.info.run_id)}
        assert "learning_curve.png" in names and "checkpoint.pt" not in names
    parent = c.get_run(study.user_attrs["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert {"results.txt", "results.json", "regret_by_arm.png", "results_table.json"} <= {
        a.path for a in c.list_artifacts(parent.info.run_id)}
    for arm in {k[0] for k in keys}:
        m = parent.data.metrics
        assert m[f"{arm}.ci_low"] <= m[f"{arm}.regret"] <= m[f"{arm}.ci_high"]
    return runs


def test_throughput_one_node_then_two(stack, tmp_path):
    """The same two trials on the head alone, then on two nodes: trials per minute, and the
    trials really land on both nodes."""
    arms = {"baseline": {}, "no-kl": {"train.kl_targets": False}}
    t0 = time.perf_counter()
    one = _spec(tmp_path, "tput-one", arms, [0], 1)
    _wait(_sweep(stack, one, tmp_path / "one", tmp_path / "one.log"), tmp_path / "one.log")
    FIGURES["sweep_one_node_s"] = round(time.perf_counter() - t0, 1)
    stack.start_ray_node("node2", 1, {"node2": 1})
    t0 = time.perf_counter()
    two = _spec(tmp_path, "tput-two", arms, [0], 1)
    _wait(_sweep(stack, two, tmp_path / "two", tmp_path / "two.log"), tmp_path / "two.log")
    FIGURES["sweep_two_nodes_s"] = round(time.perf_counter() - t0, 1)
    keys = {(a, 0) for a in arms}
    _check_sweep(stack, "tput-one", keys, 1, tmp_path / "one.log")
    runs = _check_sweep(stack, "tput-two", keys, 1, tmp_path / "two.log")
    nodes = {r.data.tags["yamblab.node"] for r in runs}
    assert nodes == {n.node_id for n in stack.nodes}, "the trials did not run on both nodes"
    tpm1, tpm2 = _trials_per_minute(stack, "tput-one"), _trials_per_minute(stack, "tput-two")
    FIGURES.update(trials_per_min_one_node=round(tpm1, 2), trials_per_min_two_nodes=round(tpm2, 2),
                   ratio=round(tpm2 / tpm1, 2))
    # object-store traffic per iteration, from the trials' own figures
    loads, mb, created = [], [], []
    for r in runs:
        loads.append(r.data.metrics["traffic.weight_loads"])
        mb.append(r.data.metrics["traffic.weights_mb"])
        if "traffic.store_created_mb" in r.data.metrics:
            created.append(r.data.metrics["traffic.store_created_mb"])
        # each self-play worker loads the weights once per new version, not once per batch of games
        assert 1 <= r.data.metrics["traffic.weight_loads"] <= r.data.metrics["traffic.workers"]
    FIGURES.update(weights_mb_per_version=round(max(mb), 3), weight_loads_per_iteration=max(loads),
                   store_created_mb_per_iteration=round(sum(created) / len(created), 2) if created else None)


def test_node_and_driver_faults_with_two_sweeps_at_once(stack, tmp_path):
    """Sweep F loses the second node in the middle of a trial; sweep G, running at the same time
    on the same MLflow server and Optuna storage, loses its driver and is run again."""
    node2 = next(n for n in stack.nodes if n.name == "node2")
    arms_f = {"baseline": {}, "no-kl": {"train.kl_targets": False}}
    arms_g = {"baseline": {}, "no-entropy": {"train.entropy_coef": 0.0}}
    spec_f = _spec(tmp_path, "fault-node", arms_f, [0], 2)
    spec_g = _spec(tmp_path, "fault-driver", arms_g, [0], 2)
    t0 = time.perf_counter()
    c = _client(stack)
    pf = _sweep(stack, spec_f, tmp_path / "f", tmp_path / "f.log")
    pg = None
    node_killed = driver_killed = False
    deadline = time.time() + 600
    while not (node_killed and driver_killed):
        assert time.time() < deadline, (f"faults not injected in time (node {node_killed}, driver {driver_killed}):\n"
                                        f"{(tmp_path / 'f.log').read_text()[-2000:]}")
        assert pf.poll() is None or node_killed, ("sweep F finished before a trial of it ran on node2:\n"
                                                  + (tmp_path / "f.log").read_text()[-2000:])
        on_node2 = [r for r in _children(stack, "fault-node")
                    if r.info.status == "RUNNING" and r.data.tags.get("yamblab.node") == node2.node_id]
        if pg is None and on_node2:      # F holds both nodes: G starts beside it, on the same stores
            pg = _sweep(stack, spec_g, tmp_path / "g", tmp_path / "g.log")
        if not node_killed and any(c.get_metric_history(r.info.run_id, "iteration") for r in on_node2):
            stack.kill_node(node2)                       # the machine dies, half-way through a trial
            node_killed = True
            FIGURES["node_killed_at_s"] = round(time.perf_counter() - t0, 1)
            stack.start_ray_node("node3", 1, {"node3": 1})   # a replacement joins
        if pg is not None and not driver_killed:
            assert pg.poll() is None, "sweep G finished before its driver could be killed"
            if any(r.info.status == "RUNNING" and c.get_metric_history(r.info.run_id, "iteration")
                   for r in _children(stack, "fault-driver")):
                os.killpg(pg.pid, signal.SIGKILL)        # the driver dies with a trial half done
                pg.wait()
                driver_killed = True
                FIGURES["driver_killed_at_s"] = round(time.perf_counter() - t0, 1)
        time.sleep(1.0)
    pg2 = _sweep(stack, spec_g, tmp_path / "g", tmp_path / "g2.log")   # rerun the same command
    out_f = _wait(pf, tmp_path / "f.log")
    out_g = _wait(pg2, tmp_path / "g2.log")
    FIGURES["fault_phase_s"] = round(time.perf_counter() - t0, 1)
    assert "lost its node" in out_f and "resumed from its checkpoint at iteration" in out_f, out_f[-3000:]
    assert "resuming:" in out_g and "interrupted (carried on from their checkpoints)" in out_g, out_g[-3000:]
    runs_f = _check_sweep(stack, "fault-node", {(a, 0) for a in arms_f}, 2, tmp_path / "f.log")
    _check_sweep(stack, "fault-driver", {(a, 0) for a in arms_g}, 2, tmp_path / "g2.log")
    moved = [r for r in runs_f if int(r.data.tags["yamblab.attempts"]) > 1]
    assert moved and all(node2.node_id[:12] in r.data.tags["yamblab.nodes"] for r in moved)
    assert all(r.data.tags["yamblab.resumed_from_iteration"] in ("1", "2") for r in moved)
    FIGURES["trials_moved_off_the_dead_node"] = len(moved)


def test_missing_postgres_is_named_not_a_mystery(monkeypatch):
    """Without PostgreSQL, and without root to install it, the reason says so (the cluster test
    skips with it)."""
    sys.path.insert(0, str(ROOT / "infra"))
    import localcluster

    monkeypatch.setattr(localcluster.shutil, "which", lambda name: None)
    monkeypatch.setattr(localcluster.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(localcluster.os, "geteuid", lambda: 1000)
    with pytest.raises(localcluster.Unavailable, match="not installed"):
        localcluster.find_postgres(install=False)
    with pytest.raises(localcluster.Unavailable, match="needs root"):
        localcluster.find_postgres(install=True)
    monkeypatch.setattr(localcluster.os, "geteuid", lambda: 0)
    with pytest.raises(localcluster.Unavailable, match="no apt-get"):
        localcluster.find_postgres(install=True)


def test_free_ports_are_never_handed_out_twice(monkeypatch):
    """A Ray node takes eight ports chosen before any is bound; the kernel may give a closed
    ephemeral port again, so free_port remembers what it handed out (CI once saw two equal)."""
    sys.path.insert(0, str(ROOT / "infra"))
    import localcluster

    real_socket = localcluster.socket.socket
    ports = iter([40001, 40001, 40001, 40002, 40001, 40003])

    class Fake:
        def __init__(self, *a, **k):
            self._s = real_socket(*a, **k)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._s.close()

        def bind(self, addr):
            pass

        def getsockname(self):
            return ("127.0.0.1", next(ports))

    monkeypatch.setattr(localcluster, "_HANDED_OUT", set())
    monkeypatch.setattr(localcluster.socket, "socket", Fake)
    assert [localcluster.free_port() for _ in range(3)] == [40001, 40002, 40003]
