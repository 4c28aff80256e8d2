"""A stop reaches every process a worker started, also one that left its process group
(kernelproof.sandbox.members): found through /proc's parent links where there is no cgroup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kernelproof.sandbox import members

# A parent that forks a child which leaves the parent's session and process group, then spins;
# the parent prints the child's pid and sleeps.
LEAVER = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    while True:
        pass
print(pid, flush=True)
time.sleep(60)
"""


def _leaver() -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen([sys.executable, "-c", LEAVER], stdout=subprocess.PIPE, start_new_session=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 5
    while os.getpgid(child) == parent.pid and time.monotonic() < deadline:  # until it has left
        time.sleep(0.01)
    return parent, child


def test_a_child_that_left_the_group_is_stopped_and_continued_with_its_parent():
    parent, child = _leaver()
    try:
        assert members.descendants(parent.pid) == {child}
        stopped = members.stop(parent.pid, None)
        assert stopped == {child} and members.state(child) == "T"
        members.resume(stopped)
        deadline = time.monotonic() + 5
        while members.state(child) == "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert members.state(child) in ("R", "S")
    finally:
        for pid in (child, parent.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        parent.wait()


def test_a_process_that_started_nothing_has_no_members_to_stop():
    lone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert members.descendants(lone.pid) == set()
        assert members.stop(lone.pid, None) == set()
    finally:
        lone.kill()
        lone.wait()


def test_a_child_that_left_the_group_is_ended_with_its_parent():
    parent, child = _leaver()
    try:
        members.end(parent.pid, None)
        deadline = time.monotonic() + 5
        while members.state(child) not in ("Z", "X", "") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert members.state(child) in ("Z", "X", "")  # killed (a zombie until its parent reaps it)
    finally:
        parent.kill()
        parent.wait()
