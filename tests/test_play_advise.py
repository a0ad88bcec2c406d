"""``yamblab play`` takes keeps as ``advise`` names them (die values) and by position, ends every
game with its graded summary (Ctrl-D: status 0, Ctrl-C: 130); ``yamblab advise --game yamb``
ranks a single column exactly (the API's Yamb advice) and any other card by a bot or a network,
saying which in its header line."""

from __future__ import annotations

import re

import numpy as np
import pytest
from typer.testing import CliRunner

from yamblab.cli.main import app

runner = CliRunner()
SEED = 1
ROW = re.compile(r"^(.*?)\s+(-?\d+\.\d{4})\s+(-?\d+\.\d{4})$")


def _first_dice(seed: int = SEED) -> list[int]:
    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.games.yahtzee.rules import YahtzeeRules

    return [int(x) for x in new_batch(1, YahtzeeRules.parse("forced"), seed=seed).dice[0]]


def _play(moves: list[str]) -> "object":
    return runner.invoke(app, ["play", "--seed", str(SEED)], input="".join(m + "\n" for m in moves))


def _ranked(output: str) -> dict[str, tuple[float, float]]:
    """{action label: (value, loss)} from an ``advise`` table."""
    out = {}
    for line in output.splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
    return out


# ----------------------------------------------------------------------------- play
def test_keep_by_values_is_the_hold_of_the_same_dice_and_both_are_graded_alike():
    dice = _first_dice()
    face = max(set(dice), key=dice.count)
    positions = "".join(str(i + 1) for i, d in enumerate(dice) if d == face)
    keep = "keep " + " ".join([str(face)] * dice.count(face))
    by_value, by_position = _play([keep, "chance"]), _play([f"hold {positions}", "chance"])
    assert by_value.exit_code == 0 and by_position.exit_code == 0, by_value.output + by_position.output
    assert by_value.output == by_position.output      # the same move, the same dice after it, the same grade
    # the dice after the reroll are the engine's for that hold: the held faces stay put
    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.games.yahtzee.rules import YahtzeeRules

    b = new_batch(1, YahtzeeRules.parse("forced"), seed=SEED)
    b.step(np.array([13 + sum(1 << (int(p) - 1) for p in positions)]))
    assert f"dice {' '.join(map(str, b.dice[0]))}   (positions 1 2 3 4 5) · rerolls left 1" in by_value.output


def test_a_keep_of_values_not_showing_is_refused_naming_what_was_typed():
    dice = _first_dice()
    absent = next(f for f in range(1, 7) if f not in dice)
    present = dice[0]
    typed_absent = f"keep {absent} {absent}"
    typed_short = "keep " + " ".join([str(present)] * (dice.count(present) + 1))
    res = _play([typed_absent, typed_short, "keep 5 5 5 5 5 5", "fives please", "reroll", "chance"])
    assert res.exit_code == 0, res.output
    assert f"'{typed_absent}': no {absent} is showing (dice {' '.join(map(str, dice))})" in res.output
    assert f"'{typed_short}': only " in res.output and "showing, not" in res.output
    assert "'fives please' is not a move" in res.output
    assert "unknown box" not in res.output
    # the refused keeps cost nothing: the game went on with the reroll, then Chance
    assert res.output.count("\nturn 1/13") == 2 and "turn 2/13" in res.output


def test_the_type_line_is_not_advice_and_the_hint_is_in_the_same_words():
    res = runner.invoke(app, ["play", "--seed", str(SEED), "--hints"], input="?\n")
    assert res.exit_code == 0, res.output
    assert "type a move as: keep 5 5 5 (die values), hold 134 (positions), box fours, or ? for help" in res.output
    hint = next(line for line in res.output.splitlines() if line.startswith("hint: "))
    assert re.fullmatch(r"hint: (score .+|reroll all|keep all \(reroll nothing\)|keep [1-6 ]+ \(hold [1-5]+\))", hint)
    assert "keep dice by value" in res.output           # the help of '?'
    # what the hint says can be typed back as it is
    from yamblab.cli.play import parse_move

    parse_move(hint[len("hint: "):], 2, _first_dice())


def test_end_of_input_mid_game_prints_the_summary_and_exits_0():
    res = _play(["reroll", "reroll", "chance", "keep"])        # turn 2 left after its first keep
    assert res.exit_code == 0, res.output
    tail = res.output[res.output.index("end of input (Ctrl-D)"):]
    assert "game left at turn 2/13, rerolls left 1" in tail
    assert re.search(r"score so far \d+ · expected points given away \d+\.\d\d", tail)
    assert re.search(r"given away by decision: first keep \d+\.\d\d · second keep \d+\.\d\d · box \d+\.\d\d · "
                     r"4 decisions, \d perfect", tail)
    assert "optimal play from here would average a final score of" in tail
    assert "aborted" not in res.output


