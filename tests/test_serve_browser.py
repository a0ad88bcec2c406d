"""The browser client in a real browser: headless Chromium (Debian's package) driven by Selenium.

``./run.sh test`` installs Chromium and its driver when it can (as root with apt-get); without
them these tests are skipped, saying why. The server is ``yamblab serve`` itself, started on
127.0.0.1 on a free port and always stopped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
SCREENSHOT = os.environ.get("YAMBLAB_SCREENSHOT")   # where to save a screenshot (for the README)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                       reason="no system Chromium and chromedriver (./run.sh test installs them with apt-get "
                              "when run as root: apt-get install chromium chromium-driver)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(_cache_dir):
    port = _free_port()
    exe = Path(sys.executable).with_name("yamblab")
    cmd = [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, YAMBLAB_CACHE_DIR=str(_cache_dir)))
    try:
        url = None
        deadline = time.time() + 60
        lines = []
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "open http://" in line:
                url = line.split("open ")[1].split()[0]
                break
        assert url == f"http://127.0.0.1:{port}/", "".join(lines)
        # the URL is printed just before uvicorn binds: wait for the socket
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1100,820"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=ChromeService(executable_path=DRIVER), options=opts)
    try:
        yield drv
    finally:
        drv.quit()


def _wait_idle(drv, timeout=20):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(drv, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.ready === '1' && document.body.dataset.busy === '0'"))


def _click(drv, element_id):
    drv.find_element("id", element_id).click()
    _wait_idle(drv)


def test_play_a_whole_game_by_clicks_graded_like_the_oracle(server, browser, official_table):
    from yamblab.service.service import Service

    drv = browser
    drv.get(server)
    _wait_idle(drv)
    seed = drv.find_element("id", "seed")
    seed.clear()
    seed.send_keys("42")
    _click(drv, "new-game")
    # race the greedy agent on the same dice and turn hints on
    from selenium.webdriver.support.ui import Select

    Select(drv.find_element("id", "agent")).select_by_value("greedy")
    _wait_idle(drv)
    _click(drv, "hints")
    boxes = ["chance", "yahtzee", "sixes", "fives", "fours", "threes", "twos", "ones", "three_of_a_kind",
             "four_of_a_kind", "full_house", "small_straight", "large_straight"]
    moves = []
    for turn in range(13):
        assert drv.find_element("id", "turn").text == str(turn + 1)
        # a simple, imperfect player: hold the first die, reroll twice, score the next box on its list
        _click(drv, "die-1")
        assert "held" in drv.find_element("id", "die-1").get_attribute("class")
        _click(drv, "roll")
        moves.append({"hold": [1]})
        hint = drv.find_element("id", "hint").text
        assert hint.startswith("oracle: ")
        _click(drv, "roll")
        moves.append({"hold": []})
        if turn == 6 and SCREENSHOT:
            drv.save_screenshot(SCREENSHOT)
        grade = drv.find_element("id", "last-grade").text
        assert grade.startswith("reroll all: ")
        # each open box shows what the dice showing would score there
        dice, card = drv.execute_script("return [Y.data.position.dice, Y.data.position.card]")
        assert dice == [int(drv.find_element("id", f"die-{i}").text) for i in range(1, 6)]
        assert _card_shown(drv)[0] == _as_shown(_rules_points("forced", card, dice)[0])
        box = next(b for b in boxes if drv.find_elements("id", f"box-{b}"))
        boxes.remove(box)
        _click(drv, f"box-{box}")
        moves.append({"box": box})
    assert drv.find_element("id", "final").is_displayed()
    # the page's numbers against the oracle, computed here without the browser
    ref = Service(["forced"], yamb_presets=()).replay("forced", 42, moves)
    assert ref["position"]["done"]
    assert drv.find_element("id", "final-score").text == str(ref["position"]["total"])
    assert drv.find_element("id", "final-loss").text == f"{ref['loss_total']:.2f}"
    assert drv.find_element("id", "loss-total").text == f"{ref['loss_total']:.2f}"
    assert ref["loss_total"] > 1.0      # the scripted player is far from perfect
    for kind, v in ref["loss_by_decision"].items():
        assert drv.find_element("id", "final-" + kind.replace(" ", "-")).text == f"{v:.2f}"
    logged = drv.find_elements("css selector", "#moves li")
    assert len(logged) == len(moves) == 39
    for li, m in zip(logged, ref["moves"]):
        assert (f"gave away {m['loss']:.2f}" in li.text) or (m["loss"] < 1e-9 and "perfect" in li.text)
    # the agent's side: its whole game on the same dice, graded the same way
    greedy = Service(["forced"], yamb_presets=()).agent_game("forced", "greedy", 42)
    assert drv.find_element("id", "agent-total").text == str(greedy["position"]["total"])
    assert drv.find_element("id", "agent-loss").text == f"{greedy['loss_total']:.2f}"
    # both cards' upper sections: the subtotal, and the bonus made (35) or not (out of reach)
    for prefix, pos in (("", ref["position"]), ("agent-", greedy["position"])):
        assert drv.find_element("id", prefix + "upper-subtotal").text == str(pos["upper_subtotal"])
        assert drv.find_element("id", prefix + "upper-bonus").text == \
            ("35" if pos["upper_subtotal"] >= 63 else "out of reach")


def _play(drv, moves):
    """Make moves by clicks: a hold clicks each die to hold then Roll; a box clicks its button."""
    for m in moves:
        if "hold" in m:
            for p in m["hold"]:
                drv.find_element("id", f"die-{p}").click()
            _click(drv, "roll")
        else:
            _click(drv, f"box-{m['box']}")


def _rules_points(rules, card: dict, dice) -> tuple[dict, int]:
    """What each open box scores with ``dice`` by yamblab/games/yahtzee/rules.py (None: the joker
    rule forbids it), and the Yahtzee bonus the roll earns: what the page must show."""
    from yamblab.games.yahtzee.rules import (BOX_NAMES, UPPER_BONUS_THRESHOLD, BoundaryState, YahtzeeRules,
                                             legal_boxes, score_box)

    rules = YahtzeeRules.parse(rules)
    plain = YahtzeeRules(joker=rules.joker, upper_bonus=False, yahtzee_bonus=False)
    upper = min(UPPER_BONUS_THRESHOLD, sum(v for k, v in card.items() if BOX_NAMES.index(k) < 6))
    state = BoundaryState(filled=sum(1 << BOX_NAMES.index(k) for k in card), upper=upper,
                          yahtzee_fifty=card.get("yahtzee") == 50)
    hist = [list(dice).count(f) for f in range(1, 7)]
    legal = legal_boxes(state, hist, rules)
    points = {BOX_NAMES[b]: score_box(state, hist, b, plain)[0] if b in legal else None
              for b in range(13) if state.is_open(b)}
    bonus = score_box(state, hist, legal[0], YahtzeeRules(joker=rules.joker, upper_bonus=False))[0] \
        - score_box(state, hist, legal[0], plain)[0]
    return points, (bonus if rules.yahtzee_bonus else 0)


def _as_shown(points: dict) -> dict:
    return {b: "–" if v is None else str(v) for b, v in points.items()}


def _card_shown(drv):
    """The human card's open boxes as shown: {box: text}, and the boxes with a score button."""
    shown, buttons = drv.execute_script(  # one round trip (each find_element is one)
        "return [Object.fromEntries([...document.querySelectorAll('#card td[id^=\"pts-\"]')]"
        "  .map((c) => [c.id.slice(4), c.innerText])),"
        " [...document.querySelectorAll('#card button[id^=\"box-\"]')].map((b) => b.id.slice(4))]")
    return shown, set(buttons)


