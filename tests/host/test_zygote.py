"""Workers forked from the zygote: the same worker as an exec'd one, and nothing of the zygote's."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from kernelproof.host import zygote
from kernelproof.host.process import SpawnSpec, WorkerProcess


def _worker(monkeypatch, forked: bool, role: str = "candidate") -> WorkerProcess:
    monkeypatch.setenv(zygote.ENV_SWITCH, "1" if forked else "0")
    w = WorkerProcess(SpawnSpec(role, "cpu"))
    w.wait_ready()
    return w


def test_a_forked_worker_is_forked_and_an_exec_one_is_not(monkeypatch):
    forked, execd = _worker(monkeypatch, True), _worker(monkeypatch, False)
    try:
        assert isinstance(forked.proc, zygote.Forked)
        assert not isinstance(execd.proc, zygote.Forked)
        assert forked.hello["torch"] == execd.hello["torch"]
    finally:
        forked.close()
        execd.close()


def test_a_forked_worker_holds_the_same_containment_as_an_exec_one(monkeypatch):
    forked, execd = _worker(monkeypatch, True), _worker(monkeypatch, False)
    try:
        assert [(x.name, x.active) for x in forked.layers] == [(x.name, x.active) for x in execd.layers]
        if os.geteuid() == 0:  # a uid of its own: the zygote's uid is not the worker's
            assert all(x.active for x in forked.layers), forked.layers
            assert os.stat(f"/proc/{forked.proc.pid}").st_uid == forked.plan.uid
    finally:
        forked.close()
        execd.close()


def test_a_forked_worker_leads_its_own_session_and_holds_only_its_own_descriptors(monkeypatch):
    w = _worker(monkeypatch, True, role="baseline")  # uncontained: its /proc entries stay readable
    try:
        pid = w.proc.pid
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid
        fds = {int(n): os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
        assert fds[0] == os.devnull
        assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2") == str(w.log_path)
        ours = os.fstat(w.sock.fileno()).st_ino
        sockets = [t for t in fds.values() if t.startswith("socket:")]
        # one socket, the worker's own (its peer's inode is ours + 1 or - 1 for a socketpair)
        assert len(sockets) == 1 and abs(int(sockets[0][8:-1]) - ours) == 1, fds
        assert 4 not in fds  # the report pipe: written and closed by the bootstrap
        print(fds)
    finally:
        w.close()


def test_the_exit_status_of_a_forked_worker_is_its_own(monkeypatch):
    w = _worker(monkeypatch, True)
    try:
        assert w.finish(timeout_s=30) == 0
    finally:
        w.close()
    w = _worker(monkeypatch, True)
    try:
        os.killpg(w.proc.pid, signal.SIGKILL)
        assert w.proc.wait(timeout=30) == -signal.SIGKILL
        assert "SIGKILL" in w._death().message
    finally:
        w.close()


def test_a_zygote_that_ends_ends_its_workers(monkeypatch):
    w = _worker(monkeypatch, True, role="baseline")
    try:
        [z] = [z for z in zygote._zygotes.values() if w.proc.pid in z._children]
        z.close()
        assert w.proc.wait(timeout=30) == -signal.SIGKILL
        with pytest.raises(ProcessLookupError):
            os.kill(w.proc.pid, 0)
        nxt = _worker(monkeypatch, True, role="baseline")  # a fresh zygote serves the next one
        assert isinstance(nxt.proc, zygote.Forked)
        nxt.close()
    finally:
        w.close()


def test_switched_off_no_zygote_is_asked(monkeypatch):
    monkeypatch.setenv(zygote.ENV_SWITCH, "0")
    assert zygote.spawn([], {}, os.getcwd(), (0, 0, 0)) is None


def test_cpu_candidates_and_baselines_share_one_zygote_the_heap_set_by_mallopt(monkeypatch):
    """The candidates' perturbed heap (exploit zoo a2 fails without it) is set in the child."""
    from kernelproof.host.process import CPU_MALLOC_TUNABLES

    start, calls = zygote._split_tunables({"GLIBC_TUNABLES": CPU_MALLOC_TUNABLES, "LANG": "C"})
    assert start == {"LANG": "C"} and calls == [(-6, 128), (-3, 33554432)]
    start, calls = zygote._split_tunables({"GLIBC_TUNABLES": "glibc.malloc.perturb=9:glibc.rtld.nns=2"})
    assert start == {"GLIBC_TUNABLES": "glibc.rtld.nns=2"} and calls == [(-6, 9)]  # a zygote of its own
    candidate = _worker(monkeypatch, True, role="candidate")
    baseline = _worker(monkeypatch, True, role="baseline")
    try:
        owners = [z for z in zygote._zygotes.values() if z.alive() and candidate.proc.pid in z._children]
        assert len(owners) == 1 and baseline.proc.pid in owners[0]._children
    finally:
        candidate.close()
        baseline.close()


