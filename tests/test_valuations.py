"""Rules of thumb (the Best Values post): formulas against their definition, exact scores, breakdown, CLI."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from yamblab.games.yahtzee.rules import OFFICIAL, BoundaryState, reachable_upper_totals
from yamblab.oracle.yahtzee.policy_eval import expected_score
from yamblab.rules_of_thumb.valuations import RuleOfThumb, fit_additive, named_rule, split_stages


def _random_states(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        filled = int(rng.integers(0, 1 << 13))
        ups = sorted(reachable_upper_totals(filled & 0x3F))
        upper = int(rng.choice(ups))
        fifty = bool((filled >> 11) & 1) and bool(rng.integers(0, 2))
        out.append(BoundaryState(filled=filled, upper=upper, yahtzee_fifty=fifty))
    return out


def _by_definition(rule: RuleOfThumb, s: BoundaryState) -> float:
    """The module note's formula, written out for one state."""
    if s.is_terminal:
        return 0.0
    k = rule.bins
    stage = s.n_filled
    b = min(stage * k // 13, k - 1)
    rows = rule.box_values if k > 1 else [rule.box_values]
    size = rule.bonus_size[b] if isinstance(rule.bonus_size, list) else rule.bonus_size
    flag = rule.yahtzee_flag[b] if isinstance(rule.yahtzee_flag, list) else rule.yahtzee_flag
    v = sum(rows[b][box] for box in range(13) if s.is_open(box))
    margin = s.upper + sum(3 * (f + 1) for f in range(6) if s.is_open(f)) - 63
    if s.upper < 63:
        if rule.bonus == "step":
            v += size * (margin >= 0)
        elif rule.bonus == "ramp":
            v += size * min(1.0, max(0.0, rule.ramp_mid + margin / rule.ramp_slope))
    return v + flag * s.yahtzee_fifty


@pytest.mark.parametrize("bonus", ["none", "step", "ramp"])
def test_rule_tables_match_the_definition(bonus):
    rng = np.random.default_rng(1)
    rule = RuleOfThumb(box_values=[list(rng.uniform(0, 30, 13)) for _ in range(3)], bonus=bonus,
                       bonus_size=[30.0, 35.0, 40.0], ramp_slope=11.0, ramp_mid=0.4, yahtzee_flag=[5.0, 9.0, 20.0])
    W = rule.table(OFFICIAL)
    for s in _random_states(400):
        assert W[s.mask12(), s.ystate, s.upper] == pytest.approx(_by_definition(rule, s), abs=1e-9)


def test_parameters_round_trip_and_count():
    rule = named_rule("tuned-ramp")
    assert rule.n_params == 17                      # 13 boxes, size, slope, midpoint, flag
    assert rule.with_vector(rule.vector()) == rule
    staged = split_stages(rule, 3)
    assert staged.n_params == 3 * 15 + 2
    assert np.array_equal(staged.table(), rule.table())   # same valuation before tuning
    x = staged.vector()
    x[0] += 1.0
    assert staged.with_vector(x).box_values[0][0] == staged.box_values[0][0] + 1.0
    with pytest.raises(ValueError):
        RuleOfThumb(box_values=[1.0] * 12)


def test_fit_recovers_a_formula_exactly():
    rng = np.random.default_rng(2)
    truth = RuleOfThumb(box_values=list(rng.uniform(0, 30, 13)), bonus="ramp", bonus_size=33.0,
                        ramp_slope=12.0, ramp_mid=0.5, yahtzee_flag=7.0)
    target = truth.table() + 5.0                  # a constant never changes a decision
    weights = rng.uniform(0, 1, target.shape)
    fitted, rms = fit_additive(target, weights, stages=1)
    assert rms < 1e-8
    assert np.allclose(fitted.vector(), truth.vector(), atol=1e-6)


@pytest.mark.slow
def test_best_values_hand_built_rules():
    # the Best Values post's figures, to the digits it prints (means rounded to two decimals, named_rule)
    assert round(expected_score(named_rule("zero").table()), 2) == 217.38
    assert round(expected_score(named_rule("average").table()), 2) == 235.00
    assert round(expected_score(named_rule("average-step").table()), 2) == 232.32
    assert round(expected_score(named_rule("average-ramp").table()), 2) == 243.20


@pytest.mark.slow
def test_stage_constants_do_not_change_optimal_play(official_table):
    # every turn ends on states of one stage: adding a constant per stage leaves the agent optimal
    stage = np.array([bin(m).count("1") for m in range(4096)])[:, None, None] + (np.arange(3) > 0)[None, :, None]
    W = np.nan_to_num(official_table.values) + 17.0 * stage
    assert expected_score(W) == pytest.approx(official_table.new_game_value, abs=1e-9)
    assert round(expected_score(W), 4) == 254.5877


@pytest.mark.slow
def test_exact_breakdown_agrees_with_sampled_grading(official_table):
    from yamblab.agents.yahtzee_agents import TurnPerfectAgent
    from yamblab.oracle.yahtzee.grading import grade
    from yamblab.rules_of_thumb.occupancy import forward_occupancy

    W = named_rule("average").table()
    occ = forward_occupancy(W, OFFICIAL, oracle=official_table.values)
    rep = grade(TurnPerfectAgent(W, OFFICIAL, name="average"), OFFICIAL, games=1500, seed=3, table=official_table)
    assert rep.regret_ci[0] <= occ.regret <= rep.regret_ci[1]
    assert rep.ci[0] <= occ.expected_score <= rep.ci[1]
    half = (rep.regret_ci[1] - rep.regret_ci[0]) / 2
    for k, v in occ.regret_by_decision.items():
        assert abs(rep.regret_by_decision[k] - v) < 1.5 * half, k
    assert occ.regret == pytest.approx(official_table.new_game_value - expected_score(W), abs=1e-9)


@pytest.mark.slow
def test_exact_network_score_of_a_perfect_network(official_table):
    from yamblab.model.exact_score import exact_network_score

    V = np.nan_to_num(official_table.values)

    class OracleNet:
        """Reads the card back from the encoding and answers the oracle's value."""

        def predict_value(self, enc, chunk):
            filled = enc.columns[:, 0, :13, 0] > 0.5
            mask12 = (filled[:, :11] * (1 << np.arange(11))).sum(1) + filled[:, 12] * (1 << 11)
            yscore = np.round(enc.columns[:, 0, 11, 1] * 1000) > 0
            ys = np.where(filled[:, 11], np.where(yscore, 2, 1), 0)
            up = np.minimum(np.round(enc.column_features[:, 0, 0] * 60).astype(int), 63)
            return V[mask12, ys, up]

    out = exact_network_score(OracleNet(), OFFICIAL, oracle_value=official_table.new_game_value)
    assert out["exact_regret"] == pytest.approx(0.0, abs=1e-9)
    assert out["states_valued"] == 536_448 - 128


def test_cli_refuses_bad_valuations(tmp_path):
    from yamblab.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["oracle", "evaluate", "--valuation", "nonsense"])
    assert res.exit_code == 2 and "error: --valuation: unknown valuation 'nonsense'" in res.output
    res = runner.invoke(app, ["oracle", "evaluate", "--valuation", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and res.output.startswith("error:") and "no valuation file" in res.output
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"box_values": [1, 2, 3]}))
    res = runner.invoke(app, ["oracle", "evaluate", "--valuation", str(bad)])
    assert res.exit_code == 2 and "not a rule of thumb" in res.output
    res = runner.invoke(app, ["valuation", "tune", "--method", "sgd"])
    assert res.exit_code == 2 and res.output.startswith("error:") and "unknown method" in res.output


