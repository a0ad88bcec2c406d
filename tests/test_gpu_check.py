"""benchmarks/gpu_check.py: a quick run writes every section's figures as JSON, without the
cluster and tracking packages; a failing section is recorded and the next one runs; a spent
budget skips sections and still leaves a JSON file."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
SECTIONS = ("learner", "inference", "selfplay", "loop", "checkpoint")
FORBIDDEN = {"ray", "mlflow", "optuna", "sqlalchemy", "fastapi", "matplotlib"}


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "gpu_check.json"
    proc = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), "--quick", "--cpu-threads", "1",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    return json.loads(out.read_text()), proc.stdout, imported


def test_quick_run_has_every_section(quick):
    data, stdout, _ = quick
    assert data["finished"] is True
    assert [s for s in SECTIONS if data["sections"][s]["status"] != "ok"] == []
    assert all(data["sections"][s]["seconds"] > 0 for s in SECTIONS)
    assert 0 < data["wall_seconds"] < 60
    env = data["env"]
    assert env["python"] and env["torch"] == torch.__version__ and env["cpu_count"] >= 1
    assert "git_commit" in env
    assert data["config"]["name"] == "yamb-gpu" and data["config"]["size"] == "seed"
    assert 4_000_000 < data["config"]["parameters"] < 5_000_000
    assert "learner: ok" in stdout and "forbidden modules imported: none" in stdout


def test_no_gpu_is_stated(quick):
    data = quick[0]
    if torch.cuda.is_available():
        assert data["gpu"] is True and data["no_gpu"] is None
        assert data["sections"]["learner"]["results"]["cuda_bf16"]["steps_per_s"] > 0
    else:
        assert data["gpu"] is False and data["no_gpu"].startswith("no GPU")
        assert "cuda_bf16" not in data["sections"]["learner"]["results"]
        assert "cuda_bf16" not in data["sections"]["inference"]["results"]


def test_cpu_half(quick):
    sec = quick[0]["sections"]
    learner = sec["learner"]["results"]
    cpu = learner["cpu_fp32"]
    assert cpu["steps"] >= 1 and cpu["steps_per_s"] > 0
    assert cpu["samples_per_s"] == pytest.approx(cpu["steps_per_s"] * learner["batch_size"])
    assert learner["cpu_bf16"]["measured"] is False and "nothing on a CPU" in learner["cpu_bf16"]["note"]
    inf = sec["inference"]["results"]["cpu_fp32"]
    assert inf["best_leaves_per_s"] > 0 and all(c["finite"] for c in inf["by_chunk"].values())


def test_dedup_ratio(quick):
    sp = quick[0]["sections"]["selfplay"]["results"]
    on, off = sp["on"], sp["off"]
    assert on["positions_per_s"] > 0 and off["positions_per_s"] > 0
    assert sp["same_games"] and on["positions"] == off["positions"] > 0
    assert on["turns_played_mean"] >= 1
    assert off["leaf_positions"] > on["leaf_positions"] > 0
    assert sp["dedup_ratio_positions_per_s"] == pytest.approx(on["positions_per_s"] / off["positions_per_s"])
    assert sp["dedup_ratio_positions_per_s"] > 1


def test_loop_and_projection(quick):
    loop = quick[0]["sections"]["loop"]["results"]
    assert loop["iterations_done"] >= 1
    it = loop["iterations"][0]
    assert it["selfplay_s"] > 0 and it["learner_s"] > 0 and it["positions"] > 0 and it["learner_steps"] >= 1
    pr = loop["projection"]
    assert pr["hours"] > 0 and pr["hours_with_evaluation"] > pr["hours"]
    assert pr["fits_24h"] == (pr["hours"] <= 24) and "1000" in pr["formula"]


def test_checkpoint(quick):
    ck = quick[0]["sections"]["checkpoint"]["results"]
    # weights, EMA weights and AdamW's two moments of a 4.66 M-parameter network, float32
    assert ck["checkpoint"]["bytes"] > 4 * 4_000_000 * 4 and ck["checkpoint"]["save_s"] > 0
    rp = ck["replay"]
    assert rp["positions"] >= 1 and rp["bytes"] > 100 * rp["positions"] and rp["seconds"] > 0


def test_no_forbidden_module(quick):
    data, _, imported = quick
    assert data["forbidden_modules_imported"] == []
    assert "yamblab" in imported and "torch" in imported       # -X importtime was read
    assert imported & FORBIDDEN == set()


def test_failing_section_is_recorded(tmp_path, monkeypatch):
    mod = load_script()

    def boom(self, res):
        res["partial"] = 1
        raise RuntimeError("boom")

    monkeypatch.setattr(mod.Check, "run_inference", boom)
    out = tmp_path / "g.json"
    mod.main(["--quick", "--no-gpu", "--sections", "inference,checkpoint", "--out", str(out)])
    data = json.loads(out.read_text())
    inf = data["sections"]["inference"]
    assert inf["status"] == "error" and inf["error"] == "RuntimeError: boom" and "boom" in inf["traceback"]
    assert inf["results"] == {"partial": 1}
    assert data["sections"]["checkpoint"]["status"] == "ok"
    assert data["sections"]["learner"]["status"] == "skipped: not selected"
    assert data["finished"] is True


def test_spent_budget_skips(tmp_path):
    mod = load_script()
    out = tmp_path / "g.json"
    mod.main(["--quick", "--budget", "0", "--out", str(out)])
    data = json.loads(out.read_text())
    assert {data["sections"][s]["status"] for s in SECTIONS} == {"skipped: time budget"}
    assert data["finished"] is True