def test_the_card_shows_each_open_boxs_points_and_the_upper_bonus(server, browser):
    from yamblab.service.service import Service

    drv = browser
    drv.get(server)
    _wait_idle(drv)
    seed = drv.find_element("id", "seed")
    seed.clear()
    seed.send_keys("183")
    _click(drv, "new-game")
    # seed 183: a Yahtzee of fives on the first turn (scored 50), threes on the second turn,
    # then a Yahtzee of threes: a joker under the official (forced) rules
    moves = [{"hold": [3, 4]}, {"box": "yahtzee"}, {"hold": [4, 5]}, {"hold": [2, 4, 5]}]
    _play(drv, moves)
    ref = Service(["forced"], yamb_presets=()).replay("forced", 183, moves, advice=True)
    p = ref["position"]
    assert p["dice"] == [2, 3, 3, 3, 3] and p["rolls_left"] == 0 and p["card"] == {"yahtzee": 50}
    assert [drv.find_element("id", f"die-{i}").text for i in range(1, 6)] == ["2", "3", "3", "3", "3"]
    shown, buttons = _card_shown(drv)
    points, bonus = _rules_points("forced", p["card"], p["dice"])
    assert shown == _as_shown(points)
    assert shown == {"ones": "0", "twos": "2", "threes": "12", "fours": "0", "fives": "0", "sixes": "0",
                     "three_of_a_kind": "14", "four_of_a_kind": "14", "full_house": "0", "small_straight": "0",
                     "large_straight": "0", "chance": "14"}
    assert buttons == {a["move"]["box"] for a in ref["advice"] if "box" in a["move"]} == set(shown)
    assert "nil" in drv.find_element("id", "pts-ones").get_attribute("class")       # zeros greyed
    assert "nil" not in drv.find_element("id", "pts-threes").get_attribute("class")
    assert drv.find_element("id", "score-yahtzee").text == "50"
    assert drv.find_element("id", "upper-subtotal").text == "0"
    assert drv.find_element("id", "upper-bonus").text == "63 to go"
    assert bonus == 0 and not drv.find_elements("id", "pts-yahtzee-bonus")

    more = [{"box": "threes"}, {"hold": [1, 2]}]
    _play(drv, more)
    ref = Service(["forced"], yamb_presets=()).replay("forced", 183, moves + more, advice=True)
    p = ref["position"]
    assert p["dice"] == [3, 3, 3, 3, 3] and p["card"] == {"threes": 12, "yahtzee": 50}
    shown, buttons = _card_shown(drv)
    points, bonus = _rules_points("forced", p["card"], p["dice"])
    assert shown == _as_shown(points)
    # a joker: Threes is filled, so any lower box, Full House and the straights at full value;
    # the other upper boxes are not allowed
    assert shown == {"ones": "–", "twos": "–", "fours": "–", "fives": "–", "sixes": "–",
                     "three_of_a_kind": "15", "four_of_a_kind": "15", "full_house": "25",
                     "small_straight": "30", "large_straight": "40", "chance": "15"}
    assert buttons == {a["move"]["box"] for a in ref["advice"] if "box" in a["move"]} \
        == {b for b, v in points.items() if v is not None}
    assert bonus == 100 and drv.find_element("id", "pts-yahtzee-bonus").text == "+100"
    assert drv.find_element("id", "upper-subtotal").text == str(p["upper_subtotal"]) == "12"
    assert drv.find_element("id", "upper-bonus").text == "51 to go"
    assert drv.find_element("id", "total").text == "62"
    if SCREENSHOT:
        shot = Path(SCREENSHOT)
        drv.save_screenshot(str(shot.with_name(shot.stem + "-card" + shot.suffix)))


