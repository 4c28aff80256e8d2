"""``python -m kernelproof.worker.zygote_main --fd N``: import the worker once, fork every worker from it.

A worker's start was mostly the import of torch and Triton (about 1.5 s of CPU on a 2-core
machine, every time, for a process used by one evaluation). The zygote pays it once: it imports
what ``kernelproof.worker.message_loop`` imports, then waits on its socket to the parent
(kernelproof.host.zygote). For each request it forks a child, which becomes the worker exactly
as ``python -m kernelproof.worker`` would: its own session, the descriptors it was sent (the
worker's socket, its containment report's pipe, its log) and nothing else, the environment it was
sent, then the containment (kernelproof.sandbox.contain) before anything else runs, then the
worker's message loop. Nothing of a candidate ever runs here: the zygote holds no secret (it
starts with the workers' scrubbed environment and is not dumpable) and executes only this file.

The child is single-threaded after the fork, which Landlock, seccomp and a user namespace need;
CUDA is never initialised here (a forked child could not use it), only in the child. The zygote
reaps its children and reports each exit status, which is all the parent would get from waitpid.
When its socket closes (the parent is gone) it kills every child's process group and exits.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import traceback
import warnings

SOCK_FD = 3  # where a worker finds its socket
REPORT_FD = 4  # where a child finds its containment report's pipe
LOG_FD = 1  # and its log, also at 2
# What a child can become, and where its descriptors go (in the order the parent sends them, which
# names these numbers in the arguments; kernelproof.host.zygote.ENTRIES). A builder has no socket.
ENTRIES = {"worker": (SOCK_FD, REPORT_FD, LOG_FD), "builder": (REPORT_FD, LOG_FD)}
MAX_MESSAGE = 1 << 20
PR_SET_DUMPABLE = 4
_libc = ctypes.CDLL(None, use_errno=True)


def preload() -> None:
    """What every worker imports before it serves: torch, the worker's modules, Triton."""
    import torch  # noqa: F401

    import kernelproof.build.builder_main  # noqa: F401
    import kernelproof.worker.message_loop  # noqa: F401

    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - the worker tries again and goes on without it
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kernelproof.worker.zygote_main")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--folder", default="", help="its private folder, removed when it ends")
    ns = ap.parse_args(argv)
    ctl = socket.socket(fileno=ns.fd)
    os.set_inheritable(ns.fd, False)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # its memory and descriptors closed to its uid's processes
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when it ends
    try:
        preload()
    except BaseException as exc:  # noqa: BLE001 - said to the parent, which starts workers the usual way
        _send(ctl, {"error": f"the zygote could not import the worker: {exc!r}"})
        return 1
    if ns.folder:  # also when the parent died without closing it (the parent removes it otherwise)
        atexit.register(shutil.rmtree, ns.folder, True)
    zygote = Zygote(ctl)  # takes the warning filters as the imports left them, a worker's own
    # Python 3.12 warns at every fork of a process with threads: torch's import starts one, idle on
    # a futex (holding no lock), and the child has none of it, as a DataLoader worker forked after
    # torch's import has none.
    warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
    return zygote.serve()


