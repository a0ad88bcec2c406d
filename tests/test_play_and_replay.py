import numpy as np
import pytest
from typer.testing import CliRunner

from yamblab.actors.replay import ReplayBuffer
from yamblab.errors import ConfigError, IllegalActionError
from yamblab.cli.main import app
from yamblab.cli.play import parse_move


def test_parse_move():
    assert parse_move("hold 134", 2) == 13 + 0b01101
    assert parse_move("h 5", 1) == 13 + 0b10000
    assert parse_move("reroll", 1) == 13
    assert parse_move("Full House", 0) == 8
    with pytest.raises(IllegalActionError, match="no rerolls left"):
        parse_move("hold 1", 0)
    with pytest.raises(IllegalActionError, match="positions 1..5"):
        parse_move("hold 16", 2)


def test_play_a_whole_game_by_following_hints():
    """Scripted play: always scoring the first legal box in order finishes the game and reports."""
    moves = "\n".join(["ones", "twos", "threes", "fours", "fives", "sixes", "3k", "4k", "fh", "ss",
                       "ls", "yahtzee", "chance"] * 3) + "\n"
    res = CliRunner().invoke(app, ["play", "--seed", "7"], input=moves)
    assert res.exit_code == 0, res.output
    assert "final score" in res.output and "given away" in res.output


def test_replay_buffer_is_bounded_fifo_and_restorable():
    buf = ReplayBuffer(5, seed=1)
    buf.add({"x": np.arange(3), "y": np.arange(3) * 10})
    buf.add({"x": np.arange(3, 7), "y": np.arange(3, 7) * 10})
    assert len(buf) == 5 and buf.added == 7
    assert buf.all()["x"].tolist() == [2, 3, 4, 5, 6]
    s = buf.sample(100)
    assert set(s["x"].tolist()) <= {2, 3, 4, 5, 6} and (s["y"] == s["x"] * 10).all()
    again = ReplayBuffer.from_state_dict(buf.state_dict())
    assert again.all()["x"].tolist() == [2, 3, 4, 5, 6] and again.added == 7
    assert (again.sample(10)["x"] == buf.sample(10)["x"]).all()
    with pytest.raises(ValueError, match="differ"):
        buf.add({"x": np.arange(2)})
    with pytest.raises(ConfigError):
        ReplayBuffer(0)
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(3).sample(1)
