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


def test_policy_share_fixes_the_policy_positions_share_of_a_draw():
    """With ``policy_share`` the batch holds exactly that share (rounded) of positions with a
    decision, each kind drawn among the buffer's current positions of that kind only."""
    buf = ReplayBuffer(100, seed=3)
    has_p = np.zeros(120, bool)
    has_p[::10] = True                                    # 10 % carry a policy target
    buf.add({"x": np.arange(120), "has_policy": has_p})   # the oldest 20 dropped
    live = set(range(20, 120))
    s = buf.sample(1000, policy_share=0.25)
    assert int(s["has_policy"].sum()) == 250
    assert set(s["x"][s["has_policy"]].tolist()) <= {x for x in live if x % 10 == 0}
    assert set(s["x"][~s["has_policy"]].tolist()) <= {x for x in live if x % 10}
    assert (s["has_policy"] == (s["x"] % 10 == 0)).all()
    uniform = buf.sample(20000)
    assert abs(uniform["has_policy"].mean() - 0.10) < 0.01    # without a share: the buffer's own
    only_values = ReplayBuffer(10, seed=0)
    only_values.add({"x": np.arange(4), "has_policy": np.zeros(4, bool)})
    assert len(only_values.sample(8, policy_share=0.5)["x"]) == 8     # one kind: all from it
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="policy_share"):
            buf.sample(4, policy_share=bad)
    plain = ReplayBuffer(3)
    plain.add({"x": np.arange(2)})
    with pytest.raises(ValueError, match="has_policy"):
        plain.sample(2, policy_share=0.5)
