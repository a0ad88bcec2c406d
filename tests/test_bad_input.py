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

Config files: the bad values of every field of every run-config section and of a sweep spec are
derived from the field's type and bounds, those of fields that also take "auto" or None included
(see "config files" below); ``test_every_config_field_is_fuzzed`` keeps a new field from slipping
through. :data:`CASE_CLASSES` lists each class of bad input of the issue with the tests that cover it.

``benchmarks/bad_input_tally.py`` runs the same generators and counts the outcomes.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import shutil
import string
import tempfile
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from yamblab.cli.common import MAX_GAMES, MAX_SEED
from yamblab.cli.main import app
from yamblab.sweeps.spec import SweepConfig
from yamblab.training.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
BASE_CONFIG = ROOT / "configs" / "yahtzee-tiny.yaml"
EXAMPLES = int(os.environ.get("YAMBLAB_FUZZ_EXAMPLES", "12"))    # the tally runs more
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

runner = CliRunner()

#: The classes of bad input, each with an example, what must happen, and the tests that cover it
#: (``FILE::TEST``; ``test_the_case_list_cites_tests_that_exist`` checks that each is there).
CASE_CLASSES = [
    ("a checkpoint of another game",
     "grade --checkpoint of a Yamb run on Yahtzee; train.init_from of a Yahtzee run in a Yamb run",
     "refused by name (the game it learned, the game asked) before any game or run folder",
     ["tests/test_search.py::test_a_checkpoint_of_another_game_is_refused_by_name_before_any_game",
      "tests/test_warm_start.py::test_a_warm_start_from_another_game_or_no_file_is_one_clear_error"]),
    ("resume changes",
     "train --resume RUN --set train.lr=…, or -c with another network",
     "refused naming each setting and both values; only length, cadence and resources may change",
     ["tests/test_resume.py::test_a_resume_refuses_a_change_of_the_run_before_touching_its_folder"]),
    ("unreachable cluster address",
     "train --address 10.0.0.1:6379 with no Ray there",
     "one error naming the address, before any run folder or MLflow run",
     ["tests/test_places.py::test_a_cluster_that_cannot_be_reached_is_named_at_once",
      "tests/test_places.py::test_a_cluster_that_refuses_the_driver_is_named_within_15_seconds",
      "tests/test_places.py::test_a_cluster_of_another_ray_version_is_named"]),
    ("resources not bounded",
     "runtime.learner_gpus: -1, nan, inf, 1.5; workers: 0, 'Auto', 'max'; worker_gpus: 2",
     "refused when the config is read: exit 2, one line naming the field",
     ["tests/test_bad_input.py::test_every_run_config_field_refuses_every_derived_bad_value",
      "tests/test_bad_input.py::test_field_values_by_set",
      "tests/test_bad_input.py::test_every_config_field_is_fuzzed",
      "tests/test_devices.py::test_gpu_settings_are_bounded_and_shares_split_one_gpu"]),
    ("unwritable places",
     "a read-only working folder or runtime.run_dir, --out in a missing folder, --cache-dir a file, a full disk",
     "refused by name before any work; on a full disk the old file and the checkpoint are kept",
     ["tests/test_places.py::test_a_read_only_working_folder_is_named_at_once",
      "tests/test_places.py::test_places_a_run_cannot_write_are_named",
      "tests/test_bad_input.py::test_output_paths",
      "tests/test_disk_full.py::test_an_atomic_write_on_a_full_disk_keeps_the_old_file",
      "tests/test_disk_full.py::test_a_run_stopped_by_a_full_disk_keeps_its_checkpoint_and_resumes"]),
    ("stops that say nothing",
     "a run or sweep that stops (killed, interrupted, out of budget) without saying why or how to go on",
     "says what stopped it, what was kept and the command that carries it on",
     ["tests/test_resume.py::test_a_terminated_run_is_marked_killed_and_says_how_to_resume",
      "tests/test_resume.py::test_an_interrupted_sweep_says_what_it_kept_and_how_to_resume"]),
]

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
        mp.setattr("yamblab.actors.cluster.init_ray", _stub("a Ray cluster"))
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
    (["advise", "--game", "yamb", "--dice", "12345"], "--rolls-left", 0, 2, True),
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
    (["advise", "--game", "yamb", "--dice", "12345"], "--checkpoint", (".pt",)),
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
        ["advise", "--dice", "12345", "--game", bad],
        ["advise", "--game", "yamb", "--dice", "12345", "--preset", bad],
        ["advise", "--game", "yamb", "--dice", "12345", "--columns", f"down,{bad}"],
        ["advise", "--game", "yamb", "--dice", "12345", "--agent", bad],
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
        (["advise", "--dice", "12345", "--preset", "croatian"], "--preset"),
        (["advise", "--dice", "12345", "--columns", "down"], "--columns"),
        (["advise", "--dice", "12345", "--announced", "full"], "--announced"),
        (["advise", "--dice", "12345", "--agent", "heuristic"], "--agent"),
        (["advise", "--dice", "12345", "--checkpoint", garbage], "--checkpoint"),
        (["advise", "--game", "yamb", "--dice", "12345", "--rules", "forced"], "--rules"),
        (["advise", "--game", "yamb", "--columns", "down", "--dice", "12345", "--agent", "heuristic"], "--agent"),
        (["advise", "--game", "yamb", "--columns", "down", "--dice", "12345", "--checkpoint", garbage],
         "--checkpoint"),
        (["advise", "--game", "yamb", "--columns", "down", "--dice", "12345", "--announced", "full"], "--announced"),
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
# The bad values of a config field are derived from the field itself: each member of its type
# (``Annotated[int, Field(ge=1, le=4096)] | Literal["auto"]`` has two, ``float | None`` two), with
# the bounds pydantic keeps on it (``FieldInfo.metadata``, or a member's own ``Annotated[…,
# Field(…)]``: annotated_types' Ge/Gt/Le/Lt/Interval/MinLen/MaxLen). Every field of every section of
# a run config, and of a sweep spec, gets them: just past each end, far past it, -1, nan, ±inf, a
# fraction for a count, a wrong word in place of each Literal (``"Auto"``, ``"max"``), and values
# of the wrong type. ``test_every_config_field_is_fuzzed`` fails for a field whose bad values
# cannot be derived (a number with an open end, a free string) unless ALLOWED_ANY_RUN (or _SWEEP)
# says why it takes any value of its type, so a new field cannot slip through unfuzzed.
NAN, INF = float("nan"), float("inf")


