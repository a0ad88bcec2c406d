"""The advice API of ``yamblab serve`` (FastAPI's TestClient: no socket, no browser)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from yamblab.games.yahtzee.rules import YahtzeeRules
from yamblab.oracle.yahtzee.advice import advise, card_position
from yamblab.service.serve import create_app
from yamblab.service.service import Service


@pytest.fixture(scope="module")
def service(official_table):
    return Service(["forced", "free,no-yahtzee-bonus"], yamb_presets=("croatian",))


@pytest.fixture(scope="module")
def client(service):
    # raise_server_exceptions=False: a bug shows up as a 500 response the tests can see
    return TestClient(create_app(service), raise_server_exceptions=False)


def test_advice_ranks_every_action_like_the_oracle(client, official_table):
    r = client.post("/api/yahtzee/advice", json={"dice": [1, 1, 3, 4, 6], "rolls_left": 2,
                                                 "card": {"ones": 3, "yahtzee": 50}})
    assert r.status_code == 200, r.text
    body = r.json()
    state, so_far, _, _ = card_position("ones=3,yahtzee=50", official_table.rules)
    ref = advise(official_table, state, [1, 1, 3, 4, 6], 2, so_far)
    assert body["score_so_far"] == 53
    assert [a["label"] for a in body["actions"]] == [a.label for a in ref]
    assert np.allclose([a["expected_final"] for a in body["actions"]], [a.expected_final for a in ref])
    losses = [a["loss"] for a in body["actions"]]
    assert losses[0] == 0 and all(b >= a - 1e-12 for a, b in zip(losses, losses[1:]))
    # 12 open boxes (Ones and Yahtzee are filled) + 24 distinct keeps of 1,1,3,4,6
    assert sum(a["kind"] == "box" for a in body["actions"]) == 11
    assert sum(a["kind"] == "keep" for a in body["actions"]) == 24
    boxes = {a["move"]["box"] for a in body["actions"] if a["kind"] == "box"}
    assert "ones" not in boxes and "chance" in boxes


def test_advice_with_no_rolls_left_is_boxes_only_and_top_limits(client):
    r = client.post("/api/yahtzee/advice", json={"dice": "66666", "rolls_left": 0, "top": 3})
    assert r.status_code == 400      # dice are a list of faces in the API
    r = client.post("/api/yahtzee/advice", json={"dice": [6, 6, 6, 6, 6], "rolls_left": 0, "top": 3})
    acts = r.json()["actions"]
    assert len(acts) == 3 and all(a["kind"] == "box" for a in acts)
    assert acts[0]["move"] == {"box": "yahtzee"}


def test_variants_are_served_separately(client, service):
    body = client.get("/api/info").json()
    assert set(body["rules"]) == {"forced", "free,no-yahtzee-bonus"}
    assert body["rules"]["forced"] == pytest.approx(254.5877, abs=1e-4)
    assert body["rules"]["free,no-yahtzee-bonus"] == pytest.approx(246.0873, abs=1e-4)
    pos = {"dice": [2, 2, 2, 5, 6], "rolls_left": 1, "card": {"yahtzee": 50}}
    a = client.post("/api/yahtzee/advice", json=pos).json()
    b = client.post("/api/yahtzee/advice", json=pos | {"rules": "free,no-yahtzee-bonus"}).json()
    assert a["actions"][0]["expected_final"] > b["actions"][0]["expected_final"] + 5


@pytest.mark.parametrize("payload, words", [
    ({"dice": [1, 1, 3, 4, 7], "rolls_left": 2}, "face 7"),
    ({"dice": [1, 1, 3, 4], "rolls_left": 2}, "exactly 5 dice"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "card": {"5": 20}}, "not a number"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "card": {"ones": 7}}, "cannot hold 7"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "card": {"fullhouse": 20}}, "Full House"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "card": {"jackpot": 20}}, "unknown box"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "rules": "nonsense"}, "unknown rules word"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "rules": "priority"}, "not served here"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "rules": "free,no-yahtzee-bonus",
      "card": {"yahtzee": 50, "ones": 5}, "yahtzee_bonuses": 1}, "pay none"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "card": {"ones": 3}, "yahtzee_bonuses": 1}, "need a 50"),
    ({"dice": [1, 1, 3, 4, 6], "rolls_left": 2, "card": "ones=3,twos=3"}, "Twos cannot hold 3"),
])
def test_bad_positions_are_400_naming_the_problem(client, payload, words):
    r = client.post("/api/yahtzee/advice", json=payload)
    assert r.status_code == 400, r.text
    assert words in r.json()["detail"]


def test_full_card_is_refused(client):
    full = {b: 0 for b in ("ones", "twos", "threes", "fours", "fives", "sixes", "three_of_a_kind",
                           "four_of_a_kind", "full_house", "small_straight", "large_straight", "yahtzee")}
    full["chance"] = 5
    r = client.post("/api/yahtzee/advice", json={"dice": [1, 1, 1, 1, 1], "rolls_left": 0, "card": full})
    assert r.status_code == 400 and "full" in r.json()["detail"]


BAD_REQUESTS = [
    ("post", "/api/yahtzee/advice", {}),
    ("post", "/api/yahtzee/advice", {"dice": None, "rolls_left": 2}),
    ("post", "/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": 3}),
    ("post", "/api/yahtzee/advice", {"dice": [1.5, 2, 3, 4, 5], "rolls_left": 1}),
    ("post", "/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "card": 12}),
    ("post", "/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "card": "ones"}),
    ("post", "/api/yahtzee/advice", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "card": "ones=x"}),
    ("post", "/api/yahtzee/advice", {"dice": [0, 2, 3, 4, 5], "rolls_left": 1, "extra": 1}),
    ("post", "/api/yahtzee/replay", {"seed": -1}),
    ("post", "/api/yahtzee/replay", {"seed": 2**64}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{"box": "5"}]}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{"hold": [0]}]}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{"hold": [1, 1]}]}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{"hold": [1], "box": "ones"}]}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{}]}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{"hold": []}] * 3}),
    ("post", "/api/yahtzee/replay", {"seed": 1, "moves": [{"box": "chance"}, {"box": "chance"}]}),
    ("post", "/api/yahtzee/grade", {"decisions": [{"dice": [1, 2, 3, 4, 5], "rolls_left": 1,
                                                   "move": {"box": "chance"}}]}),
    ("post", "/api/yahtzee/grade", {"decisions": [{"dice": [1, 2, 3, 4, 5], "rolls_left": 2, "move": {"hold": [1]}},
                                                  {"dice": [2, 2, 3, 4, 5], "rolls_left": 1, "move": {"box": "twos"}}]}),
    ("post", "/api/yahtzee/agent/move", {"agent": "nobody", "dice": [1, 2, 3, 4, 5], "rolls_left": 1}),
    ("post", "/api/yahtzee/agent/move", {"agent": "checkpoint", "dice": [1, 2, 3, 4, 5], "rolls_left": 1}),
    ("post", "/api/yahtzee/agent/game", {"agent": "greedy", "seed": 1, "rules": "none"}),
    ("post", "/api/yahtzee/target", {"dice": [1, 2, 3, 4, 5], "rolls_left": 1, "target": 300}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "column": "free"}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 4, "column": "down"}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "column": "down", "scores": {"twos": 4}}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "column": "down", "scores": {"ones": 7}}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "column": "down", "scores": {"1": 3}}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "preset": "klingon"}),
    ("post", "/api/yamb/advice", {"dice": [1, 2, 3, 4, 5], "roll": 1, "column": "sideways"}),
    ("post", "/api/yamb/replay", {"seed": 1, "moves": [{"row": "twos"}]}),
    ("post", "/api/yamb/replay", {"seed": 1, "moves": [{"hold": [6]}]}),
    ("post", "/api/yamb/replay", {"seed": 1, "moves": [{"hold": []}, {"hold": []}, {"hold": []}]}),
]


@pytest.mark.parametrize("method, url, payload", BAD_REQUESTS)
def test_user_mistakes_are_4xx_with_a_message_never_500(client, method, url, payload):
    r = getattr(client, method)(url, json=payload)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    detail = r.json()["detail"]
    assert detail and (isinstance(detail, list) or len(detail) > 10)


def test_oracle_agent_game_gives_nothing_away_and_replays_exactly(client):
    oracle = client.post("/api/yahtzee/agent/game", json={"agent": "oracle", "seed": 7, "game": 3}).json()
    greedy = client.post("/api/yahtzee/agent/game", json={"agent": "greedy", "seed": 7, "game": 3}).json()
    assert oracle["position"]["done"] and len(oracle["moves"]) >= 13
    assert oracle["loss_total"] == pytest.approx(0.0, abs=1e-9)
    assert greedy["loss_total"] > 1.0
    assert sum(greedy["loss_by_decision"].values()) == pytest.approx(greedy["loss_total"])
    # the same moves replayed by a "person" on the same dice give the same game and grades
    again = client.post("/api/yahtzee/replay", json={"seed": 7, "game": 3,
                                                     "moves": [m["move"] for m in greedy["moves"]]}).json()
    assert again["position"] == greedy["position"]
    assert [m["loss"] for m in again["moves"]] == [m["loss"] for m in greedy["moves"]]
    # and graded as recorded decisions (dice given, no seed) by a second code path
    decisions = [{"dice": m["dice"], "rolls_left": rl, "move": m["move"]}
                 for m, rl in zip(greedy["moves"], _rolls_left(greedy["moves"]))]
    graded = client.post("/api/yahtzee/grade", json={"decisions": decisions}).json()
    assert graded["final"] and graded["score"] == greedy["position"]["total"]
    assert np.allclose([d["loss"] for d in graded["decisions"]], [m["loss"] for m in greedy["moves"]])
    assert graded["loss_by_decision"] == pytest.approx(greedy["loss_by_decision"])


def _rolls_left(moves):
    rl = 2
    for m in moves:
        yield rl
        rl = 2 if "box" in m["move"] else rl - 1


def test_replay_hint_is_the_oracle_move_and_following_it_costs_nothing(client):
    moves = []
    for _ in range(39):
        body = client.post("/api/yahtzee/replay", json={"seed": 11, "moves": moves, "advice": True}).json()
        if body["position"]["done"]:
            break
        best = body["advice"][0]
        assert best["loss"] == 0
        moves.append(best["move"])
    assert body["position"]["done"] and body["loss_total"] == pytest.approx(0, abs=1e-9)
    assert "advice" not in body


def test_replay_names_the_illegal_move(client):
    r = client.post("/api/yahtzee/replay", json={"seed": 1, "moves": [{"box": "chance"}, {"box": "c"}]})
    assert r.status_code == 400 and r.json()["detail"].startswith("move 2: cannot score Chance")
    r = client.post("/api/yahtzee/replay", json={"seed": 1, "moves": [{"hold": []}] * 3})
    assert r.status_code == 400 and "move 3" in r.json()["detail"] and "no rerolls" in r.json()["detail"]


def test_agent_move_matches_its_game_and_grades_it(client):
    game = client.post("/api/yahtzee/agent/game", json={"agent": "greedy", "seed": 5}).json()
    first = game["moves"][0]
    r = client.post("/api/yahtzee/agent/move", json={"agent": "greedy", "dice": first["dice"], "rolls_left": 2})
    assert r.status_code == 200
    assert r.json()["move"] == first["move"] and r.json()["loss"] == pytest.approx(first["loss"])
    # a joker Yahtzee with Sixes filled: the oracle takes the 40-point Large Straight
    pos = {"dice": [6, 6, 6, 6, 6], "rolls_left": 1, "card": {"yahtzee": 50, "sixes": 24}}
    body = client.post("/api/yahtzee/agent/move", json=pos | {"agent": "oracle"}).json()
    best = client.post("/api/yahtzee/advice", json=pos).json()["actions"][0]
    assert body["loss"] == 0 and body["move"] == best["move"] == {"box": "large_straight"}


def test_search_agent_reports_its_search_values(service):
    from yamblab.service import service as service_mod

    table = service.table("forced")
    agent = service_mod._make_agent("oracle", table, None)
    assert service_mod._search_values(agent, service._batch_for(table, None, [1, 2, 3, 4, 5], 1, None)) is None
    from yamblab.agents.base import make_agent

    search = make_agent("search", table.rules, table=table, valuation="oracle")
    batch = service._batch_for(table, {"chance": 20}, [1, 2, 3, 4, 6], 1, None)
    search.reset(batch)
    vals = service_mod._search_values(search, batch)
    assert vals[0]["value"] == max(v["value"] for v in vals)
    ref = advise(table, card_position({"chance": 20}, table.rules)[0], [1, 2, 3, 4, 6], 1, 20)
    assert vals[0]["value"] + 20 == pytest.approx(ref[0].expected_final)
    assert len(vals) == len(ref)


def test_concurrent_requests_do_not_disturb_each_other(client):
    good = {"dice": [2, 3, 4, 5, 5], "rolls_left": 1, "card": {"chance": 22}}
    want = client.post("/api/yahtzee/advice", json=good).json()
    results, errors = [], []

    def worker(k):
        for j in range(5):
            if (k + j) % 2:
                r = client.post("/api/yahtzee/advice", json=good | {"card": {"ones": 9}})
                errors.append(r.status_code)
            else:
                results.append(client.post("/api/yahtzee/advice", json=good).json())
            g = client.post("/api/yahtzee/agent/game", json={"agent": "greedy", "seed": 3}).json()
            results.append(g["position"]["total"])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(errors) == {400}
    assert all(r == want for r in results if isinstance(r, dict))
    assert len({r for r in results if isinstance(r, int)}) == 1


def test_yamb_advice_is_the_column_oracle(client, service):
    oracle = service.yamb_oracle("croatian", "down")
    r = client.post("/api/yamb/advice", json={"column": "down", "dice": [1, 1, 3, 4, 6], "roll": 1,
                                              "scores": {"ones": 2, "twos": 4}})
    assert r.status_code == 200, r.text
    acts = r.json()["actions"]
    q = oracle.action_values([2, 4] + [-1] * 11, [1, 1, 3, 4, 6], 1)
    assert acts[0]["expected_final"] == pytest.approx(6 + max(q.values()))
    assert acts[0]["loss"] == 0 and any(a["label"] == "score Threes" for a in acts)


def test_yamb_game_following_the_oracle_gives_nothing_away(client):
    moves = []
    for _ in range(60):
        body = client.post("/api/yamb/replay", json={"column": "up", "seed": 4, "moves": moves,
                                                      "advice": True}).json()
        if body["position"]["done"]:
            break
        moves.append(body["advice"][0]["move"])
    assert body["position"]["done"] and body["loss_total"] == pytest.approx(0, abs=1e-9)
    assert len(body["position"]["scores"]) == 13
    # a hold that gives points away is charged to its keep, in the words every report uses
    lost = client.post("/api/yamb/replay", json={"column": "up", "seed": 4, "moves": [{"hold": []}]}).json()
    assert list(lost["loss_by_decision"]) == ["first keep", "second keep", "box"]
    assert lost["loss_by_decision"]["first keep"] == pytest.approx(lost["loss_total"])
    r = client.post("/api/yamb/replay", json={"column": "down", "seed": 4, "moves": [{"row": "yamb"}]})
    assert r.status_code == 400 and "takes Ones next" in r.json()["detail"]


def test_card_position_knows_the_variant():
    no_bonus = YahtzeeRules.parse("forced,no-upper-bonus")
    upper = "ones=3,twos=6,threes=9,fours=12,fives=15,sixes=18"
    assert card_position(upper, YahtzeeRules())[1] == 63 + 35
    assert card_position(upper, no_bonus)[1] == 63
    from yamblab.errors import IllegalActionError, UnreachablePositionError

    with pytest.raises(UnreachablePositionError, match="pay none"):
        card_position("yahtzee=50,ones=5,yahtzee_bonuses=1", YahtzeeRules.parse("free,no-yahtzee-bonus"))
    assert card_position("yahtzee=50,ones=5,yahtzee_bonuses=1", YahtzeeRules())[1] == 155
    with pytest.raises(IllegalActionError, match="not a number"):
        card_position({"5": 20}, YahtzeeRules())


def test_terminal_play_refuses_bare_numbers():
    from yamblab.errors import IllegalActionError
    from yamblab.cli.play import parse_move

    with pytest.raises(IllegalActionError, match="box name"):
        parse_move("5", 2)
    assert parse_move("fives", 0) == 4 and parse_move("hold 5", 1) == 13 + 16


def test_docs_and_the_page_are_served(client):
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/yahtzee/advice", "/api/yahtzee/grade", "/api/yahtzee/agent/move", "/api/yamb/advice",
            "/api/yahtzee/target"} <= set(paths)
    page = client.get("/", follow_redirects=True)
    assert page.status_code == 200 and "yamblab" in page.text
    assert client.get("/static/app.js").status_code == 200


def test_advise_command_knows_the_variant(official_table):
    from typer.testing import CliRunner

    from yamblab.cli.main import app

    run = CliRunner().invoke
    r = run(app, ["advise", "--dice", "11346", "--card", "5=20"])
    assert r.exit_code == 2 and "not a number" in r.output
    r = run(app, ["advise", "--dice", "11346", "--rules", "forced,no-yahtzee-bonus",
                  "--card", "yahtzee=50,ones=5,yahtzee_bonuses=1"])
    assert r.exit_code == 2 and "pay none" in r.output
    upper = "ones=3,twos=6,threes=9,fours=12,fives=15,sixes=18"
    best = {}
    for rules in ("forced", "forced,no-upper-bonus"):
        r = run(app, ["advise", "--dice", "11346", "--card", upper, "--rules", rules, "--top", "1"])
        assert r.exit_code == 0, r.output
        best[rules] = float(r.output.splitlines()[1].split()[-2])
    # the 35-point bonus is on the card only where the variant pays it
    assert best["forced"] - best["forced,no-upper-bonus"] > 30


@pytest.mark.slow
def test_a_checkpoint_is_served_as_an_agent_with_its_search_values(tmp_path, official_table):
    torch = pytest.importorskip("torch")
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.config import ModelConfig

    torch.manual_seed(0)
    path = save_checkpoint(tmp_path / "net.ckpt",
                           {**Learner(ModelConfig.preset("tiny"), TrainConfig(batch_size=8)).state_dict(),
                            "config": "game: yahtzee\nrules: forced\n"})
    client = TestClient(create_app(Service(["forced"], checkpoint=str(path), yamb_presets=())),
                        raise_server_exceptions=False)
    assert "checkpoint" in client.get("/api/info").json()["agents"]
    r = client.post("/api/yahtzee/agent/move", json={"agent": "checkpoint", "dice": [2, 2, 5, 6, 6],
                                                     "rolls_left": 2, "card": {"chance": 20}})
    assert r.status_code == 200, r.text
    body = r.json()
    vals = body["values"]
    assert body["move"] == vals[0]["move"] and body["loss"] >= 0
    assert len(vals) == 12 + len({tuple(sorted(v["move"]["hold"])) for v in vals if "hold" in v["move"]})
    with pytest.raises(Exception, match="no checkpoint file"):
        Service(["forced"], checkpoint=str(tmp_path / "missing.ckpt"), yamb_presets=())


def test_serve_takes_a_checkpoint_that_one_served_variant_plays_and_refuses_one_none_plays(tmp_path):
    from typer.testing import CliRunner

    from yamblab.cli.main import app
    from yamblab.learners.config import TrainConfig
    from yamblab.learners.learner import Learner
    from yamblab.model.checkpoint import save_checkpoint
    from yamblab.model.config import ModelConfig

    path = save_checkpoint(tmp_path / "net.ckpt", {**Learner(ModelConfig.preset("tiny"), TrainConfig()).state_dict(),
                                                   "config": "game: yamb\npreset: jamb_nn\n"})
    res = CliRunner().invoke(app, ["serve", "--checkpoint", str(path), "--rules", "forced", "--rules", "free",
                                   "--port", "1"])
    assert res.exit_code != 0 and "learned yamb jamb_nn" in res.output and "Traceback" not in res.output
