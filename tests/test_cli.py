import json

import pytest

from typer.testing import CliRunner

from yamblab.cli.main import app

runner = CliRunner()


def test_oracle_build_prints_value():
    res = runner.invoke(app, ["oracle", "build", "--rules", "forced"])
    assert res.exit_code == 0, res.output
    assert "254.5877" in res.output


def test_advise_ranks():
    res = runner.invoke(app, ["advise", "--dice", "6,6,6,6,6", "--rolls-left", "0", "--card", "sixes=24"])
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[1]
    assert first.startswith("score Yahtzee")


def test_grade_json():
    res = runner.invoke(app, ["grade", "--agent", "oracle", "--games", "50", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["regret_mean"] == 0.0 and d["games"] == 50


def test_user_mistakes_exit_2_without_traceback():
    cases = [
        ["advise", "--dice", "1,2,3,4,7"],
        ["advise", "--dice", "1,2,3,4,5", "--card", "ones=7"],
        ["advise", "--dice", "1,2,3,4,5", "--card", "sevens=7"],
        ["oracle", "build", "--rules", "strict"],
        ["grade", "--agent", "nobody", "--games", "3"],
        ["grade", "--game", "chess"],
        ["grade", "--game", "yamb", "--rules", "free"],                     # a Yahtzee option
        ["grade", "--preset", "croatian"],                                  # a Yamb option
        ["grade", "--game", "yamb", "--columns", "free,free"],
        ["grade", "--game", "yamb", "--columns", "hand"],                   # not on the croatian card
        ["grade", "--game", "yamb", "--agent", "oracle"],                   # four columns: no oracle
        ["grade", "--agent", "greedy", "--valuation", "oracle"],            # not a search option
        ["grade", "--agent", "search", "--depth", "one_step", "--valuation", "oracle"],
        ["grade", "--agent", "search", "--valuation", "missing.pt"],
        ["grade", "--agent", "random", "--checkpoint", "missing.pt"],
        ["grade", "--versus", "greedy"],                                    # Yahtzee has its oracle
        ["grade", "--game", "yamb", "--columns", "free", "--versus", "greedy"],
        ["grade", "--game", "yamb", "--versus", "nobody"],
    ]
    for args in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert "error:" in res.output and "Traceback" not in res.output


def test_grade_a_yamb_card_against_the_bot_named_on_the_same_dice():
    res = runner.invoke(app, ["grade", "--game", "yamb", "--agent", "heuristic", "--versus", "greedy",
                              "--games", "4", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["baseline_agent"] == "greedy"
    # the paired difference is the difference of the two agents' mean scores on the same dice
    assert d["diff_mean"] == pytest.approx(d["mean"] - d["baseline_mean"], abs=1e-9)
    assert d["diff_ci"][0] <= d["diff_mean"] <= d["diff_ci"][1]


def test_grade_yamb_column_with_the_oracle_search_has_zero_regret():
    res = runner.invoke(app, ["grade", "--game", "yamb", "--columns", "down", "--agent", "search",
                              "--valuation", "oracle", "--games", "20", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["regret_mean"] == 0.0 and d["game"] == "yamb" and d["rules"] == "croatian[down]"


def test_grade_yamb_card_is_paired_with_the_heuristic():
    res = runner.invoke(app, ["grade", "--game", "yamb", "--agent", "greedy", "--games", "20", "--endgame", "0"])
    assert res.exit_code == 0, res.output
    assert "vs heuristic" in res.output and "no exact oracle" in res.output and "endgame" not in res.output


def test_column_optima_is_an_option_of_a_yamb_card_only():
    for args in (["grade", "--column-optima", "--games", "2"],
                 ["grade", "--game", "yamb", "--columns", "down", "--column-optima", "--games", "2"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "--column-optima reports the columns of a Yamb card" in res.output
        assert "Traceback" not in res.output


def test_help_config_prints_every_training_setting_once_by_block():
    """``yamblab train --help-config``: every TrainConfig setting once, under its block, with its
    default and a line of help; nothing is run."""
    import re

    from yamblab.learners.config import BLOCKS, TrainConfig
    from yamblab.training.config import RUNTIME_BLOCKS, RuntimeConfig

    r = runner.invoke(app, ["train", "--help-config"])
    assert r.exit_code == 0, r.output
    named = re.findall(r"^  train\.(\w+): (.*)$", r.output, re.M)
    assert sorted(n for n, _ in named) == sorted(TrainConfig.model_fields)
    assert dict(named)["lr"] == "0.001" and dict(named)["init_from"] == "null" and dict(named)["kl_targets"] == "true"
    runtime = re.findall(r"^  runtime\.(\w+): (.*)$", r.output, re.M)
    assert sorted(n for n, _ in runtime) == sorted(RuntimeConfig.model_fields)
    heads = re.findall(r"^(\w+) / (\w[\w ]*): ", r.output, re.M)
    assert heads == [("train", b) for b in BLOCKS] + [("runtime", b) for b in RUNTIME_BLOCKS]
    assert all(TrainConfig.model_fields[n].description for n, _ in named)
    assert all(RuntimeConfig.model_fields[n].description for n, _ in runtime)


def test_grade_help_names_every_registered_agent_of_each_game():
    """The --agent help is written by hand (building the registry would slow every command's
    start): it must list exactly each game's registered agents."""
    import inspect
    import re

    from yamblab.agents.base import agent_names
    from yamblab.cli.grade import grade
    from yamblab.games.protocol import GAMES

    help_text = " ".join(inspect.signature(grade).parameters["agent"].default.help.split())
    for game, entry in GAMES.items():
        listed = re.search(rf"{entry.label}: ([^;.]+)", help_text).group(1)
        names = sorted(re.sub(r"\([^)]*\)", "", listed).replace(",", " ").split())
        assert names == agent_names(game), (game, listed)