class Member(NamedTuple):
    """One member of a field's type (a union has several), with its constraints."""

    kind: str          # none, literal, bool, int, float, str, list, dict, model, any
    tp: Any
    meta: tuple = ()


def _members(ann, meta=()) -> list[Member]:
    """The members of a field's type; ``meta`` (the field's own constraints) goes to each, as
    pydantic applies the ``Field(gt=…)`` of an ``X | None`` to X."""
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        base, *extra = typing.get_args(ann)
        own = [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        return _members(base, (*meta, *own))
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(ann) for m in _members(a, meta)]
    if ann is type(None):
        return [Member("none", ann)]
    if origin is typing.Literal:
        return [Member("literal", ann)]
    if ann is typing.Any:
        return [Member("any", ann)]
    if ann in (bool, int, float, str):
        return [Member(ann.__name__, ann, tuple(meta))]
    if origin in (list, dict):
        return [Member(origin.__name__, ann, tuple(meta))]
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [Member("model", ann)]
    raise TypeError(f"a config field of type {ann!r}: teach _members and _bad_values about it")


class Bounds(NamedTuple):
    low: Any = None
    low_open: bool = False       # gt, not ge
    high: Any = None
    high_open: bool = False      # lt, not le
    min_len: int | None = None
    max_len: int | None = None
    pattern: str | None = None


def _bounds(meta) -> Bounds:
    b = {}
    for m in meta:            # Ge, Gt, Le, Lt, Interval, MinLen, MaxLen, Len, pydantic's own
        for attr, side, is_open in (("ge", "low", False), ("gt", "low", True), ("le", "high", False),
                                    ("lt", "high", True)):
            if getattr(m, attr, None) is not None:
                b[side], b[f"{side}_open"] = getattr(m, attr), is_open
        for attr, name in (("min_length", "min_len"), ("max_length", "max_len"), ("pattern", "pattern")):
            if getattr(m, attr, None) is not None:
                b[name] = getattr(m, attr)
    return Bounds(**b)