@pytest.mark.slow
def test_cli_evaluates_a_rule_file_with_breakdown(tmp_path):
    from yamblab.cli.main import app

    f = tmp_path / "ramp.json"
    f.write_text(named_rule("average-ramp").model_dump_json())
    res = CliRunner().invoke(app, ["oracle", "evaluate", "--valuation", str(f), "--breakdown", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert round(out["exact_score"], 2) == 243.20
    assert sum(out["regret_by_decision"].values()) == pytest.approx(out["exact_regret"], abs=1e-8)


# ---- tuning: the Best Values post's target, the richer formula, the samplers, MLflow ------

@pytest.mark.slow
def test_tuned_rules_pass_best_values():
    from yamblab.rules_of_thumb.occupancy import forward_occupancy

    ramp = named_rule("tuned-ramp")
    assert ramp.n_params == 17
    s_ramp = expected_score(ramp.table())
    assert s_ramp >= 251.82                          # the post's tuned ramp: 251.82
    assert round(s_ramp, 4) == 251.8267
    staged = named_rule("staged-ramp")
    assert staged.n_params == 47 and staged.bins == 3
    W = staged.table()
    s_staged = expected_score(W)
    assert s_staged > s_ramp + 0.5
    assert round(s_staged, 4) == 252.3425
    # the forward pass adds up the same score along another road (visit probabilities)
    assert forward_occupancy(W).expected_score == pytest.approx(s_staged, abs=1e-7)


def _quadratic(target):
    """A cheap stand-in for the exact score: its maximum, 250, is at ``target``."""
    return lambda rule: 250.0 - float(np.sum((rule.vector() - target) ** 2))


def test_coordinate_descent_reaches_a_known_optimum():
    from yamblab.rules_of_thumb.tuning import coordinate_descent

    start = named_rule("tuned-ramp")
    target = start.vector().copy()
    target[[0, 5, 13, 16]] += [2.0, -1.5, 3.0, -0.5]        # on the lattice of steps 2 .. 0.25
    seen = []
    res = coordinate_descent(start, step=2.0, min_step=0.25, max_evals=500,
                             on_trial=lambda n, s, r: seen.append((n, s)), score=_quadratic(target))
    assert res.best_score == pytest.approx(250.0, abs=1e-12)
    assert np.allclose(res.best.vector(), target)
    assert [n for n, _ in seen] == list(range(len(res.scores)))
    assert res.scores[0] == pytest.approx(250.0 - 15.5)


def test_optuna_search_starts_from_the_start_and_improves():
    from yamblab.rules_of_thumb.tuning import optuna_search

    start = named_rule("tuned-ramp")
    target = start.vector() + 1.0
    res = optuna_search(start, trials=40, radius=2.0, sampler="tpe", seed=1, score=_quadratic(target))
    assert len(res.scores) == 40
    assert res.scores[0] == pytest.approx(250.0 - 17.0)          # the start is the first trial
    assert res.best_score == max(res.scores) > res.scores[0]
    lo, hi = start.vector() - 2.0, start.vector() + 2.0
    v = res.best.vector()
    assert np.all(v[:15] >= lo[:15]) and np.all(v[:15] <= hi[:15])
    with pytest.raises(ValueError, match="unknown sampler"):
        optuna_search(start, trials=1, sampler="sgd", score=_quadratic(target))


def test_cmaes_search_starts_from_the_start_and_improves():
    from yamblab.rules_of_thumb.tuning import optuna_search

    start = named_rule("tuned-ramp")
    target = start.vector() + 2.5
    res = optuna_search(start, trials=150, radius=4.0, sampler="cmaes", seed=1, score=_quadratic(target))
    assert len(res.scores) == 150
    assert res.scores[0] == pytest.approx(250.0 - 17 * 2.5 ** 2)   # the start is the first trial
    assert res.best_score == max(res.scores) > res.scores[0] + 20.0
    # CMA-ES moves its mean towards the optimum: the last trials beat the first generation
    assert np.mean(res.scores[-10:]) > np.mean(res.scores[1:11])


def _mlflow_run(uri, experiment):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    return client, run, arts


def test_cli_optuna_study_is_logged_to_mlflow(tmp_path):
    from yamblab.cli.main import app

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "best.json"
    # without the upper bonus a trial is one lane per state: a few seconds for the whole study
    res = CliRunner().invoke(app, ["valuation", "tune", "--method", "tpe", "--trials", "3", "--radius", "1",
                                   "--rules", "forced,no-upper-bonus", "--tracking-uri", uri, "--out", str(out)])
    assert res.exit_code == 0, res.output
    client, run, arts = _mlflow_run(uri, "valuation-tuning")
    assert run.info.status == "FINISHED"
    scores = [m.value for m in client.get_metric_history(run.info.run_id, "score")]
    assert len(scores) == 3
    assert run.data.metrics["final_best_score"] == pytest.approx(max(scores))
    assert run.data.params["method"] == "tpe" and "best.bonus_size" in run.data.params
    assert {"score_vs_trials.png", "best_rule.json"} <= arts
    best = json.loads(out.read_text())
    assert RuleOfThumb.model_validate(best).n_params == 17
    # the start is the first trial: its score is the named rule's exact score
    from yamblab.games.yahtzee.rules import YahtzeeRules

    rules = YahtzeeRules.parse("forced,no-upper-bonus")
    assert scores[0] == pytest.approx(expected_score(named_rule("tuned-ramp").table(rules), rules), abs=1e-9)


def test_cli_refuses_step_with_optuna_and_a_plot_that_is_not_png(tmp_path):
    from yamblab.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["valuation", "tune", "--method", "tpe", "--step", "1", "--trials", "1"])
    assert res.exit_code == 2 and "--step" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["valuation", "breakdown", "-v", "zero", "--plot", str(tmp_path / "p.txt")])
    assert res.exit_code == 2 and "PNG" in res.output
    res = runner.invoke(app, ["valuation", "breakdown", "-v", "zero", "-v", "nonsense"])
    assert res.exit_code == 2 and "unknown valuation 'nonsense'" in res.output


