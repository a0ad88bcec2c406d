"""Errors name what the user typed: the ``--set`` option or the config key, with the nearest
valid name; a run config and a sweep spec given in each other's place are told apart by what
they are; the API answers every malformed request with a 400 and one line naming the field, as
docs/serving.md lists them.

The commands run in-process (typer's runner) from the repository root, with the places where
work would start (a sweep, an MLflow tracker, a Ray cluster) replaced by stubs that fail loudly,
as in tests/test_bad_input.py. The API runs on FastAPI's TestClient over a service of the
official rules and the croatian Yamb columns (the tables take about a second).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from yamblab.cli.main import app as cli
from yamblab.errors import ConfigError
from yamblab.training.config import RunConfig
from yamblab.training.configio import dotted_keys, nearest_key

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
TINY = "configs/yahtzee-tiny.yaml"
SPEC = "experiments/ablation-small.yaml"

runner = CliRunner()


# ----------------------------------------------------------------------------- the command line
class WouldStartWork(Exception):
    """Raised by the stubs: the input got past validation and work was about to start."""


def _stub(name):
    def refuse(*args, **kwargs):
        raise WouldStartWork(f"{name} was reached: the input was not refused")
    return refuse


@pytest.fixture()
def yamblab(monkeypatch):
    """``yamblab(*args)``: the command's one stderr line, checked to be a clean refusal (exit
    status 2, one ``error: …`` line, nothing on stdout), run from the repository root."""
    monkeypatch.setattr("yamblab.sweeps.driver.Sweep", _stub("a sweep"))
    monkeypatch.setattr("yamblab.training.tracking.Tracker", _stub("an MLflow tracker"))
    monkeypatch.setattr("yamblab.actors.cluster.init_ray", _stub("a Ray cluster"))
    monkeypatch.chdir(ROOT)

    def run(*args) -> str:
        res = runner.invoke(cli, [str(a) for a in args])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and not res.stdout.strip(), (res.exit_code, res.output)
        assert lines[0].startswith("error: ")
        return lines[0].removeprefix("error: ")

    return run


def test_a_bad_set_key_is_named_as_typed_with_the_nearest_key(yamblab):
    assert yamblab("train", "-c", TINY, "--set", "train.lrr=1") == \
        "--set train.lrr: unknown key (did you mean train.lr?)"
    # the same name in another section, a misspelt section
    assert yamblab("train", "-c", TINY, "--set", "lr=1") == "--set lr: unknown key (did you mean train.lr?)"
    assert yamblab("train", "-c", TINY, "--set", "trian.lr=1") == \
        "--set trian.lr: unknown key (did you mean train.lr?)"
    # a section the option makes anew: what it lacks is the option's to give, not the file's
    assert yamblab("train", "-c", TINY, "--set", "runtime.eval_early.evry=5") == (
        "--set runtime.eval_early.every: Field required; --set runtime.eval_early.until: Field required; "
        "--set runtime.eval_early.evry: unknown key (did you mean runtime.eval_early.every?)")
    # nothing near: no guess
    assert yamblab("train", "-c", TINY, "--set", "train.zz_nonsense=1") == "--set train.zz_nonsense: unknown key"
    # a bad value, and a validator's message about the key, are the option's too
    assert yamblab("train", "-c", TINY, "--set", "train.lr=-1", "--set", "runtime.workerz=2") == \
        "--set train.lr: Input should be greater than 0; " \
        "--set runtime.workerz: unknown key (did you mean runtime.workers?)"
    assert yamblab("train", "-c", TINY, "--set", "size=huge") == \
        "--set size: unknown network size 'huge'; choose one of tiny, small, seed"


def test_an_unknown_key_in_a_config_file_is_the_files_with_the_nearest_key(yamblab, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("name: x\ntrain: {lrr: 1, batch_size: 0}\nruntim: {}\n")
    assert yamblab("train", "-c", cfg) == (
        f"{cfg}: train.batch_size: Input should be greater than or equal to 1; "
        "train.lrr: unknown key (did you mean train.lr?); runtim: unknown key (did you mean runtime?)")
    # a --set option beside the file's own mistakes: each named where it was written
    assert yamblab("train", "-c", cfg, "--set", "train.lr=0").startswith(
        f"--set train.lr: Input should be greater than 0; {cfg}: train.batch_size:")
    cfg.write_text("size: huge\n")
    assert yamblab("train", "-c", cfg) == f"{cfg}: size: unknown network size 'huge'; choose one of tiny, small, seed"


def test_sweep_set_options_are_named_as_typed(yamblab):
    assert yamblab("sweep", SPEC, "--set", "overrides.train.lrr=1") == \
        "--set overrides.train.lrr: unknown key (did you mean overrides.train.lr?)"
    assert yamblab("sweep", SPEC, "--set", "arms.baseline.train.lrr=1") == \
        "--set arms.baseline.train.lrr: unknown key (did you mean arms.baseline.train.lr?)"
    assert yamblab("sweep", SPEC, "--set", "overrides.train.lr=-1") == \
        "--set overrides.train.lr: Input should be greater than 0"
    assert yamblab("sweep", SPEC, "--set", "nam=b") == "--set nam: unknown key (did you mean name?)"


def _spec(tmp_path, **extra) -> Path:
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "kind": "grid", "base": str(ROOT / TINY), "trial_cpus": 2,
                                 "arms": {"a": {}, "b": {"train.lr": 0.002}}, **extra}))
    return p


def test_run_settings_in_a_spec_are_named_where_they_are_with_the_nearest_key(yamblab, tmp_path):
    p = _spec(tmp_path, overrides={"train.lrr": 1})
    # the spec's `overrides`, not the first arm, which merely applies them
    assert yamblab("sweep", p) == f"{p}: overrides: train.lrr: unknown key (did you mean train.lr?)"
    p = _spec(tmp_path, arms={"a": {}, "b": {"runtime.workerz": 1}})
    assert yamblab("sweep", p) == f"{p}: arms.b: runtime.workerz: unknown key (did you mean runtime.workers?)"
    p = _spec(tmp_path, paralel=2)
    assert yamblab("sweep", p) == f"{p}: paralel: unknown key (did you mean parallel?)"


def test_a_run_config_and_a_spec_in_each_others_place_are_named(yamblab, tmp_path):
    assert yamblab("sweep", "configs/yamb-tiny.yaml") == (
        "configs/yamb-tiny.yaml is a run config; yamblab sweep takes a sweep spec (experiments/...), "
        "or run it with yamblab train -c configs/yamb-tiny.yaml")
    assert yamblab("sweep", "configs/yamb-tiny.yaml", "--set", "name=b").startswith(
        "configs/yamb-tiny.yaml is a run config;")
    assert yamblab("train", "-c", SPEC) == (
        f"{SPEC} is a sweep spec; yamblab train takes a run config (configs/...), "
        f"or run it with yamblab sweep {SPEC}")
    p = _spec(tmp_path, base=str(ROOT / SPEC))
    assert yamblab("sweep", p) == (f"{p}: base: {ROOT / SPEC} is a sweep spec; `base` names the run config every "
                                   "trial starts from (configs/...)")
    # a spec with a stray run-config key is still a spec: its keys are named
    p = _spec(tmp_path, train={"lr": 1})
    assert yamblab("sweep", p) == f"{p}: train: unknown key"


def test_nearest_key_looks_beside_then_everywhere():
    keys = dotted_keys(RunConfig)
    assert {"train.lr", "runtime.eval_early.every", "model.hold_correction"} <= set(keys)
    assert nearest_key("train.lrr", keys) == "train.lr"
    assert nearest_key("runtime.lr", keys) == "train.lr"
    assert nearest_key("trian.lr", keys) == "train.lr"
    assert nearest_key("train.zzzz", keys) is None          # not "train.bot": the section's name is no evidence


def test_plain_overrides_stay_the_files(tmp_path):
    """Overrides that no user typed (a test's, a sweep trial's) are named with the file, as before."""
    from yamblab.training.config import load_run_config

    with pytest.raises(ConfigError, match=re.escape(f"{ROOT / TINY}: train.lrr: unknown key (did you mean train.lr?)")):
        load_run_config(ROOT / TINY, {"train.lrr": 1})


# ----------------------------------------------------------------------------- the API
def _documented() -> list[tuple[str, str, str]]:
    """(path, body, detail) of every row of docs/serving.md's table of bad requests."""
    text = (ROOT / "docs" / "serving.md").read_text()
    section = text.split("### Bad requests", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.fullmatch(r"\| `POST (/\S+)` \| (?:`(.*)`|\(empty\)) \| `(.*)` \|", line.strip())
        if m:
            rows.append((m[1], m[2] or "", m[3]))
    assert len(rows) >= 20, "the table of bad requests in docs/serving.md was not found"
    return rows


@pytest.fixture(scope="module")
def client(official_table):
    from yamblab.service.serve import create_app
    from yamblab.service.service import Service

    return TestClient(create_app(Service(["forced"], yamb_presets=("croatian",))), raise_server_exceptions=False)


@pytest.mark.parametrize("path, body, detail", _documented())
def test_every_documented_bad_request_is_a_400_with_its_message(client, path, body, detail):
    r = client.post(path, content=body.encode(), headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (400, {"detail": detail})


MALFORMED = [
    ("/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "yahtzee_bonuses": 13}, "yahtzee_bonuses"),
    ("/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": None}, "rolls_left"),
    ("/api/yahtzee/advice", {"dice": [], "rolls_left": 1}, "dice"),
    ("/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "rules": "x" * 81}, "rules"),
    ("/api/yahtzee/target", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1}, "target"),
    ("/api/yahtzee/grade", {"decisions": [{"dice": [1, 2, 3, 4, 5], "rolls_left": 1}]}, "decisions[0].move"),
    ("/api/yahtzee/grade", {"decisions": [{"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "move": {"box": "ones"},
                                           "note": 1}]}, "decisions[0].note"),
    ("/api/yahtzee/replay", {"seed": 2**64}, "seed"),
    ("/api/yahtzee/replay", {"seed": 1, "moves": [{"hold": [1, 2, 3, 4, 5, 6, 7]}]}, "moves[0].hold"),
    ("/api/yahtzee/replay", {"seed": 1, "moves": [{"box": 5}]}, "moves[0].box"),
    ("/api/yahtzee/replay", {"seed": 1, "advice": "maybe"}, "advice"),
    ("/api/yahtzee/agent/game", {"seed": 1}, "agent"),
    ("/api/yahtzee/agent/move", {"agent": "greedy", "dice": [1, 2, 3, 4, 5], "rolls_left": 1, "agnet": 1}, "agnet"),
    ("/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 0}, "roll"),
    ("/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "scores": {"ones": "x"}}, "scores.ones"),
    ("/api/yamb/replay", {"seed": 1, "moves": [{"rows": "x"}]}, "moves[0]"),
]


@pytest.mark.parametrize("path, body, field", MALFORMED)
def test_every_malformed_request_is_a_400_naming_the_field(client, path, body, field):
    r = client.post(path, json=body)
    detail = r.json()["detail"]
    assert r.status_code == 400 and isinstance(detail, str) and "\n" not in detail, (r.status_code, r.text)
    assert detail.startswith(f"{field}: "), detail


def test_a_body_that_is_not_json_is_a_400_whatever_its_type_says(client):
    for body, kind in [(b"dice=12345", "text/plain"), (b"{}", None), (b'{"dice": [1, 2, 3, 4, 5], "rolls_left": 1',
                                                                          "application/json")]:
        r = client.post("/api/yahtzee/advice", content=body, headers={"content-type": kind} if kind else {})
        assert r.status_code == 400 and "body" in r.json()["detail"], (body, r.text)


def test_the_api_schema_documents_400_not_422(client):
    schema = client.get("/openapi.json").json()
    answers = {code for ops in schema["paths"].values() for op in ops.values() for code in op["responses"]}
    assert "422" not in answers and "400" in answers
    assert json.dumps(schema).count("HTTPValidationError") == 0
