"""A status line now and then during a long test run: time so far, tests done, failures, the test
running longest.

With ``-q`` (and under pytest-xdist) pytest prints only dots; on a shared CI machine a run of
minutes then looks the same whether it moves or hangs, and says nothing of where the time goes.
These hooks (imported by tests/conftest.py) print one line at the end of a test when
PROGRESS_EVERY_S has passed since the last. Only the process that reports prints: under xdist the
controller, which sees every worker's tests start and finish. A test that hangs is ended and named
by pytest-timeout (``--timeout`` in pyproject.toml), not here.
"""

from __future__ import annotations

import os
import time

import pytest

# One status line at most this often: about a dozen in a 6-minute run (the variable: for a test of it).
PROGRESS_EVERY_S = float(os.environ.get("KERNELPROOF_TEST_PROGRESS_S", "30"))


class _Progress:
    def __init__(self, reporter) -> None:
        self.reporter = reporter
        self.started = self.last = time.monotonic()
        self.done = 0
        self.failed: set[str] = set()
        self.running: dict[str, float] = {}  # nodeid -> when it started

    def start(self, nodeid: str) -> None:
        self.running[nodeid] = time.monotonic()

    def report(self, report) -> None:
        if report.failed:
            self.failed.add(report.nodeid)
        if report.when != "teardown":
            return
        self.done += 1
        self.running.pop(report.nodeid, None)
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        line = f"[{_clock(now - self.started)}] {self.done} tests done, {len(self.failed)} failed"
        if self.running:
            nodeid, since = min(self.running.items(), key=lambda kv: kv[1])
            line += f"; running longest: {nodeid} ({now - since:.0f} s)"
        self.reporter.write("\n")  # after the dots (with -q, ensure_newline sees no open line)
        self.reporter.write_line(line)


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


_state: dict[str, _Progress] = {}


@pytest.hookimpl(trylast=True)  # after the terminal plugin's own pytest_configure has made the reporter
def pytest_configure(config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput"):  # an xdist worker reports nothing
        _state["progress"] = _Progress(reporter)


def pytest_runtest_logstart(nodeid, location) -> None:
    if "progress" in _state:
        _state["progress"].start(nodeid)


def pytest_runtest_logreport(report) -> None:
    if "progress" in _state:
        _state["progress"].report(report)
