"""The load driver of ``benchmarks/serve_load.py`` against a real server on a socket: several
clients at once, every kind of request (advice, grade, replay, agent moves) answered, none failing.

The server is the app of ``yamblab serve`` under uvicorn in a thread of this process (the
benchmark starts ``yamblab serve`` itself; its figures are in docs/serving.md).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def driver(benchmark_module):
    return benchmark_module("serve_load")


@pytest.fixture(scope="module")
def server(official_table, driver):
    import uvicorn

    from yamblab.service.serve import create_app
    from yamblab.service.service import Service

    port = driver.free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(Service(["forced"], yamb_presets=())), host="127.0.0.1",
                                        port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        driver.wait_for_port(port, time.time() + 30)
        yield f"http://127.0.0.1:{port}/"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def test_a_mixed_load_from_several_clients_is_answered_without_error(server, driver):
    res = driver.run_load(server, seconds=2.0, clients=3, pid=os.getpid(), sample_every=0.5, pool_games=2)
    assert res["errors"] == []
    assert all(res["requests"][k] > 0 for k in driver.KINDS), res["requests"]
    assert res["requests"]["all"] == sum(res["requests"][k] for k in driver.KINDS)
    assert len(res["rss"]) >= 3 and all(mb > 0 for _, mb in res["rss"])
    text = driver.report(res)
    assert "errors: 0" in text and "server memory (RSS, MB)" in text


def test_every_kind_of_request_is_valid_for_the_server(server, driver):
    """Each kind the driver draws is a request the server accepts (so an error under load is the
    server's, never the driver's): checked one by one, several draws each."""
    import random

    import httpx

    with httpx.Client(base_url=server, timeout=30) as c:
        pool = driver.build_pool(c, games=1, points=3)
        assert pool["positions"] and pool["decisions"] and pool["games"]
        rng = random.Random(1)
        for kind in driver.KINDS:
            for _ in range(3):
                path, body = driver.request_for(kind, pool, rng)
                r = c.post(path, json=body)
                assert r.status_code == 200, (kind, r.text)
    with pytest.raises(ValueError, match="unknown kind"):
        driver.request_for("nonsense", pool, rng)