def _good(members: list[Member]):
    """A value the first member accepts (the other half of a bad mapping entry)."""
    m = members[0]
    if m.kind == "literal":
        return typing.get_args(m.tp)[0]
    if m.kind in ("int", "float"):
        b = _bounds(m.meta)
        v = 1 if b.low is None else b.low + (1 if b.low_open else 0)
        return int(v) if m.kind == "int" else float(v)
    if m.kind == "list":
        return [_good(_members(typing.get_args(m.tp)[0]))] if _bounds(m.meta).min_len else []
    return {"none": None, "bool": True, "str": "x", "dict": {}, "model": {}, "any": 1}[m.kind]


def _bad_numbers(m: Member) -> list:
    """At an open end or just past a closed one, one further, -1, nan, ±inf and a fraction for a count."""
    b, integer = _bounds(m.meta), m.kind == "int"
    num = int if integer else float
    out = []
    if b.low is not None:
        out += [num(b.low) if b.low_open else num(b.low - 1) if integer else math.nextafter(b.low, -INF),
                num(b.low - 1)]
        if -1 < b.low or (b.low_open and -1 <= b.low):
            out.append(num(-1))
    if b.high is not None:
        out += [num(b.high) if b.high_open else num(b.high + 1) if integer else math.nextafter(b.high, INF),
                num(b.high + 1)]
    out += [NAN, INF, -INF]
    if integer:
        out.append((b.low if b.low is not None else 0) + 1.5)
    return out


def _bad_values(members: list[Member]) -> list:
    """Values that no member of a field's type accepts (as far as its type and bounds say)."""
    kinds = {m.kind for m in members}
    if "any" in kinds:
        return []
    out = []
    for m in members:
        b = _bounds(m.meta)
        if m.kind in ("int", "float"):
            out += _bad_numbers(m)
        elif m.kind == "bool":
            out += ["maybe", 2, 0.5]
        elif m.kind == "literal":
            choices = typing.get_args(m.tp)
            words = [c for c in choices if isinstance(c, str)]
            out.append("zz-" + "-".join(map(str, choices)))
            for w in dict.fromkeys(words[:1] + [w for w in words if w == "auto"]):
                out.append(w.capitalize() if w.capitalize() != w else w.upper())     # "Auto", "Search"
            if "auto" in words:
                out += ["max", "AUTO", " auto", "auto "]
        elif m.kind == "str":
            if b.min_len:
                out.append("x" * (b.min_len - 1))
            if b.max_len is not None:
                out.append("x" * (b.max_len + 1))
        elif m.kind == "list":
            if b.min_len:
                out.append([])
            out += [[v] for v in _bad_values(_members(typing.get_args(m.tp)[0]))]
        elif m.kind == "dict":
            keys, values = (_members(t) for t in typing.get_args(m.tp))
            out += [{_good(keys): v} for v in _bad_values(values)]
            if not {"str", "any"} & {k.kind for k in keys}:
                out += [{k: _good(values)} for k in _bad_values(keys) if isinstance(k, (str, int, float))]
    # of the wrong type, where no member takes it
    if not {"str", "literal"} & kinds:
        out.append("zz")
    if not {"int", "float"} & kinds:
        out.append(5)
    if "list" not in kinds:
        out.append([1, 2])
    if "dict" not in kinds:
        out.append({"zz": [1, 2]})      # for a model: an unknown key in it
    if not {"none", "model"} & kinds:     # (`section:` with nothing under it is an empty section)
        out.append(None)
    seen: set = set()
    return [v for v in out if (k := (type(v).__name__, repr(v))) not in seen and not seen.add(k)]


def _open_parts(members: list[Member]) -> list[str]:
    """What derived bad values cannot reach: members that take any value of their kind (a number
    with an open end, a string of any length, anything), also as a list's items or a mapping's values."""
    out = []
    for m in members:
        b = _bounds(m.meta)
        if m.kind in ("int", "float"):
            out += [f"{m.kind} with no {side} bound" for side, v in (("lower", b.low), ("upper", b.high)) if v is None]
        elif m.kind == "str" and b == Bounds():
            out.append("any string")
        elif m.kind == "any":
            out.append("any value")
        elif m.kind in ("list", "dict"):
            out += _open_parts(_members(typing.get_args(m.tp)[-1]))
    return out


