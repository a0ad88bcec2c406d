"""Shared fixtures: one oracle table per variant per test session, cached in a temp folder."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("yamblab-cache")
    old = os.environ.get("YAMBLAB_CACHE_DIR")
    os.environ["YAMBLAB_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("YAMBLAB_CACHE_DIR", None)
    else:
        os.environ["YAMBLAB_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def official_table(_cache_dir):
    from yamblab.games.yahtzee import OFFICIAL
    from yamblab.oracle.table import OracleTable

    return OracleTable.get(OFFICIAL)
