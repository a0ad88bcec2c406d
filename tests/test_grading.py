import numpy as np
import pytest

from yamblab.agents.base import make_agent
from yamblab.errors import IllegalActionError, UnknownVariantError
from yamblab.games.yahtzee.rules import OFFICIAL
from yamblab.oracle.yahtzee.grading import grade
from yamblab.oracle.report import mean_ci
from yamblab.oracle.yahtzee.policy_eval import expected_score


def test_oracle_agent_has_zero_regret_and_optimal_mean(official_table):
    r = grade(make_agent("oracle", OFFICIAL, table=official_table), OFFICIAL, games=2000, seed=11,
              table=official_table)
    assert r.regret_mean == 0.0 and np.all(r.regrets == 0.0)
    assert r.ci[0] <= 254.5877 <= r.ci[1]
    assert 0.55 < r.upper_bonus_rate < 0.8


def test_greedy_simulation_agrees_with_exact_evaluation(official_table):
    exact = expected_score(np.zeros((4096, 3, 64)), OFFICIAL)
    r = grade(make_agent("greedy", OFFICIAL, table=official_table), OFFICIAL, games=3000, seed=2,
              table=official_table)
    assert r.ci[0] <= exact <= r.ci[1]
    # regrets add up to the shortfall from optimal play (much less noisy than scores)
    assert r.regret_ci[0] <= official_table.new_game_value - exact <= r.regret_ci[1]
    assert sum(r.regret_by_decision.values()) == pytest.approx(r.regret_mean, rel=1e-9)
    assert sum(r.regret_by_box.values()) == pytest.approx(r.regret_by_decision["box"], rel=1e-9)
    assert r.upper_bonus_rate < 0.1


def test_random_agent_is_legal_and_reproducible(official_table):
    a = grade(make_agent("random", OFFICIAL, seed=4), OFFICIAL, games=300, seed=4, table=official_table)
    b = grade(make_agent("random", OFFICIAL, seed=4), OFFICIAL, games=300, seed=4, table=official_table)
    assert (a.scores == b.scores).all() and a.regret_mean > 100


def test_chunks_do_not_change_results(official_table):
    agent = make_agent("greedy", OFFICIAL, table=official_table)
    a = grade(agent, OFFICIAL, games=50, seed=8, table=official_table, chunk=50)
    b = grade(agent, OFFICIAL, games=50, seed=8, table=official_table, chunk=7)
    assert (a.scores == b.scores).all() and np.allclose(a.regrets, b.regrets)


def test_mean_ci():
    m, lo, hi = mean_ci(np.array([1.0, 2.0, 3.0, 4.0]))
    assert m == 2.5 and lo < 2.5 < hi and hi - lo == pytest.approx(2 * 3.182446 * 0.645497, rel=1e-5)


def test_unknown_agent_and_illegal_agent(official_table):
    with pytest.raises(UnknownVariantError, match="unknown yahtzee agent"):
        make_agent("nobody", OFFICIAL)

    class Cheat:
        name = "cheat"

        def reset(self, batch):
            pass

        def act(self, batch):
            return np.zeros(batch.n, dtype=np.int64)      # Ones every turn

    with pytest.raises(IllegalActionError, match="Ones"):
        grade(Cheat(), OFFICIAL, games=5, seed=0, table=official_table)


def test_grade_decisions_matches_online_grader(official_table):
    """Decisions recorded during play and graded later get the same regrets as online grading."""
    from yamblab.games.yahtzee.engine import new_batch
    from yamblab.oracle.yahtzee.grading import Grader, grade_decisions

    agent = make_agent("random", OFFICIAL, seed=3)
    grader = Grader(official_table)
    batch = new_batch(40, OFFICIAL, seed=3)
    agent.reset(batch)
    recs, online = [], []
    while not batch.done.all():
        live = batch.turn < 13
        a = agent.act(batch)
        r, _ = grader.regrets(batch, a)
        recs.append((batch.boundary_states()[live], batch.roll_indices()[live], batch.rolls_left[live].copy(),
                     batch.hold_keeps()[live], a[live]))
        online.append(r[live])
        batch.step(a)
    cols = [np.concatenate(c) for c in zip(*recs)]
    later = grade_decisions(official_table, *cols)
    assert np.allclose(later, np.concatenate(online), atol=1e-9) and later.sum() > 0


def test_grade_json_holds_figures_rounded_to_what_they_mean():
    """No float arithmetic's last bits (p90 73.50000000000004, a rate 0.5550000071525574): every
    figure of `grade --json` has at most 4 decimals, and the decisions have the shared names."""
    import json

    from typer.testing import CliRunner

    from yamblab.cli.main import app

    res = CliRunner().invoke(app, ["grade", "--agent", "greedy", "--games", "40", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)

    def floats(x):
        if isinstance(x, float):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from floats(v)
        elif isinstance(x, list):
            for v in x:
                yield from floats(v)

    got = list(floats(out))
    assert len(got) > 10 and all(round(v, 4) == v for v in got), [v for v in got if round(v, 4) != v]
    assert list(out["regret_by_decision"]) == ["first keep", "second keep", "box"]