def test_the_pages_box_points_agree_with_the_rules_module(server, browser, monkeypatch):
    """The page computes the points on the card itself: check it against rules.py on every roll,
    under every joker rule, with the Yahtzee box open, at 0 and at 50, and joker fallbacks."""
    import functools
    import itertools
    import random

    from yamblab.games.yahtzee import rules as R

    # BoundaryState checks its subtotal on every construction: remember the reachable sets
    monkeypatch.setattr(R, "reachable_upper_totals", functools.lru_cache(R.reachable_upper_totals))
    drv = browser
    drv.get(server)
    _wait_idle(drv)
    assert drv.execute_script("return YBOXES") == list(R.BOX_NAMES) \
        == drv.execute_script("return Object.keys(INFO.boxes)")
    rng = random.Random(0)
    lower = list(R.BOX_NAMES[6:11]) + ["chance"]

    def card(boxes, yahtzee=None):
        c = {b: 0 for b in boxes}
        if yahtzee is not None:
            c["yahtzee"] = yahtzee
        return c

    rolls = [list(d) for d in itertools.combinations_with_replacement(range(1, 7), 5)]
    for d in rolls:
        rng.shuffle(d)
    yahtzees = [[f] * 5 for f in range(1, 7)]
    cards = [card([]), card([], 50), card(["ones", "full_house", "chance"], 0), card(lower[:4] + ["fives"], 50)]
    joker_cards = cards + [card([R.BOX_NAMES[f]], y) for f in range(6) for y in (0, 50)]
    joker_cards += [card([R.BOX_NAMES[f]] + lower[:2], y) for f in range(6) for y in (0, 50)]   # priority's 2nd group
    joker_cards += [card([R.BOX_NAMES[f]] + lower, y) for f in range(6) for y in (0, 50)]       # no lower box open
    joker_cards += [card(rng.sample(R.BOX_NAMES[:11] + ("chance",), rng.randint(1, 11)), rng.choice((0, 50)))
                    for _ in range(12)]
    variants = ["forced", "free", "priority", "none", "forced,no-upper-bonus,no-yahtzee-bonus",
                "free,no-yahtzee-bonus"]
    cases = [("forced", c, d) for c in cards for d in rolls]
    cases += [(v, c, d) for v in variants for c in joker_cards for d in yahtzees]
    got = drv.execute_script("return arguments[0].map((c) => yPoints(c[0], c[1], c[2]))",
                             [list(c) for c in cases])
    assert len(got) == len(cases) > 2000
    for (rules, c, d), g in zip(cases, got):
        points, bonus = _rules_points(rules, c, d)
        assert (g["points"], g["yahtzeeBonus"]) == (points, bonus), (rules, c, d)
    # the upper section's bonus line
    full = {"ones": 3, "twos": 6, "threes": 9, "fours": 12, "fives": 15, "sixes": 18}
    upper = [("forced", {}, 0, "63 to go"), ("forced", {"sixes": 24, "fives": 20}, 44, "19 to go"),
             ("free", full, 63, "35"), ("forced", dict(full, sixes=30), 75, "35"),
             ("forced", {"sixes": 6, "fives": 5, "fours": 4}, 15, "out of reach"),
             ("forced", {"sixes": 18, "fives": 15, "fours": 12, "threes": 6}, 51, "12 to go"),
             ("forced", {"sixes": 18, "fives": 15, "fours": 12, "threes": 3}, 48, "15 to go"),
             ("forced", {"sixes": 18, "fives": 15, "fours": 12, "threes": 3, "twos": 4}, 52, "out of reach"),
             ("none,no-upper-bonus", {"sixes": 18}, 18, "not in these rules")]
    for rules, c, subtotal, text in upper:
        assert drv.execute_script("return yUpper(arguments[0], arguments[1])", rules, c) \
            == {"subtotal": subtotal, "bonus": text,
                "label": "Bonus" if "no-upper" in rules else "Bonus (35 at 63)"}


def test_a_yamb_column_game_by_clicks_following_the_hints(server, browser):
    drv = browser
    drv.get(server)
    _wait_idle(drv)
    _click(drv, "tab-yamb")
    _click(drv, "yamb-hints")
    for _ in range(60):
        if drv.find_element("id", "yamb-final").is_displayed():
            break
        hint = drv.find_element("id", "yamb-hint").text
        assert hint.startswith("oracle: ")
        # follow the oracle: a keep is clicked die by die, a row by its button
        best = drv.execute_script("return M.data.advice[0].move")
        if "hold" in best:
            for p in best["hold"]:
                drv.find_element("id", f"yamb-die-{p}").click()
            _click(drv, "yamb-reroll")
        else:
            _click(drv, f"yamb-row-{best['row'] or drv.execute_script('return M.data.position.next_row')}")
    assert drv.find_element("id", "yamb-final").is_displayed()
    assert drv.find_element("id", "yamb-loss").text == "0.00"
