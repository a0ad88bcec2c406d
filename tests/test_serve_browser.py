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