def test_ctrl_c_prints_the_summary_and_exits_130(monkeypatch):
    moves = iter(["keep", "chance"])

    def read(prompt):
        try:
            return next(moves)
        except StopIteration:
            raise KeyboardInterrupt from None

    monkeypatch.setattr("yamblab.cli.play._read", read)
    res = runner.invoke(app, ["play", "--seed", str(SEED)])
    assert res.exit_code == 130, res.output
    assert "interrupted (Ctrl-C): game left at turn 2/13" in res.output
    assert "2 decisions" in res.output and "given away by decision" in res.output


def test_a_finished_game_ends_with_the_same_summary():
    moves = ["ones", "twos", "threes", "fours", "fives", "sixes", "3k", "4k", "fh", "ss", "ls", "yahtzee", "chance"]
    res = _play(moves)
    assert res.exit_code == 0, res.output
    assert "final score" in res.output and "given away by decision: first keep 0.00 · second keep 0.00" in res.output
    assert "13 decisions" in res.output


# ----------------------------------------------------------------------------- advise --game yamb
def test_advise_a_single_yamb_column_is_exact():
    from yamblab.oracle.yamb.column import ColumnOracle

    args = ["advise", "--game", "yamb", "--preset", "croatian", "--columns", "down", "--card", "ones=3,twos=6",
            "--dice", "3,1,3,2,3", "--rolls-left", "1", "--top", "0"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    header = res.output.splitlines()[0]
    assert "croatian[down]" in header and "roll 2 of 3" in header and "exactly" in header and "oracle" in header
    ranked = _ranked(res.output)
    oracle = ColumnOracle("croatian", "down")
    scores = [3, 6] + [-1] * 11
    q = oracle.action_values(scores, [3, 1, 3, 2, 3], 2)
    so_far = 9
    assert ranked["score Threes"][0] == pytest.approx(so_far + q["score"], abs=1e-4)
    assert ranked["keep 3 3 3"][0] == pytest.approx(so_far + q[f"hold:{0b10101}"], abs=1e-4)
    assert min(loss for _, loss in ranked.values()) == 0.0


def test_advise_a_yamb_card_by_a_bot_says_which_in_its_header():
    from yamblab.games.yamb.rules import get_preset
    from yamblab.games.yamb.scoring import row_score

    res = runner.invoke(app, ["advise", "--game", "yamb", "--dice", "6,6,6,6,2", "--rolls-left", "0",
                              "--card", "down/ones=3,free/yamb=80", "--agent", "greedy", "--top", "0"])
    assert res.exit_code == 0, res.output
    header = res.output.splitlines()[0]
    assert "croatian[down,up,free,announce]" in header and "points so far 83" in header
    assert "greedy bot" in header and "no exact oracle" in header
    ranked = _ranked(res.output)
    # greedy values a box by the points it adds now
    assert ranked["score free/Sixes"][0] == row_score(get_preset("croatian"), "sixes", [6, 6, 6, 6, 2])
    assert ranked["score free/Poker"][0] == row_score(get_preset("croatian"), "poker", [6, 6, 6, 6, 2])
    assert not any(label.startswith("keep") for label in ranked)           # no roll left
    default = runner.invoke(app, ["advise", "--game", "yamb", "--dice", "1,1,3,4,6"])
    assert default.exit_code == 0 and "heuristic bot" in default.output.splitlines()[0]


def test_advise_a_yamb_card_by_a_network(tmp_path):
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.model.config import ModelConfig

    state = Learner(ModelConfig.preset("tiny"), TrainConfig()).state_dict()
    path = save_checkpoint(tmp_path / "c.pt", {**state, "config": "game: yamb\npreset: croatian\n"})
    res = runner.invoke(app, ["advise", "--game", "yamb", "--dice", "1,1,3,4,6", "--checkpoint", str(path)])
    assert res.exit_code == 0, res.output
    assert "full-turn search on the network of" in res.output.splitlines()[0]
    assert all(v >= 0 for v, _ in _ranked(res.output).values())


@pytest.mark.parametrize("args,named", [
    (["--game", "yamb", "--columns", "down", "--agent", "heuristic"], "--agent"),
    (["--game", "yamb", "--rules", "forced"], "--rules"),
    (["--preset", "croatian"], "--preset"),
    (["--agent", "greedy"], "--agent"),
    (["--game", "yamb", "--agent", "random"], "random"),
    (["--game", "yamb", "--card", "ones=3"], "ones=3"),
    (["--game", "yamb", "--card", "down/twos=4"], "Twos"),
    (["--game", "yamb", "--card", "down/ones=7"], "ones=7"),
    (["--game", "yamb", "--columns", "down", "--card", "ones=x"], "ones=x"),
    (["--game", "yamb", "--rolls-left", "3"], "--rolls-left"),
    (["--rolls-left", "3"], "--rolls-left"),
])
def test_advise_refuses_what_does_not_apply_by_name(args, named):
    res = runner.invoke(app, ["advise", "--dice", "1,1,3,4,6", *args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], res.stderr
    assert not res.stdout.strip()
