"""A stop reaches every process a worker started, also one that left its process group
(kernelproof.host.members): found through /proc's parent links where there is no cgroup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kernelproof.host import members

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


# A process that makes itself a child subreaper (as the bootstrap makes a worker), forks a child
# that forks a grandchild, leaves the group with it and exits: the grandchild is an orphan.
DOUBLE_FORK = """
import os, sys, time
from kernelproof.sandbox import identity
identity.become_subreaper()
assert identity.is_subreaper()
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode() + b"\\n")
        while True:
            pass
    os._exit(0)
os.wait()
print(os.read(r, 64).decode().strip(), flush=True)
time.sleep(60)
"""


def test_the_orphan_of_a_double_fork_stays_a_descendant_of_a_subreaper():
    reaper = subprocess.Popen(
        [sys.executable, "-c", DOUBLE_FORK], stdout=subprocess.PIPE, start_new_session=True
    )
    assert reaper.stdout is not None
    orphan = int(reaper.stdout.readline())
    try:
        assert members._ppid(orphan) == reaper.pid  # reparented to the reaper, not to init
        assert orphan in members.outside(reaper.pid, None)
        stopped = members.stop(reaper.pid, None)
        assert orphan in stopped and members.state(orphan) == "T"
        members.end(reaper.pid, None)
    finally:
        for pid in (orphan, reaper.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaper.wait()
