"""Fixtures of the agent tests: loopback LLM servers, a fake evaluator, a tiny task."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_fakes import FakeEvaluator  # noqa: E402
from agent_loopback import LoopbackServer  # noqa: E402

DATA = Path(__file__).parent / "data"


@pytest.fixture
def serve():
    """serve(respond) -> a started LoopbackServer; all are closed after the test."""
    servers = []

    def start(respond):
        server = LoopbackServer(respond)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


@pytest.fixture
def fake_evaluator():
    return FakeEvaluator()


@pytest.fixture
def task_file() -> Path:
    return DATA / "scale_add.py"