def test_a_process_forked_from_the_parent_starts_its_own_zygote(monkeypatch):
    """The parent's zygotes answer on its own reader threads: a forked child must not wait on them."""
    w = _worker(monkeypatch, True, role="baseline")
    try:
        assert zygote._zygotes
        r, wr = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it sees, then leave without any cleanup of the parent's
            os.write(wr, str(len(zygote._zygotes)).encode())
            os._exit(0)
        os.close(wr)
        seen = os.read(r, 16)
        os.close(r)
        os.waitpid(pid, 0)
        assert seen == b"0"
    finally:
        w.close()


def test_a_zygote_whose_parent_is_gone_removes_its_folder():
    """A parent that dies never closes its zygote: the zygote, seeing its socket close, ends and
    takes its private folder with it (a suite run had left one behind each time)."""
    z = zygote.Zygote({"PYTHONHASHSEED": "0"})
    folder = z.dirs.root
    assert folder.is_dir()
    z.sock.shutdown(socket.SHUT_RDWR)  # as the parent's death would: no close(), no removal here
    assert z.proc.wait(timeout=60) == 0
    assert not folder.exists()
    z.close()


def test_both_sides_agree_on_each_entrys_descriptors():
    """The parent may not import the worker's program (import-linter), so each side spells the
    descriptors out: the same numbers, and as many places as the parent sends descriptors."""
    from kernelproof.host import zygote as parent
    from kernelproof.worker import zygote_main as child

    assert (parent.SOCK_FD, parent.REPORT_FD) == (child.SOCK_FD, child.REPORT_FD)
    assert set(parent.ENTRIES) == set(child.ENTRIES)
    for entry, (_, takes) in parent.ENTRIES.items():
        assert len(child.ENTRIES[entry]) == len(takes), entry


def test_a_child_that_exits_before_its_fork_returns_is_still_returned_with_its_code(monkeypatch, tmp_path):
    """A build whose import fails exits at once: its exit report can be read, and the child leave
    the zygote's table, before the thread that asked for the fork runs again. The fork returns the
    child itself (CI once failed here with a KeyError on its pid)."""
    import json
    import threading
    import time
    from concurrent.futures import Future

    class LateFuture(Future):  # the asking thread runs again only after the exit was read
        def result(self, timeout=None):
            got = super().result(timeout)
            time.sleep(0.2)
            return got

    monkeypatch.setattr(zygote, "Future", LateFuture)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    z = object.__new__(zygote.Zygote)
    z.sock, z._send_lock, z._state = ours, threading.Lock(), threading.Lock()
    z._next, z._pending, z._children, z._closed = 0, {}, {}, False
    reader = threading.Thread(target=z._read, daemon=True)
    reader.start()

    def fake_zygote():
        msg, fds, _, _ = socket.recv_fds(theirs, 1 << 16, 4)
        for fd in fds:
            os.close(fd)
        ident = json.loads(msg)["id"]
        theirs.send(json.dumps({"id": ident, "pid": 4242}).encode())
        theirs.send(json.dumps({"exit": 4242, "code": 3}).encode())

    side = threading.Thread(target=fake_zygote, daemon=True)
    side.start()
    r, w = os.pipe()
    try:
        child = z.fork(["x"], {}, tmp_path, (r, w), entry="builder")
    finally:
        os.close(r)
        os.close(w)
        theirs.close()
        reader.join(5)
        ours.close()
    assert child.pid == 4242 and child.wait(5) == 3