def _fields(model, prefix=(), mapping_keys=None):
    """(path, members) of every field of ``model`` at any depth. A section, a model that may be
    None (``runtime.eval_early``) and a model that is a mapping's value (``params.KEY``, under the
    key ``mapping_keys`` gives) is a field itself and holds fields."""
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        members = _members(info.annotation, tuple(info.metadata))
        yield path, members
        for m in members:
            if m.kind == "model":
                yield from _fields(m.tp, path, mapping_keys)
            elif m.kind == "dict" and any(v.kind == "model" for v in _members(typing.get_args(m.tp)[1])):
                (value,) = [v for v in _members(typing.get_args(m.tp)[1]) if v.kind == "model"]
                yield from _fields(value.tp, (*path, mapping_keys[".".join(path)]), mapping_keys)


class Case(NamedTuple):
    """A bad value for one field: ``path`` (dotted: :attr:`key`) set to ``value``, with ``extra``
    (dotted keys) that make a validator's check apply; refused naming the key (or its last part,
    or one of ``needles``)."""

    path: tuple
    value: Any
    extra: dict = {}
    needles: tuple = ()

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def names(self) -> list[str]:
        return [self.key, self.path[-1], *self.needles]


def _cases(model, semantic: dict, mapping_keys=None) -> list[Case]:
    out = []
    for path, members in _fields(model, mapping_keys=mapping_keys):
        out += [Case(path, v) for v in _bad_values(members)]
        out += [Case(path, v, extra, needles) for v, extra, needles in semantic.get(".".join(path), [])]
    return out


#: Bad values only a validator refuses (a name looked up when the config is read, a rule across
#: fields): field -> [(value, the settings that make the check apply, what else the line may name)].
SEMANTIC_RUN = {
    "game": [("zz", {}, ("zz",)), ("Yahtzee", {}, ("Yahtzee",))],
    "rules": [("zz-rule", {}, ("zz-rule",)), ("forced,free", {}, ("joker",)), ("forced", {"game": "yamb"}, ())],
    "preset": [("zz", {"game": "yamb", "rules": None}, ("zz",)), ("croatian", {}, ()), ("tiny", {}, ())],
    "columns": [(["zz"], {"game": "yamb", "rules": None}, ("zz",)),
                (["down", "down"], {"game": "yamb", "rules": None}, ("column",)), (["free"], {}, ())],
    "size": [("zz", {}, ()), ("Tiny", {}, ())],
    "train.bot": [("zz", {"train.bot_share": 0.5}, ()), ("search", {"train.bot_share": 0.5}, ())],
    "runtime.learner_gpus": [(1.5, {}, ()), (2.5, {}, ())],
    "runtime.actors": [("in_process", {"runtime.max_policy_lag": 1}, ())],
    "runtime.eval_early": [({"every": 2, "until": 5}, {"runtime.eval_every": 2}, ())],
}
#: The same for a sweep spec (a grid of the arms a and b; a tpe spec for the ``params`` fields).
SEMANTIC_SWEEP = {
    "name": [("a/b", {}, ()), (".hidden", {}, ())],
    "base": [("nowhere/base.yaml", {}, ("base.yaml",))],
    "kind": [("tpe", {}, ("params",))],                               # a tpe spec with nothing to tune
    "arms": [({}, {}, ()), ({"b": {"train.seed": 3}}, {}, ())],
    "seeds": [([0, 0], {}, ())],
    "baseline_arm": [("zz", {}, ())],
    "judge": [({"zz": "none"}, {}, ()), ({"a": "none"}, {}, ()), ({"b": "none"}, {}, ()),
              ({"b": ["full_turn", "full_turn"]}, {}, ())],
    "branch_from": [({}, {}, ()), ({"iterations": 2, "minutes": 3}, {}, ()),
                    ({"iterations": 2, "overrides": {"model.d_model": 64}}, {}, ())],
    "params": [({}, {"kind": "tpe"}, ())],
    "params.train.lr.low": [(0.5, {}, ()), (-1.0, {}, ())],          # above high; beyond train.lr's bound
    "params.train.lr.choices": [([], {}, ()), ([[1]], {}, ()), ([0.001, -1], {}, ())],
}
#: The key each mapping of models is fuzzed under.
SWEEP_MAPPING_KEYS = {"params": "train.lr"}

