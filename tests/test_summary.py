"""The end-of-run summary: last regrets, minutes and positions to each threshold, relapses."""

import math

import numpy as np
import pytest

from yamblab.training.config import EXACT_MODE
from yamblab.training.summary import format_summary, regret_series, run_summary


def _ev(minutes, positions, exact, sampled=None, policy=None, loss="regret"):
    modes = {EXACT_MODE: {"per_game_regret": [exact], "loss": EXACT_MODE}} if exact is not None else {}
    if policy is not None:
        modes["none"] = {"per_game_regret": [policy - 1, policy + 1], "loss": "regret"}
    return {"minutes": minutes, "positions": positions, "loss": loss, "modes": modes,
            "per_game_regret": [sampled if sampled is not None else 9.0] * 4}


def test_thresholds_are_timed_at_their_first_crossing_and_a_relapse_is_named():
    evals = [_ev(2.0, 1000, 11.2, policy=36), _ev(4.5, 2000, 1.9, policy=18), _ev(6.8, 3000, 0.9, policy=13),
             _ev(9.0, 4000, 4.3, policy=10), _ev(13.0, 5000, 0.45, sampled=0.5, policy=7)]
    s = run_summary(evals)
    assert s["summary.exact_regret"] == 0.45 and s["summary.regret"] == 0.5
    assert s["summary.policy_regret"] == 7.0                   # the mean of the policy mode's games
    assert (s["summary.minutes_to_2"], s["summary.positions_to_2"]) == (4.5, 2000.0)
    assert s["summary.minutes_to_1"] == 6.8 and s["summary.minutes_to_0_5"] == 13.0
    assert "summary.minutes_to_0_2" not in s                   # never reached
    assert s["summary.worst_after_2"] == 4.3 and s["summary.relapsed"] == 1.0
    text = format_summary(s)
    assert "≤1 at 6.8 min (3,000 positions)" in text and "a relapse" in text
    assert "exact full-turn regret 0.45; regret 0.50; policy head alone 7.00" in text


def test_no_relapse_and_the_played_regret_when_no_exact_mode():
    evals = [_ev(1.0, 10, None, sampled=3.0), _ev(2.0, 20, None, sampled=1.5), _ev(3.0, 30, None, sampled=2.9)]
    name, series = regret_series(evals)
    assert name == "regret" and [r for _, _, r in series] == [3.0, 1.5, 2.9]
    s = run_summary(evals)
    assert s["summary.relapsed"] == 0.0 and s["summary.worst_after_2"] == 2.9
    assert "summary.exact_regret" not in s and s["summary.minutes_to_2"] == 2.0
    assert "no relapse" in format_summary(s)


def test_a_run_graded_against_a_bot_has_no_thresholds():
    evals = [_ev(1.0, 10, None, sampled=-40.0, loss="vs_baseline")]
    s = run_summary(evals)
    assert regret_series(evals)[1] == [] and not any(k.startswith("summary.minutes_to") for k in s)
    assert "summary.regret" not in s and format_summary(s) == ""
    assert run_summary([]) == {} and math.isclose(s["summary.minutes"], 1.0)


def test_seed_curves_reads_each_mark_from_the_last_evaluation_before_it(benchmark_module):
    """benchmarks/seed_curves.py: a mark takes the last evaluation at or before it, nothing
    before the first evaluation or past a run's end, and the policy head alone's own series."""
    sc = benchmark_module("seed_curves")
    evals = [_ev(2.0, 1000, 11.2, policy=36), _ev(4.5, 2000, 1.9, policy=18), _ev(6.8, 3000, 0.9, policy=13)]
    head, policy = sc.series(evals, "headline"), sc.series(evals, "policy")
    assert head.shape == (3, 3) and head[:, 2].tolist() == [11.2, 1.9, 0.9]
    assert policy[:, 2].tolist() == [36.0, 18.0, 13.0] and policy[:, 1].tolist() == [1000, 2000, 3000]
    got = sc.at_marks(head, [1.0, 2.0, 5.0, 7.0, 7.5])
    assert math.isnan(got[0]) and got[1:4] == [11.2, 1.9, 0.9] and math.isnan(got[4])
    assert sc.label("cpu-config-seed2-2b15956d56d4") == "cpu-config-seed2" and sc.label("my-run") == "my-run"


