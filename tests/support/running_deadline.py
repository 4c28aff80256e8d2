"""A contained command's timeout that starts once the code under test runs, not when its interpreter starts.

kernelproof.host.spawn.run (the builder's child) counts its timeout from the process's start.
A child forked from a zygote has torch imported already, but one started as an interpreter (no
zygote) imports it before it imports the solution: about 2 s on an idle 2-core machine, 20 s and
more on a loaded one. A test of what happens at the timeout gives it a short one; so that a slow
start is never what runs out, its solution writes :data:`MARKER` into its working directory (the
build's ``tmp/``, also its ``$TMPDIR``) once it runs, and :func:`count_from_marker` makes spawn.run's
wait start the clock only then, forked or started. What the timeout does when it fires is unchanged.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

MARKER = "kp-test-running"  # written by the solution under test once its own code runs
# What the solution writes: one line to paste into its module level.
WRITE_MARKER = f"open(__import__('os').environ['TMPDIR'] + '/{MARKER}', 'w').close()\n"


def _wait_for_marker(marker: Path, proc) -> None:
    while not marker.exists() and proc.poll() is None:
        time.sleep(0.05)


class _ForkedFromMarker:
    """A forked child (kernelproof.host.zygote.Forked) whose timed wait first waits for the marker."""

    def __init__(self, forked, marker: Path):
        self.forked = forked
        self.marker = marker

    def wait(self, timeout=None):
        if timeout is not None:
            _wait_for_marker(self.marker, self.forked)
        return self.forked.wait(timeout)

    def __getattr__(self, name):
        return getattr(self.forked, name)


class _CountsFromMarker(subprocess.Popen):
    """A Popen whose timed wait first waits, without limit, for the marker (or the process's end):
    pytest-timeout ends a test whose solution never gets that far."""

    def __init__(self, *args, cwd=None, **kwargs):
        self.marker = Path(cwd or ".") / MARKER
        super().__init__(*args, cwd=cwd, **kwargs)

    def wait(self, timeout=None):
        if timeout is not None:
            _wait_for_marker(self.marker, self)
        return super().wait(timeout)


def count_from_marker(monkeypatch) -> None:
    """For this test, spawn.run's timeouts count from the solution's marker (see the module's doc)."""
    from kernelproof.host import spawn, zygote

    def fork(args, env, cwd, fds, entry="worker"):
        forked = zygote.spawn(args, env, cwd, fds, entry=entry)
        return None if forked is None else _ForkedFromMarker(forked, Path(cwd) / MARKER)

    fork_shim = SimpleNamespace(spawn=fork, REPORT_FD=zygote.REPORT_FD, ENTRIES=zygote.ENTRIES)
    monkeypatch.setattr(spawn, "zygote", fork_shim)
    shim = SimpleNamespace(
        Popen=_CountsFromMarker,
        DEVNULL=subprocess.DEVNULL,
        STDOUT=subprocess.STDOUT,
        TimeoutExpired=subprocess.TimeoutExpired,
    )
    monkeypatch.setattr(spawn, "subprocess", shim)