class Zygote:
    """The zygote's loop: fork on request, report exits, end with the parent."""

    def __init__(self, ctl: socket.socket):
        self.ctl = ctl
        own_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        self.base_path = [p for p in sys.path if p not in own_path]  # a worker's sys.path after its own
        self.filters = list(warnings.filters)  # a worker's warning filters
        self.children: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()

    def serve(self) -> int:
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd is written
        _send(self.ctl, {"ready": True, "pid": os.getpid()})
        try:
            while True:
                readable, _, _ = select.select([self.ctl, self.wake_r], [], [])
                if self.wake_r in readable:
                    _drain(self.wake_r)
                self.reap()
                if self.ctl not in readable:
                    continue
                try:
                    data, fds, _, _ = socket.recv_fds(self.ctl, MAX_MESSAGE, 8)
                except OSError:
                    return 0
                if not data:
                    return 0  # the parent is gone
                self.fork(json.loads(data), fds)
        finally:
            self.end_children()

    def fork(self, req: dict, fds: list[int]) -> None:
        """Fork one worker; answer with its pid once it leads its own session (or with why not)."""
        ready_r, ready_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (*fds, ready_r, ready_w):
                os.close(fd)
            _send(self.ctl, {"id": req.get("id"), "error": f"fork failed: {exc}"})
            return
        if pid == 0:
            os.close(ready_r)
            self.become_worker(req, fds, ready_w)  # never returns
        os.close(ready_w)
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        ok = _wait_byte(ready_r, 30.0)
        os.close(ready_r)
        if ok:
            _send(self.ctl, {"id": req.get("id"), "pid": pid})
        else:  # it died (or hung) before its session existed: the parent could not signal its group
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            _send(self.ctl, {"id": req.get("id"), "error": "the forked worker did not start its session"})

    def become_worker(self, req: dict, fds: list[int], ready_w: int) -> None:
        """In the child: become ``python -m MODULE ARGS`` as the parent would have started it.

        MODULE is the request's entry: the worker (whose containment is applied here, before its
        loop, where its ``__main__`` applies it) or the builder (whose ``main`` applies it first).
        """
        code = 1
        try:
            os.setsid()
            os.write(ready_w, b"1")
            os.close(ready_w)
            _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as after an exec: the uid switch decides later
            for param, value in req.get("mallopt", ()):  # the heap an exec'd worker's GLIBC_TUNABLES gave
                if _libc.mallopt(param, value) != 1:
                    raise OSError(f"mallopt({param}, {value}) failed")
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.ctl.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            entry = req.get("entry", "worker")
            _arrange_fds(fds, ENTRIES[entry])
            warnings.filters[:] = self.filters
            env = req["env"]
            os.environ.clear()
            os.environ.update(env)
            tempfile.tempdir = None  # looked up again, in the worker's own TMPDIR
            os.chdir(req["cwd"])
            sys.path[:] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + self.base_path
            args = list(req["args"])
            if entry == "builder":
                from kernelproof.build import builder_main

                sys.argv = [builder_main.__file__, *args]
                code = builder_main.main(args)  # its first step is the containment
            else:
                sys.argv = [os.path.join(os.path.dirname(__file__), "__main__.py"), *args]
                from kernelproof.sandbox.contain import enter

                argv = enter(args)  # the containment, before anything of the request runs
                from kernelproof.worker.message_loop import main as worker_main

                code = worker_main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - said in the worker's log, as an exec'd worker would
            traceback.print_exc()
            code = 1
        finally:
            try:
                atexit.unregister(shutil.rmtree)  # the zygote's folder is the zygote's to remove
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            _send(self.ctl, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})

    def end_children(self) -> None:
        """Kill every child's process group, then reap them: an orphaned zombie would outlive us."""
        for pid in self.children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in self.children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _arrange_fds(fds: list[int], places: tuple[int, ...]) -> None:
    """Each sent descriptor at its place (the log at 1 and 2), /dev/null at 0, nothing else open."""
    if len(fds) != len(places):
        raise OSError(f"{len(fds)} descriptors sent where {len(places)} are needed")
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]  # clear of every target
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, place in zip(moved, places):
        os.dup2(fd, place)
        if place == LOG_FD:
            os.dup2(fd, 2)
    keep = {0, 1, 2, *places}
    for fd in range(3, REPORT_FD + 1):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.closerange(REPORT_FD + 1, _max_fd())


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 65536


def _wait_byte(fd: int, timeout_s: float) -> bool:
    readable, _, _ = select.select([fd], [], [], timeout_s)
    return bool(readable) and os.read(fd, 1) == b"1"


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _send(ctl: socket.socket, doc: dict) -> None:
    try:
        ctl.send(json.dumps(doc).encode())
    except OSError:
        pass  # the parent is gone; the loop ends at the next read


if __name__ == "__main__":
    sys.exit(main())
