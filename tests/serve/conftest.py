"""Fixtures of the service's tests: one shared server for the tests that only talk to it, and a
factory for those that need one of their own (limits, tokens, restarts)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serving import FAST, Server, start


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    s = start(tmp_path_factory.mktemp("serve"), *FAST, "--per-device", "2")
    yield s
    s.stop()
    s.kill_all()  # any worker left behind


@pytest.fixture
def servers(tmp_path) -> Iterator[list[Server]]:
    """Servers a test starts with ``serving.start``; every one still running is stopped after it."""
    started: list[Server] = []
    yield started
    for s in started:
        s.kill_all()