def test_seed_curves_times_each_threshold_on_every_grid(benchmark_module, capsys):
    """benchmarks/seed_curves.py's first-reached table: minutes and positions of the first
    evaluation at or below each threshold, on all evaluations and, where a run evaluated more
    densely early (``runtime.eval_early``), on the whole ones alone, with the median."""
    sc = benchmark_module("seed_curves")
    early = dict(whole=False)
    runs = {"a-seed0": [_ev(2.0, 1000, 3.0, policy=30), {**_ev(3.0, 1500, 1.8), **early}, {**_ev(4.0, 2000, 0.9), **early},
                        _ev(5.0, 2500, 0.8, policy=12)],
            "a-seed1": [_ev(2.0, 1000, 2.5, policy=30), {**_ev(3.0, 1500, 1.5), **early}, _ev(5.5, 2500, 0.95, policy=9)]}
    assert sc.first_reached(runs["a-seed0"]) == {5.0: (2.0, 1000.0), 2.0: (3.0, 1500.0), 1.0: (4.0, 2000.0)}
    whole = [e for e in runs["a-seed0"] if e.get("whole", True)]
    assert sc.first_reached(whole) == {5.0: (2.0, 1000.0), 2.0: (5.0, 2500.0), 1.0: (5.0, 2500.0)}
    sc.print_first_reached(runs, sorted(runs))
    out = capsys.readouterr().out
    assert "4.0 (0.00)" in out and "the whole evaluations only" in out
    all_rows, whole_rows = out.split("the whole evaluations only")
    med_all = [ln for ln in all_rows.splitlines() if ln.startswith("median")][0].split()[2:]
    med_whole = [ln for ln in whole_rows.splitlines() if ln.startswith("median")][0].split()[2:]
    assert med_all[:3] == ["2.0", "3.0", "4.8"] and med_whole[:3] == ["2.0", "5.2", "5.2"]
    assert med_all[3] == "-"                  # neither run reached 0.5: no median, not a number
    runs["a-seed1"] = runs["a-seed1"][:2]      # stopped before 1 point: later than seed 0's 4.0
    sc.print_first_reached(runs, sorted(runs))
    med = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("median")][0].split()[2:]
    assert med[2] == "-" and med[1] == "3.0"


def _yamb_ev(minutes, positions, scores, bot, policy=None):
    """A Yamb card evaluation: the agent's scores and the bot's on the same dice (its
    ``per_game_regret`` is the bot's minus the agent's), the policy head alone's if played."""
    modes = {"none": {"per_game_regret": [b - p for b, p in zip(bot, policy)], "loss": "points below heuristic"}} \
        if policy is not None else {}
    return {"minutes": minutes, "positions": positions, "loss": "points below heuristic", "scores": scores,
            "per_game_regret": [b - s for b, s in zip(bot, scores)], "modes": modes}


def test_yamb_curve_turns_paired_evaluations_back_into_mean_scores_and_bands(benchmark_module):
    """benchmarks/yamb_curve.py: the agent's, the policy head's and the bot's means from the
    paired evaluation, band means (a run's last evaluation just past its budget counted in the
    band before), and a run graded by the exact oracle refused by name."""
    yc = benchmark_module("yamb_curve")
    bot = [1600.0, 1620.0]
    evals = [_yamb_ev(5.0, 1e6, [1500.0, 1540.0], bot, policy=[1400.0, 1420.0]),
             _yamb_ev(15.0, 2e6, [1600.0, 1660.0], bot),
             _yamb_ev(20.2, 3e6, [1700.0, 1720.0], bot, policy=[1690.0, 1700.0]),
             _yamb_ev(27.0, 4e6, [1710.0, 1730.0], bot, policy=[1700.0, 1710.0])]
    s = yc.score_series(evals)
    assert s.shape == (4, 5) and s[:, 2].tolist() == [1520.0, 1630.0, 1710.0, 1720.0]
    assert s[0, 3] == 1410.0 and math.isnan(s[1, 3]) and s[:, 4].tolist() == [1610.0] * 4
    got = yc.bands(s, 10.0)
    assert [(lo, hi, k) for lo, hi, k, *_ in got] == [(0.0, 10.0, 1), (10.0, 20.0, 2), (20.0, 30.0, 1)]
    _, _, _, mpos, search, policy, vs = got[1]
    assert (mpos, search, policy, vs) == (3.0, 1670.0, 1695.0, 60.0)     # the nan policy mean skipped
    assert yc.rolling(np.array([1.0, np.nan, 3.0, 5.0]), 3).tolist() == [1.0, 2.0, 4.0, 4.0]
    with pytest.raises(ValueError, match="not paired with a bot"):
        yc.score_series([_ev(2.0, 1000, 1.0)])
    with pytest.raises(ValueError, match="positive"):
        yc.bands(s, 0.0)


def test_run_evaluations_are_read_from_checkpoints_and_a_missing_one_is_named(tmp_path):
    """A run folder, or a folder of run folders (a sweep's), gives each run's evaluations."""
    import json

    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.training.summary import load_run_evals

    for name, minutes in (("a-seed0", [1.0, 2.0]), ("a-seed1", [1.5])):
        save_checkpoint(tmp_path / "sweep" / name / "checkpoint.pt",
                        {"evals": json.dumps([{"minutes": m} for m in minutes])})
    runs = load_run_evals([tmp_path / "sweep"])
    assert {n: [e["minutes"] for e in ev] for n, ev in runs.items()} == {"a-seed0": [1.0, 2.0], "a-seed1": [1.5]}
    assert list(load_run_evals([tmp_path / "sweep" / "a-seed1"])) == ["a-seed1"]
    with pytest.raises(FileNotFoundError, match="no checkpoint.pt"):
        load_run_evals([tmp_path / "elsewhere"])