#: Fields that take any value of their type (or of part of it), and why nothing is lost.
ALLOWED_ANY_RUN = {
    "name": ["any string"],                  # the run's name (its folder is NAME-STAMP)
    "runtime.run_dir": ["any string"],       # a folder; one that cannot be written stops the run by name
    "tracking.uri": ["any string"],          # an MLflow store; a bad one stops `train` by name (the Tracker)
    "tracking.experiment": ["any string"],   # an MLflow experiment's name
}
ALLOWED_ANY_SWEEP = {
    "storage": ["any string"],               # a journal path or a database URL (tests/test_sweep.py)
    "tracking_uri": ["any string"],
    "experiment": ["any string"],
    "overrides": ["any value"],              # run-config keys: every trial's config is validated up
    "arms": ["any value"],                   # front, and the run-config cases are fuzzed in an arm
    "factors": ["any value"],                # (test_sweep_specs)
    "branch_from.overrides": ["any value"],
    "branch_from.checkpoint": ["any string"],    # a checkpoint file, read when the base is made
    # a tuning range's ends and its choices: each end, a value inside and every choice is checked
    # against the bounds of the run-config key tuned (ParamRange.probes, load_sweep)
    "params.train.lr.low": ["float with no lower bound", "float with no upper bound"],
    "params.train.lr.high": ["float with no lower bound", "float with no upper bound"],
    "params.train.lr.choices": ["any value"],
}

RUN_FIELDS = dict(_fields(RunConfig))
SWEEP_FIELDS = dict(_fields(SweepConfig, mapping_keys=SWEEP_MAPPING_KEYS))
RUN_CASES = _cases(RunConfig, SEMANTIC_RUN)
SWEEP_CASES = _cases(SweepConfig, SEMANTIC_SWEEP, SWEEP_MAPPING_KEYS)
#: good values of the models that are None in the bases, so that the bad field is the one fault
PARENTS = {("runtime", "eval_early"): {"every": 1, "until": 5}, ("branch_from",): {"iterations": 2}}


def _leaf_cases(model):
    """(dotted key, bad value) of every run-config field whose check needs no other setting."""
    assert model is RunConfig
    return [(c.key, c.value) for c in RUN_CASES if not c.extra]


def _base_config() -> dict:
    return yaml.safe_load(BASE_CONFIG.read_text())


def _put(data: dict, path, value) -> None:
    node = data
    for p in path[:-1]:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[path[-1]] = copy.deepcopy(value)


def _applied(data: dict, case: Case) -> dict:
    """A copy of ``data`` with ``case`` set (a model that is None there gets good fields first)."""
    data = copy.deepcopy(data)
    for k, v in case.extra.items():
        _put(data, tuple(k.split(".")), v)
    for n in range(1, len(case.path)):
        node = data
        for p in case.path[:n - 1]:
            node = node.get(p, {})
        if case.path[:n] in PARENTS and not isinstance(node.get(case.path[n - 1]), dict):
            _put(data, case.path[:n], PARENTS[case.path[:n]])
    _put(data, case.path, case.value)
    return data


