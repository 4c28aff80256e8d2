"""A contained command's timeout that starts once the code under test runs, not when its interpreter starts.

kernelproof.sandbox.spawn.run (the builder's child) counts its timeout from the process's start, and
the child imports torch before it imports the solution: about 2 s on an idle 2-core machine, 20 s
and more on a loaded one. A test of what happens at the timeout gives it a short one; so that a slow
import is never what runs out, its solution writes :data:`MARKER` into its working directory (the
build's ``tmp/``, also its ``$TMPDIR``) once it runs, and :func:`count_from_marker` makes spawn.run's
wait start the clock only then. What the timeout does when it fires is unchanged.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

MARKER = "kp-test-running"  # written by the solution under test once its own code runs
# What the solution writes: one line to paste into its module level.
WRITE_MARKER = f"open(__import__('os').environ['TMPDIR'] + '/{MARKER}', 'w').close()\n"


class _CountsFromMarker(subprocess.Popen):
    """A Popen whose timed wait first waits, without limit, for the marker (or the process's end):
    pytest-timeout ends a test whose solution never gets that far."""

    def __init__(self, *args, cwd=None, **kwargs):
        self.marker = Path(cwd or ".") / MARKER
        super().__init__(*args, cwd=cwd, **kwargs)

    def wait(self, timeout=None):
        if timeout is not None:
            while not self.marker.exists() and self.poll() is None:
                time.sleep(0.05)
        return super().wait(timeout)


def count_from_marker(monkeypatch) -> None:
    """For this test, spawn.run's timeouts count from the solution's marker (see the module's doc)."""
    from kernelproof.sandbox import spawn

    shim = SimpleNamespace(
        Popen=_CountsFromMarker,
        DEVNULL=subprocess.DEVNULL,
        STDOUT=subprocess.STDOUT,
        TimeoutExpired=subprocess.TimeoutExpired,
    )
    monkeypatch.setattr(spawn, "subprocess", shim)