def test_cli_breakdown_plot_of_several_valuations(tmp_path):
    from yamblab.games.yahtzee.rules import YahtzeeRules
    from yamblab.oracle.yahtzee.table import OracleTable
    from yamblab.cli.main import app

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    png = tmp_path / "breakdown.png"
    res = CliRunner().invoke(app, ["valuation", "breakdown", "-v", "zero", "-v", "oracle",
                                   "--rules", "forced,no-upper-bonus", "--plot", str(png),
                                   "--tracking-uri", uri, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert list(out) == ["zero", "oracle"]
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    client, run, arts = _mlflow_run(uri, "valuations")
    assert {"breakdown.png", "breakdown.json"} <= arts
    rules = YahtzeeRules.parse("forced,no-upper-bonus")
    table = OracleTable.get(rules)
    assert out["oracle"]["regret"] == pytest.approx(0.0, abs=1e-9)
    assert run.data.metrics["oracle.exact_score"] == pytest.approx(table.new_game_value, abs=1e-9)
    assert run.data.metrics["zero.regret.first_keep"] == pytest.approx(out["zero"]["regret_by_decision"]["first keep"])
    # greedy's regrets add up to its shortfall computed by the backward pass
    assert out["zero"]["regret"] == pytest.approx(
        table.new_game_value - expected_score(np.zeros((4096, 3, 64)), rules), abs=1e-9)
    assert sum(out["zero"]["regret_by_box"].values()) == pytest.approx(out["zero"]["regret_by_decision"]["box"])


def test_breakdown_figure_needs_regrets():
    from yamblab.games.yahtzee.rules import YahtzeeRules
    from yamblab.rules_of_thumb.occupancy import forward_occupancy
    from yamblab.rules_of_thumb.plots import breakdown_figure

    rules = YahtzeeRules.parse("forced,no-upper-bonus")
    occ = forward_occupancy(np.zeros((4096, 3, 64)), rules, turns=1)
    with pytest.raises(ValueError, match="without the oracle"):
        breakdown_figure({"zero": occ})
    with pytest.raises(ValueError, match="no valuations"):
        breakdown_figure({})


def test_cli_evaluates_a_checkpoint(tmp_path):
    from yamblab.games.yahtzee.rules import YahtzeeRules
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import load_network, save_checkpoint
    from yamblab.model.config import ModelConfig
    from yamblab.model.exact_score import network_table
    from yamblab.cli.main import app

    path = save_checkpoint(tmp_path / "run" / "checkpoint.pt",
                           {**Learner(ModelConfig.preset("tiny"), TrainConfig()).state_dict(),
                            "config": "game: yahtzee\nrules: forced,no-upper-bonus\n"})
    refused = CliRunner().invoke(app, ["oracle", "evaluate", "--valuation", str(path), "--rules", "forced"])
    assert refused.exit_code != 0 and "learned yahtzee forced,no-upper-bonus" in refused.output
    args = ["oracle", "evaluate", "--valuation", str(path), "--rules", "forced,no-upper-bonus", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rules = YahtzeeRules.parse("forced,no-upper-bonus")
    W, n = network_table(load_network(path), rules)
    assert out["states_valued"] == n == 4096 * 3 - 2
    assert out["exact_score"] == pytest.approx(expected_score(W, rules), abs=1e-9)
    assert 0 < out["exact_score"] < out["optimal"]        # an untrained network is not optimal
    assert out["exact_regret"] == pytest.approx(out["optimal"] - out["exact_score"], abs=1e-9)