def _yaml_scalar(value) -> str:
    """``value`` as ``--set KEY=VALUE`` is given it (YAML), checked to read back the same."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9).removesuffix("\n...\n").strip()
    assert repr(yaml.safe_load(text)) == repr(value), (value, text)
    return text


def _set_args(case: Case) -> list[str]:
    """``--set`` options that give ``case`` on the command line."""
    sets = [*case.extra.items(), *((".".join(p), v) for p, v in PARENTS.items() if case.path[:len(p)] == p
                                   and len(case.path) > len(p)), (case.key, case.value)]
    return [a for k, v in sets for a in ("--set", f"{k}={_yaml_scalar(v)}")]


def _sweep_data(case: Case) -> dict:
    base = _tpe({"train.lr": {"low": 1e-4, "high": 1e-2}}) if case.path[0] == "params" else _grid()
    return _applied(base, case)


def _grid(**extra) -> dict:
    return {"name": "fuzz", "kind": "grid", "base": str(BASE_CONFIG), "trial_cpus": 2,
            "arms": {"a": {}, "b": {"train.lr": 0.002}}, **extra}


def _tpe(params) -> dict:
    return {"name": "fuzz", "kind": "tpe", "base": str(BASE_CONFIG), "trial_cpus": 2, "params": params}


@st.composite
def bad_run_config(draw):
    """(YAML text, words that name the problem): a bad key or value anywhere in a run config."""
    data = _base_config()
    kind = draw(st.sampled_from(["unknown key", "bad value", "bad value", "bad value", "not a mapping"]))
    if kind == "unknown key":
        section = draw(st.sampled_from([None, "model", "search", "train", "runtime", "tracking"]))
        node = data if section is None else data.setdefault(section, {})
        key = "zz" + draw(st.from_regex(r"[a-z_]{1,8}", fullmatch=True))
        node[key] = draw(st.sampled_from([1, "x", [1], {"a": 1}, None]))
        return yaml.safe_dump(data), [f"{section}.{key}" if section else key]
    if kind == "bad value":
        case = draw(st.sampled_from(RUN_CASES))
        return yaml.safe_dump(_applied(data, case)), case.names()
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


#: the cases of the fields that also take "auto" or None: their bounds sit in a union's member
UNION_CASES = [c for c in RUN_CASES if len(RUN_FIELDS[c.path]) > 1]


@settings(FUZZ, max_examples=3 * EXAMPLES)
@given(st.data())
def test_field_values_by_set(data):
    """A derived bad value of any run-config field on the command line (``--set KEY=VALUE``),
    half of them of a field that also takes "auto" or None."""
    case = data.draw(st.sampled_from(UNION_CASES if data.draw(st.booleans()) else RUN_CASES))
    refused(["train", "--config", BASE_CONFIG, *_set_args(case)], *case.names())


@st.composite
def bad_sweep(draw):
    """(sweep spec, words that name the problem): a bad key or value anywhere, or a bad value at
    any place in a choices list or either end of a range."""
    kind = draw(st.sampled_from(["top key", "field", "field", "arm", "factor", "choice", "range"]))
    if kind == "top key":
        key = "zz" + draw(st.from_regex(r"[a-z_]{1,8}", fullmatch=True))
        return _grid(**{key: 1}), [key]
    if kind == "field":
        case = draw(st.sampled_from(SWEEP_CASES))
        return _sweep_data(case), case.names()
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
    ranges = {"train.lr": {"low": 1e-4, "high": 1e6, "log": True},
              "train.batch_size": {"low": 1, "high": 10**7, "integer": True},
              "runtime.eval_games": {"low": 1, "high": 10**9, "integer": True},
              "train.entropy_coef": {"low": -5, "high": 0.01}}
    return _tpe({key: ranges[key]}), [key]


@settings(FUZZ, max_examples=3 * EXAMPLES)
@given(bad_sweep())
def test_sweep_specs(spec):
    data, needles = spec
    path = WS.fresh("sweep.yaml")
    path.write_text(yaml.safe_dump(data))
    refused(["sweep", path], *needles)


# ----------------------------------------------------------------------------- every field, every value
def _refusal(fn, names) -> str:
    """``clean`` when ``fn()`` raises one ConfigError, on one line, naming one of ``names``; else what happened."""
    from yamblab.errors import ConfigError

    try:
        fn()
    except ConfigError as exc:
        text = str(exc)
        if "\n" in text:
            return f"more than one line: {text!r}"
        if not any(str(n).lower() in text.lower() for n in names):
            return f"does not name any of {names}: {text}"
        return "clean"
    except Exception as exc:         # noqa: BLE001 - what `yamblab train` would show as a traceback
        return f"traceback: {type(exc).__name__}: {exc}"
    return "accepted"


def test_every_run_config_field_refuses_every_derived_bad_value():
    """Not a sample: every case the fuzz tests above draw from, read as `yamblab train` reads a
    config (the file's mapping validated), is refused by one ConfigError line naming the field.
    (`yamblab train` prints that line as ``error: …`` with exit status 2: the fuzz tests.)"""
    from yamblab.training.configio import validate

    base, failures = _base_config(), []
    for c in RUN_CASES:
        if (verdict := _refusal(lambda: validate(RunConfig, _applied(base, c), "run.yaml"), c.names())) != "clean":
            failures.append(f"{c.key} = {c.value!r} {c.extra or ''}: {verdict}")
    assert not failures, f"{len(failures)} of {len(RUN_CASES)} bad values:\n" + "\n".join(failures)


def test_every_sweep_field_refuses_every_derived_bad_value(tmp_path):
    """The same for every field of a sweep spec, read by load_sweep (the spec, its base, every trial's config)."""
    from yamblab.sweeps.spec import load_sweep

    failures = []
    for i, c in enumerate(SWEEP_CASES):
        path = tmp_path / f"{i}.yaml"
        path.write_text(yaml.safe_dump(_sweep_data(c)))
        if (verdict := _refusal(lambda: load_sweep(path), c.names())) != "clean":
            failures.append(f"{c.key} = {c.value!r} {c.extra or ''}: {verdict}")
    assert not failures, f"{len(failures)} of {len(SWEEP_CASES)} bad values:\n" + "\n".join(failures)


def _unfuzzed(fields: dict, cases: list[Case], semantic: dict) -> tuple[list, dict]:
    """(fields with no bad value, {field: what of its type takes any value})."""
    cased = {c.path for c in cases}
    open_parts = {".".join(p): parts for p, m in fields.items()
                  if (parts := [x for x in _open_parts(m) if not (x == "any string" and ".".join(p) in semantic)])}
    return [".".join(p) for p in fields if p not in cased], open_parts


@pytest.mark.parametrize("which", ["run config", "sweep spec"])
def test_every_config_field_is_fuzzed(which):
    """Every field of every run-config section (and of a sweep spec) has derived bad values, and
    the only fields whose type lets a value through unchecked are ALLOWED_ANY_RUN's (_SWEEP's),
    for the reasons given there: a new field with an open end or a free string fails here until it
    gets bounds (or a SEMANTIC case, or a line in ALLOWED_ANY_* saying why it takes anything)."""
    fields, cases, semantic, allowed = {
        "run config": (RUN_FIELDS, RUN_CASES, SEMANTIC_RUN, ALLOWED_ANY_RUN),
        "sweep spec": (SWEEP_FIELDS, SWEEP_CASES, SEMANTIC_SWEEP, ALLOWED_ANY_SWEEP)}[which]
    no_case, open_parts = _unfuzzed(fields, cases, semantic)
    assert no_case == []
    assert not set(semantic) - {".".join(p) for p in fields}, "SEMANTIC cases of no field"
    assert open_parts == allowed
    if which == "run config":    # the fields that also take "auto" are fuzzed at both ends of their number
        auto = [p for p, m in fields.items() if any(x.kind == "literal" and "auto" in typing.get_args(x.tp) for x in m)]
        assert {".".join(p) for p in auto} >= {"runtime.workers", "runtime.learner_gpus", "runtime.worker_gpus"}
        for p in auto:
            values = {repr(c.value) for c in cases if c.path == p}
            assert {"nan", "inf", "-inf", "'Auto'", "'max'"} <= values and values & {"-1", "-1.0"}, (p, values)


def test_bounds_inside_a_union_are_found():
    """The derivation reads a bound wherever pydantic keeps it: on the field, or on one member of
    a union (``Annotated[int, Field(ge=1, le=4)] | Literal["auto"]``), with annotated_types' Interval too."""
    import annotated_types as at
    from pydantic import BaseModel, Field

    class M(BaseModel):
        workers: Annotated[int, Field(ge=1, le=4)] | Literal["auto"] = "auto"
        share: Annotated[float, at.Interval(ge=0.0, le=1.0)] | None = None
        budget: float | None = Field(None, gt=0.0)
        seed: int | Literal["auto"] = "auto"

    f = dict(_fields(M))

    def bad(name):
        return {v for v in _bad_values(f[(name,)]) if not isinstance(v, (list, dict))}

    assert {0, 5, -1, 2.5, "Auto", "max"} <= bad("workers")
    assert {-5e-324, 1.0000000000000002, -1.0, 2.0} <= bad("share")
    assert {0.0, -1.0} <= bad("budget") and not {v for v in bad("budget") if isinstance(v, float) and 0 < v < INF}
    assert {_open_parts(m)[0] if _open_parts(m) else "" for m in f.values()} == {
        "", "float with no upper bound", "int with no lower bound"}


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


def test_the_case_list_cites_tests_that_exist():
    missing = []
    for _, _, _, tests in CASE_CLASSES:
        for ref in tests:
            file, name = ref.split("::")
            if f"def {name}(" not in (ROOT / file).read_text():
                missing.append(ref)
    assert not missing


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
