"""The bad-input contract, fuzzed: every mistake is named, none ends in a traceback or is ignored.

For every command and option, hypothesis generates malformed input (dice, scorecards, rule
strings, presets, columns, agents, paths, numbers out of range, run configs and sweep specs with
a bad key or a bad value at any depth) and each run must:

* exit with status 2,
* print exactly one line, on stderr, starting ``error:`` and naming the problem (the option,
  the offending value or the config key),
* print no traceback and nothing else,
* leave no file behind in the working folder;

and an option that does not apply to the chosen command or arguments is refused by name.

Every command runs in-process (typer's runner) in a scratch working folder. Nothing here may
start real work: the places where work would start (an MLflow tracker, a sweep, the server, a
terminal game, a tuning study) are replaced by a stub that fails loudly, so an input that gets
past validation shows up as a failure, never as a training run.

``benchmarks/bad_input_tally.py`` runs the same generators and counts the outcomes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from yamblab.cli.common import MAX_GAMES, MAX_SEED
from yamblab.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
BASE_CONFIG = ROOT / "configs" / "yahtzee-tiny.yaml"
EXAMPLES = int(os.environ.get("YAMBLAB_FUZZ_EXAMPLES", "12"))    # the tally runs more
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

runner = CliRunner()

#: when a list, outcomes are appended to it instead of asserted (the tally script)
RECORD: list | None = None


class WouldStartWork(Exception):
    """Raised by the stubs: bad input got past validation and work was about to start."""


def _stub(name):
    def refuse(*args, **kwargs):
        raise WouldStartWork(f"{name} was reached: the input was not refused")
    return refuse


class Workspace:
    """A scratch working folder, a folder of prepared inputs, and the stubs."""

    def __init__(self):
        self.base = Path(tempfile.mkdtemp(prefix="yamblab-bad-input-"))
        self.work = self.base / "work"
        self.inputs = self.base / "inputs"
        self.work.mkdir()
        self.inputs.mkdir()
        (self.inputs / "folder.pt").mkdir()
        (self.inputs / "run-without-checkpoint").mkdir()
        (self.inputs / "empty.json").write_text("")
        for suffix in (".pt", ".npy", ".json", ".yaml", ".txt"):
            (self.inputs / f"garbage{suffix}").write_bytes(b"\x00\xffnot what it claims\x80" * 7)
        (self.inputs / "list.yaml").write_text("- 1\n- 2\n")
        (self.inputs / "bad-syntax.yaml").write_text("name: [unclosed\n  train: {\n")
        self.counter = 0

    def fresh(self, name: str) -> Path:
        self.counter += 1
        return self.inputs / f"{self.counter:05d}-{name}"


WS: Workspace | None = None


@contextlib.contextmanager
def workspace():
    """Set up the scratch folders and the stubs (for pytest and for the tally script)."""
    global WS
    WS = Workspace()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("YAMBLAB_CACHE_DIR", str(WS.base / "cache"))
        # the sweep driver first: importing it here binds the real Tracker, not the stub, in a
        # process whose later tests run sweeps
        mp.setattr("yamblab.sweeps.driver.Sweep", _stub("a sweep"))
        mp.setattr("yamblab.training.tracking.Tracker", _stub("an MLflow tracker"))
        mp.setattr("yamblab.service.serve.run_server", _stub("the server"))
        mp.setattr("yamblab.cli.play.play_game", _stub("a terminal game"))
        mp.setattr("yamblab.rules_of_thumb.tuning.coordinate_descent", _stub("a tuning study"))
        mp.setattr("yamblab.rules_of_thumb.tuning.optuna_search", _stub("a tuning study"))
        try:
            yield WS
        finally:
            shutil.rmtree(WS.base, ignore_errors=True)
            WS = None


@pytest.fixture(scope="module", autouse=True)
def _workspace():
    with workspace() as ws:
        yield ws


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def classify(res, new_files: list[str], needles) -> str:
    """``clean``, ``traceback``, ``accepted`` or ``unclean: why`` for one run."""
    if "Traceback" in res.output or (res.exception is not None and not isinstance(res.exception, SystemExit)):
        return "traceback"
    if res.exit_code == 0:
        return "accepted"
    why = []
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    if res.exit_code != 2:
        why.append(f"exit status {res.exit_code}")
    if len(lines) != 1 or not lines[0].startswith("error: "):
        why.append(f"not one 'error: …' line: {res.stderr!r}")
    if res.stdout.strip():
        why.append(f"printed {res.stdout.strip()[:80]!r} too")
    if new_files:
        why.append(f"left {new_files} behind")
    if lines and needles and not any(str(n).lower() in lines[0].lower() for n in needles):
        why.append(f"does not name any of {list(needles)}")
    return "clean" if not why else "unclean: " + "; ".join(why)


def refused(args: list[str], *needles) -> None:
    """Run ``yamblab ARGS``; it must be refused cleanly, naming one of ``needles``."""
    args = [str(a) for a in args]
    before = _listing(WS.work)
    old = os.getcwd()
    os.chdir(WS.work)
    try:
        res = runner.invoke(app, args)
    finally:
        os.chdir(old)
    new = sorted(_listing(WS.work) - before)
    for name in new:
        p = WS.work / name
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    verdict = classify(res, new, needles)
    output = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        output += "".join(traceback.format_exception(res.exception)[-3:])
    if RECORD is not None:
        RECORD.append((args[0] if args[0] not in ("oracle", "valuation", "model") else " ".join(args[:2]),
                       verdict, args, output))
        return
    assert verdict == "clean", f"yamblab {' '.join(args)}: {verdict}\n{output}"


# ----------------------------------------------------------------------------- strategies
JOKER_WORDS = ("forced", "free", "priority", "none", "official", "hasbro", "verhoeff")
FLAGS = ("no-upper-bonus", "no-yahtzee-bonus")
KNOWN_WORDS = set(JOKER_WORDS) | set(FLAGS) | {f.replace("-", "_") for f in FLAGS}
word = st.from_regex(r"[a-z][a-z_\-]{0,9}", fullmatch=True)


@st.composite
def bad_rules(draw):
    """(rule string, words that name its problem)."""
    kind = draw(st.sampled_from(["unknown", "two jokers", "twice"]))
    if kind == "unknown":
        w = draw(word.filter(lambda x: x not in KNOWN_WORDS))
        parts = draw(st.lists(st.sampled_from(FLAGS), max_size=1, unique=True)) + [w]
        if draw(st.booleans()):
            parts.insert(0, draw(st.sampled_from(JOKER_WORDS)))
        return ",".join(draw(st.permutations(parts))), [w]
    if kind == "two jokers":
        jokers = draw(st.lists(st.sampled_from(JOKER_WORDS), min_size=2, max_size=3, unique=True))
        flags = draw(st.lists(st.sampled_from(FLAGS), max_size=2, unique=True))
        return draw(st.sampled_from([",", "+"])).join(draw(st.permutations(jokers + flags))), ["joker"]
    flag = draw(st.sampled_from(FLAGS + JOKER_WORDS[:1]))
    return f"{flag},{flag}", ["twice"]


RULES_COMMANDS = [
    ["oracle", "build"], ["oracle", "evaluate"], ["advise", "--dice", "12345"], ["grade", "--games", "1"],
    ["baseline", "--games", "1"], ["play"], ["serve"], ["valuation", "table"],
    ["valuation", "tune", "--trials", "1"],
]


@st.composite
def bad_dice(draw):
    kind = draw(st.sampled_from(["count", "face", "letters"]))
    if kind == "count":
        faces = draw(st.lists(st.integers(1, 6), max_size=9).filter(lambda f: len(f) != 5))
    elif kind == "face":
        faces = draw(st.lists(st.integers(-9, 12), min_size=5, max_size=5).filter(
            lambda f: any(not 1 <= x <= 6 for x in f)))
    else:
        faces = draw(st.lists(st.integers(1, 6), min_size=4, max_size=4))
        faces.insert(draw(st.integers(0, 4)), draw(st.text(string.ascii_letters + "?!.", min_size=1, max_size=3)))
    return draw(st.sampled_from([",", ", ", " "])).join(map(str, faces))


BOXES = ("ones", "twos", "threes", "fours", "fives", "sixes", "three_kind", "four_kind", "full_house",
         "small_straight", "large_straight", "yahtzee", "chance")


@st.composite
def bad_card(draw):
    """(scorecard text, words that name its problem)."""
    from yamblab.games.yahtzee.rules import possible_box_scores

    kind = draw(st.sampled_from(["box", "points", "twice", "number", "form", "bonus", "full"]))
    if kind == "box":
        name = "zz" + draw(st.from_regex(r"[a-z_]{0,8}", fullmatch=True))
        return f"ones=3,{name}=4", [name]
    b = draw(st.integers(0, 12))
    if kind == "points":
        v = draw(st.integers(-60, 200).filter(lambda v: v not in possible_box_scores(b)))
        return f"{BOXES[b]}={v}", [str(v)]
    if kind == "twice":
        v = min(possible_box_scores(b))
        return f"{BOXES[b]}={v},{BOXES[b]}={v}", ["twice"]
    if kind == "number":
        junk = draw(st.text(string.ascii_letters + ".", min_size=1, max_size=5))
        return f"{BOXES[b]}={junk}", [junk]
    if kind == "form":
        return f"{BOXES[b]}", [BOXES[b]]
    if kind == "bonus":
        return f"{BOXES[b]}={min(possible_box_scores(b))},yahtzee_bonuses={draw(st.integers(1, 5))}", ["bonus"]
    return ",".join(f"{n}={min(possible_box_scores(i))}" for i, n in enumerate(BOXES)), ["full"]


def out_of_range(low, high, integer=True):
    """Numbers outside ``low..high`` (either end may be None), or text that is not a number."""
    num = st.integers if integer else (lambda **kw: st.floats(allow_nan=False, **kw))
    parts = [st.text(string.ascii_letters, min_size=1, max_size=6)]
    if low is not None:
        parts.append(num(max_value=low - 1) if integer else num(max_value=low / 2))
    if high is not None:
        parts.append(num(min_value=high + 1) if integer else num(min_value=high * 2))
    return st.one_of(*parts).map(str)


NUMBER_OPTIONS = [
    (["advise", "--dice", "12345"], "--rolls-left", 0, 2, True),
    (["advise", "--dice", "12345"], "--top", 0, None, True),
    (["grade"], "--games", 1, MAX_GAMES, True),
    (["grade", "--games", "1"], "--seed", 0, MAX_SEED, True),
    (["baseline"], "--games", 1, MAX_GAMES, True),
    (["baseline", "--games", "1"], "--seed", 0, MAX_SEED, True),
    (["play"], "--seed", 0, MAX_SEED, True),
    (["serve"], "--port", 1, 65535, True),
    (["serve", "--target"], "--target-max", 1, 2000, True),
    (["valuation", "tune"], "--trials", 1, 1_000_000, True),
    (["valuation", "tune", "--trials", "1"], "--stages", 0, 13, True),
    (["valuation", "tune", "--method", "tpe", "--trials", "1"], "--radius", 0.001, 1000.0, False),
]


def _inputs(name: str) -> str:
    return str(WS.inputs / name)


@st.composite
def bad_path(draw, suffixes=(".pt", ".npy", ".json", ".yaml", ".txt")):
    """(path, its name): missing, a folder, empty, garbage, or of the wrong kind."""
    kind = draw(st.sampled_from(["missing", "folder", "garbage"]))
    if kind == "missing":
        name = draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True)) + draw(st.sampled_from(suffixes))
        return _inputs("nowhere/" + name), name
    if kind == "folder":
        return _inputs("folder.pt"), "folder.pt"
    name = "garbage" + draw(st.sampled_from(suffixes))
    return _inputs(name), name


PATH_OPTIONS = [
    (["oracle", "evaluate"], "--valuation", (".pt", ".npy", ".json", ".yaml", ".txt")),
    (["grade", "--games", "1", "--agent", "search"], "--valuation", (".pt", ".txt")),
    (["grade", "--games", "1"], "--checkpoint", (".pt",)),
    (["serve"], "--checkpoint", (".pt",)),
    (["valuation", "tune", "--trials", "1"], "--start", (".json", ".yaml", ".txt")),
    (["train"], "--config", (".yaml", ".txt")),
    (["sweep"], None, (".yaml", ".txt")),
]


# ----------------------------------------------------------------------------- the contract
@FUZZ
@given(st.sampled_from(RULES_COMMANDS), bad_rules())
def test_rule_strings(cmd, rules):
    text, needles = rules
    refused([*cmd, "--rules", text], *needles)


@FUZZ
@given(bad_dice(), st.sampled_from(["forced", "free,no-upper-bonus"]))
def test_dice(dice, rules):
    refused(["advise", "--dice", dice, "--rules", rules], "dice")


@FUZZ
@given(bad_card())
def test_scorecards(card):
    text, needles = card
    refused(["advise", "--dice", "12345", "--card", text], *needles)


@settings(FUZZ, max_examples=2 * EXAMPLES)
@given(st.data())
def test_numbers_out_of_range(data):
    cmd, option, low, high, integer = data.draw(st.sampled_from(NUMBER_OPTIONS))
    value = data.draw(out_of_range(low, high, integer))
    refused([*cmd, option, value], option)


@settings(FUZZ, max_examples=2 * EXAMPLES)
@given(st.data())
def test_paths(data):
    cmd, option, suffixes = data.draw(st.sampled_from(PATH_OPTIONS))
    path, name = data.draw(bad_path(suffixes))
    refused([*cmd, *([option] if option else []), path], name)


@FUZZ
@given(st.sampled_from(["run-without-checkpoint", "nowhere", "../x"]))
def test_resume_without_a_run(name):
    refused(["train", "--resume", _inputs(name) if name != "nowhere" else name], name.split("/")[-1])


@FUZZ
@given(st.data())
def test_output_paths(data):
    kind = data.draw(st.sampled_from(["--out folder", "--out no parent", "--cache-dir file"]))
    if kind == "--out folder":
        refused(["valuation", "tune", "--trials", "1", "--out", _inputs("folder.pt")], "--out")
    elif kind == "--out no parent":
        refused(["valuation", "tune", "--trials", "1", "--out", _inputs("nowhere/best.json")], "--out")
    else:
        refused(["oracle", "build", "--cache-dir", _inputs("garbage.txt")], "--cache-dir")


name = st.from_regex(r"[a-z][a-z0-9_\-]{0,9}", fullmatch=True)


@settings(FUZZ, max_examples=2 * EXAMPLES)
@given(st.data())
def test_names(data):
    """Unknown games, agents, presets, columns, depths, methods and network sizes."""
    from yamblab.games.yamb.rules import COLUMN_KINDS, PRESETS
    from yamblab.model.config import PRESETS as SIZES

    known = set(PRESETS) | set(SIZES) | set(COLUMN_KINDS) | {
        "yahtzee", "yamb", "random", "greedy", "oracle", "search", "heuristic", "cd", "tpe", "cmaes",
        "none", "one_step", "full_turn", "default"}
    bad = data.draw(name.filter(lambda x: x not in known and x.replace("-", "_") not in known))
    where = data.draw(st.sampled_from([
        ["grade", "--games", "1", "--game", bad], ["oracle", "build", "--game", bad],
        ["grade", "--games", "1", "--agent", bad], ["grade", "--games", "1", "--game", "yamb", "--agent", bad],
        ["grade", "--games", "1", "--game", "yamb", "--preset", bad],
        ["oracle", "build", "--game", "yamb", "--preset", bad],
        ["oracle", "build", "--game", "yamb", "--column", bad],
        ["grade", "--games", "1", "--game", "yamb", "--columns", f"down,{bad}"],
        ["grade", "--games", "1", "--agent", "search", "--depth", bad],
        ["valuation", "tune", "--trials", "1", "--method", bad],
        ["valuation", "tune", "--trials", "1", "--start", bad],
        ["oracle", "evaluate", "--valuation", bad],
        ["model", "summary", "--preset", bad],
    ]))
    refused(where, bad)


@FUZZ
@given(st.sampled_from(["down,down", "free,free", "down,,up", ",", "", " "]))
def test_yamb_columns(columns):
    refused(["grade", "--games", "1", "--game", "yamb", "--columns", columns], "column")


@settings(FUZZ, max_examples=2 * EXAMPLES)
@given(st.data())
def test_options_that_do_not_apply_are_refused_by_name(data):
    agent = data.draw(st.sampled_from(["random", "greedy", "oracle"]))
    garbage = _inputs("garbage.pt")
    args, option = data.draw(st.sampled_from([
        (["grade", "--agent", agent, "--valuation", "oracle"], "--valuation"),
        (["grade", "--agent", agent, "--depth", "one_step"], "--depth"),
        (["grade", "--agent", agent, "--checkpoint", garbage], "--checkpoint"),
        (["grade", "--checkpoint", garbage, "--valuation", "oracle"], "--valuation"),
        (["grade", "--game", "yamb", "--rules", "forced"], "--rules"),
        (["grade", "--preset", "croatian"], "--preset"),
        (["grade", "--columns", "free"], "--columns"),
        (["oracle", "build", "--preset", "croatian"], "--preset"),
        (["oracle", "build", "--column", "down"], "--column"),
        (["oracle", "build", "--game", "yamb", "--rules", "forced"], "--rules"),
        (["oracle", "build", "--game", "yamb", "--rebuild"], "--rebuild"),
        (["oracle", "build", "--game", "yamb", "--cache-dir", _inputs("cache")], "--cache-dir"),
        (["serve", "--target-max", "100"], "--target-max"),
        (["valuation", "tune", "--trials", "1", "--radius", "2"], "--radius"),
        (["valuation", "tune", "--trials", "1", "--method", "cd", "--radius", "2"], "--radius"),
    ]))
    if args[0] == "grade":
        args = [*args, "--games", "1"]
    refused(args, option)


@FUZZ
@given(st.sampled_from(["--bogus", "--game-s", "--rule"]), st.sampled_from(
    [["grade"], ["advise", "--dice", "12345"], ["oracle", "build"], ["train"], ["serve"]]))
def test_unknown_options(option, cmd):
    refused([*cmd, option, "1"], option)


# ----------------------------------------------------------------------------- config files
def _base_config() -> dict:
    return yaml.safe_load(BASE_CONFIG.read_text())


def _leaf_fields(model, prefix=""):
    """(dotted key, pydantic FieldInfo) of every leaf of a config model, at any depth."""
    from pydantic import BaseModel

    for key, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaf_fields(ann, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", info


def _bad_values(info):
    """Values a field refuses: beyond its bounds, outside its choices, of the wrong type."""
    import typing

    import annotated_types as at

    ann = info.annotation
    out = []
    for m in info.metadata:
        if isinstance(m, (at.Ge, at.Gt)):
            bound = m.ge if isinstance(m, at.Ge) else m.gt
            out.append(bound - 1 if isinstance(m, at.Ge) else bound)
        if isinstance(m, (at.Le, at.Lt)):
            bound = m.le if isinstance(m, at.Le) else m.lt
            out.append(bound + 1 if isinstance(m, at.Le) else bound)
    args = typing.get_args(ann)
    if typing.get_origin(ann) is typing.Literal:
        out.append("zz-" + "-".join(map(str, args)))
    text = repr(ann)
    if "Any" not in text and "dict" not in text:
        out.append({"zz": [1, 2]})
    if ann is bool:
        out.append("maybe")
    return out


def _leaf_cases(model):
    return [(key, v) for key, info in _leaf_fields(model) for v in _bad_values(info)]


@st.composite
def bad_run_config(draw):
    """(YAML text, words that name the problem): a bad key or value anywhere in a run config."""
    from yamblab.training.config import RunConfig

    data = _base_config()
    kind = draw(st.sampled_from(["unknown key", "bad value", "bad value", "section", "not a mapping"]))
    if kind == "unknown key":
        section = draw(st.sampled_from([None, "model", "search", "train", "runtime", "tracking"]))
        node = data if section is None else data.setdefault(section, {})
        key = "zz" + draw(st.from_regex(r"[a-z_]{1,8}", fullmatch=True))
        node[key] = draw(st.sampled_from([1, "x", [1], {"a": 1}, None]))
        return yaml.safe_dump(data), [f"{section}.{key}" if section else key]
    if kind == "bad value":
        key, value = draw(st.sampled_from(_leaf_cases(RunConfig)))
        *path, last = key.split(".")
        node = data
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
        return yaml.safe_dump(data), [key, last]
    if kind == "section":
        section = draw(st.sampled_from(["model", "search", "train", "runtime", "tracking"]))
        data[section] = draw(st.sampled_from([5, "text", [1, 2], True]))
        return yaml.safe_dump(data), [section]
    return draw(st.sampled_from(["- a\n- b\n", "just text\n", "42\n"])), ["mapping"]


@settings(FUZZ, max_examples=3 * EXAMPLES)
@given(bad_run_config())
def test_run_configs(cfg):
    text, needles = cfg
    path = WS.fresh("config.yaml")
    path.write_text(text)
    refused(["train", "--config", path], *needles)


@FUZZ
@given(st.data())
def test_set_overrides(data):
    item, needles = data.draw(st.sampled_from([
        ("train.lr", ["--set"]), ("=3", ["--set"]), ("train.lr=[", ["--set"]),
        ("train.zz_nonsense=1", ["zz_nonsense"]), ("train.lr=-1", ["train.lr"]),
        ("runtime.workers=0", ["runtime.workers"]), ("zz.top=1", ["zz"]),
    ]))
    refused(["train", "--config", BASE_CONFIG, "--set", item], *needles)


def _grid(**extra) -> dict:
    return {"name": "fuzz", "kind": "grid", "base": str(BASE_CONFIG), "trial_cpus": 2,
            "arms": {"a": {}, "b": {"train.lr": 0.002}}, **extra}


def _tpe(params) -> dict:
    return {"name": "fuzz", "kind": "tpe", "base": str(BASE_CONFIG), "trial_cpus": 2, "params": params}


@st.composite
def bad_sweep(draw):
    """(sweep spec, words that name the problem): a bad key or value anywhere, or a bad value at
    any place in a choices list or either end of a range."""
    from yamblab.training.config import RunConfig

    kind = draw(st.sampled_from(["top key", "top value", "arm", "factor", "choice", "range", "base"]))
    if kind == "top key":
        key = "zz" + draw(st.from_regex(r"[a-z_]{1,8}", fullmatch=True))
        return _grid(**{key: 1}), [key]
    if kind == "top value":
        key, value = draw(st.sampled_from([("n_trials", 0), ("parallel", 0), ("trial_cpus", -1), ("kind", "zz"),
                                           ("seeds", []), ("name", ""), ("arms", []), ("baseline_arm", "zz"),
                                           ("judge", {"zz": "none"}), ("judge", {"b": "zz"}),
                                           ("judge", {"a": "none"})]))
        return _grid(**{key: value}), [key]
    leaf, bad = draw(st.sampled_from(_leaf_cases(RunConfig)))
    if kind == "arm":
        return _grid(arms={"a": {}, "b": {leaf: bad}}), [leaf]
    good = {"train.lr": 0.001, "train.batch_size": 64, "runtime.eval_games": 10, "train.entropy_coef": 0.0}
    key = draw(st.sampled_from(sorted(good)))
    if kind == "factor":
        values = [good[key]] * draw(st.integers(1, 3))
        values.insert(draw(st.integers(1, len(values))), "zz-not-a-number")
        return _grid(arms=None, factors={key: values}), [key]
    if kind == "choice":
        values = [good[key]] * draw(st.integers(1, 3))
        values.insert(draw(st.integers(1, len(values))), draw(st.sampled_from([-1, 10**9, "zz"])))
        return _tpe({key: {"choices": values}}), [key]
    if kind == "range":
        ranges = {"train.lr": {"low": 1e-4, "high": 1e6, "log": True},
                  "train.batch_size": {"low": 1, "high": 10**7, "integer": True},
                  "runtime.eval_games": {"low": 1, "high": 10**9, "integer": True},
                  "train.entropy_coef": {"low": -5, "high": 0.01}}
        return _tpe({key: ranges[key]}), [key]
    return {**_grid(), "base": _inputs("nowhere.yaml")}, ["nowhere.yaml"]


@settings(FUZZ, max_examples=3 * EXAMPLES)
@given(bad_sweep())
def test_sweep_specs(spec):
    data, needles = spec
    path = WS.fresh("sweep.yaml")
    path.write_text(yaml.safe_dump(data))
    refused(["sweep", path], *needles)


# ----------------------------------------------------------------------------- the fixes, pinned
def test_the_checks_can_fail():
    """The classifier tells a clean refusal from the rest (else every test above passes trivially)."""
    out = []
    global RECORD
    old, RECORD = RECORD, out
    try:
        refused(["model", "summary", "--preset", "tiny"], "tiny")                  # accepted
        refused(["grade", "--games", "0"], "--games")                              # clean
        refused(["advise", "--dice", "12345", "--rules", "zzz"], "not-named")      # unnamed
    finally:
        RECORD = old
    assert [v.split(":")[0] for _, v, _, _ in out] == ["accepted", "clean", "unclean"]


def test_cache_files_are_readable_by_group_and_others(tmp_path):
    from yamblab.atomic import atomic_write

    old = os.umask(0o022)
    try:
        p = atomic_write(tmp_path / "table.npz", b"data")
    finally:
        os.umask(old)
    assert p.stat().st_mode & 0o777 == 0o644


def test_a_tuning_range_is_checked_at_both_ends_and_inside(tmp_path):
    from yamblab.errors import ConfigError
    from yamblab.sweeps.spec import load_sweep

    spec = tmp_path / "s.yaml"
    workers = {"low": 1, "high": 2, "integer": True}
    spec.write_text(yaml.safe_dump(_tpe({"runtime.learner_cpus": {"low": 0.25, "high": 2}})))
    with pytest.raises(ConfigError, match=r"runtime.learner_cpus \(high = 2(\.0)?\).*no CPU for self-play"):
        load_sweep(spec)          # the high end does not fit the trial's CPUs
    spec.write_text(yaml.safe_dump({**_tpe({"runtime.workers": {**workers, "integer": False}}), "trial_cpus": 3}))
    with pytest.raises(ConfigError, match="runtime.workers.*inside"):
        load_sweep(spec)          # a fractional worker count between the ends
    spec.write_text(yaml.safe_dump({**_tpe({"runtime.workers": workers}), "trial_cpus": 3}))
    load_sweep(spec)


def test_an_arm_judged_on_a_mode_its_trials_do_not_grade_is_named(tmp_path):
    """A grid arm judged on a decision mode that neither its main mode nor runtime.eval_modes
    grades: one error naming the arm, the mode and the fix (before any trial starts)."""
    from yamblab.errors import ConfigError
    from yamblab.sweeps.spec import load_sweep

    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(_grid(judge={"b": "none"})))
    with pytest.raises(ConfigError, match=r"judge\.b: arm 'b' is judged on mode 'none', which its trials do not "
                                          r"grade.*add runtime\.eval_modes\.none: GAMES to `overrides`"):
        load_sweep(spec)          # refused when the spec is read, before any trial or MLflow run
    spec.write_text(yaml.safe_dump(_grid(judge={"b": "none"}, overrides={"runtime.eval_modes": {"none": 50}})))
    sp, base = load_sweep(spec)
    assert sp.judge_modes(base)["b"] == ["none"]


def test_rule_strings_name_one_joker_rule():
    from yamblab.errors import UnknownVariantError
    from yamblab.games.yahtzee.rules import YahtzeeRules

    assert YahtzeeRules.parse("verhoeff,no-upper-bonus").name == YahtzeeRules.parse("free,no_upper_bonus").name
    for text in ("forced,free", "official,forced", "none+priority", "no-upper-bonus,no_upper_bonus"):
        with pytest.raises(UnknownVariantError):
            YahtzeeRules.parse(text)
