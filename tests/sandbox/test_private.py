"""Private directories whose creator died are removed by the next process that creates one.

A parent that is killed (or ended by a framework that skips exit handlers: Ray ends its workers
so) never removes its workers' and its zygote's directories; they had piled up under the sandbox
root, a few for every test run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kernelproof.sandbox import private
from kernelproof.sandbox.private import OWNER, PrivateDir, sweep_stale

CREATE_AND_WAIT = """
import sys, time
from kernelproof.sandbox.private import PrivateDir
d = PrivateDir.create("worker-")
print(d.root, flush=True)
time.sleep(600)
"""


def test_a_dead_creators_directory_is_swept_and_a_live_ones_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv(private.ROOT_ENV, str(tmp_path / "root"))
    env = {**os.environ, private.ROOT_ENV: str(tmp_path / "root")}
    child = subprocess.Popen(
        [sys.executable, "-c", CREATE_AND_WAIT], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        theirs = child.stdout.readline().strip()
        assert theirs and os.path.isdir(theirs), theirs
        ours = PrivateDir.create("zygote-")
        assert sweep_stale() == []  # both creators alive
        assert os.path.isdir(theirs) and ours.root.is_dir()
        child.send_signal(signal.SIGKILL)  # no exit handler runs
        child.wait()
        assert [str(p) for p in sweep_stale()] == [theirs]
        assert not os.path.exists(theirs) and ours.root.is_dir()
        ours.remove()
        assert not ours.root.exists()
    finally:
        child.kill()
        child.wait()


def test_the_first_directory_a_process_creates_sweeps_the_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setenv(private.ROOT_ENV, str(root))
    monkeypatch.setattr(private, "_swept", set())
    root.mkdir(mode=0o711)
    stale = root / "worker-stale"
    (stale / "rw").mkdir(parents=True)
    (stale / OWNER).write_text("12345\n")  # nobody holds its lock
    d = PrivateDir.create("worker-")
    try:
        assert not stale.exists() and d.root.is_dir()
    finally:
        d.remove()


def test_a_directory_without_an_owner_file_is_kept_until_it_is_a_day_old(tmp_path, monkeypatch):
    """Being created right now, or left by a version without owner files."""
    root = tmp_path / "root"
    monkeypatch.setenv(private.ROOT_ENV, str(root))
    root.mkdir(mode=0o711)
    young, old, other = root / "worker-young", root / "zygote-old", root / "not-ours"
    for d in (young, old, other):
        d.mkdir()
    day_ago = time.time() - private.LEGACY_AGE_S - 60
    for d in (old, other):
        os.utime(d, (day_ago, day_ago))
    assert sweep_stale() == [old]
    assert young.is_dir() and other.is_dir()


def test_an_owner_file_is_locked_before_a_sweep_can_see_it(tmp_path, monkeypatch):
    monkeypatch.setenv(private.ROOT_ENV, str(tmp_path / "root"))
    d = PrivateDir.create("worker-")
    try:
        assert sorted(p.name for p in d.root.iterdir()) == [OWNER, "ro", "rw"]
        assert (d.root / OWNER).read_text() == f"{os.getpid()}\n"
        assert sweep_stale() == []
    finally:
        d.remove()
