"""Workers forked from a process that has already imported torch (the parent's side of the zygote).

Starting a worker meant starting Python and importing torch and Triton, about 1.5 s of CPU for a
process that serves one evaluation; with spares started ahead, that cost left the critical path
but not the machine, and on a busy one it was most of an evaluation's CPU. A zygote
(:mod:`kernelproof.worker.zygote_main`) imports them once and forks each worker, which then applies its
containment and serves exactly as an exec'd one (same arguments, environment, descriptors,
session, containment report); a builder (kernelproof.build.builder_main) is forked from one the
same way. One zygote serves every worker whose interpreter starts the same way
(:data:`START_ENV`: what Python, the loader and Triton's import read only at start); the rest of a
worker's environment is set in the child before anything reads it, and the CPU candidates'
perturbed heap (``GLIBC_TUNABLES``) is set with ``mallopt`` there, so they share the baselines' zygote.

:func:`spawn` returns a :class:`Forked`, which answers ``pid``, ``poll``, ``wait`` and
``returncode`` as a ``subprocess.Popen`` does (the zygote reaps the child and reports its exit
status). ``KERNELPROOF_ZYGOTE=0`` starts every worker with its own interpreter instead, as does a
worker under a wrapper tool (compute-sanitizer execs its target) and any worker when the zygote
cannot start (its reason is kept in :func:`status`).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from kernelproof.errors import SandboxError
from kernelproof.sandbox.private import PrivateDir, package_link

ENV_SWITCH = "KERNELPROOF_ZYGOTE"  # "0": every worker is its own interpreter
SOCK_FD = 3  # kernelproof.worker.zygote_main.SOCK_FD: where a forked worker finds its socket
REPORT_FD = 4  # kernelproof.worker.zygote_main.REPORT_FD: where it finds its containment report's pipe
# Read by the interpreter or the dynamic loader only when a process starts: workers that differ in
# one of these need a zygote of their own. Everything else is set in the forked child.
START_ENV = (
    "GLIBC_TUNABLES",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONHASHSEED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "PYTHONWARNINGS",
    "PYTHONIOENCODING",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "PATH",
    "OMP_NUM_THREADS",  # OpenMP reads it when torch's library loads
    # Triton decorates its own library (triton.language's @jit helpers) when it is imported: the
    # CPU workers' interpreter mode has to be on by then.
    "TRITON_INTERPRET",
)
# What a zygote can become: the module it stands for (``python -m MODULE``) and its descriptors in
# the order `spawn` takes them (kernelproof.worker.zygote_main.ENTRIES places them).
ENTRIES = {
    "worker": ("kernelproof.worker", ("socket", "report", "log")),
    "builder": ("kernelproof.build.builder_main", ("report", "log")),
}
# glibc's malloc tunables that mallopt(3) sets the same way at run time: M_PERTURB, M_MMAP_THRESHOLD.
MALLOPT = {"glibc.malloc.perturb": -6, "glibc.malloc.mmap_threshold": -3}
START_TIMEOUT_S = 120.0  # importing torch and Triton once
SPAWN_TIMEOUT_S = 60.0
MAX_MESSAGE = 1 << 20

_zygotes: dict[tuple, Zygote] = {}
_failed: dict[tuple, str] = {}
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def spawn(
    args: Sequence[str], env: dict[str, str], cwd: Path, fds: tuple[int, ...], entry: str = "worker"
) -> Forked | None:
    """Fork ``python -m MODULE ARGS`` from the zygote for `env`'s start, MODULE named by `entry`.

    ``"worker"`` is ``kernelproof.worker``: `fds` are its socket, its report pipe's write end and
    its log, which it finds at :data:`SOCK_FD`, :data:`REPORT_FD` and 1/2. ``"builder"`` is
    ``kernelproof.build.builder_main``: `fds` are its report pipe's write end and its log (at
    :data:`REPORT_FD` and 1/2). The caller writes those numbers into `args`. None where no zygote
    can serve (disabled, or it failed to start: :func:`status` says why): the caller then starts
    the process itself.
    """
    _, takes = ENTRIES[entry]
    if len(fds) != len(takes):
        raise ValueError(f"a zygote's {entry} takes {', '.join(takes)}: {len(fds)} descriptors given")
    if not enabled():
        return None
    start, malloc = _split_tunables(env)
    key = tuple((k, start[k]) for k in START_ENV if k in start)
    with _lock:
        if key in _failed:
            return None
        zygote = _zygotes.get(key)
        if zygote is not None and not zygote.alive():
            zygote.close()  # its workers are gone with it; its folder goes too
            zygote = None
        if zygote is None:
            try:
                zygote = _zygotes[key] = Zygote(dict(key))
            except SandboxError as exc:
                _failed[key] = str(exc)
                return None
    try:
        return zygote.fork(args, env, cwd, fds, malloc, entry)
    except SandboxError:
        return None  # this one is started the usual way; the next asks a fresh zygote


def _split_tunables(env: dict[str, str]) -> tuple[dict[str, str], list[tuple[int, int]]]:
    """`env` with the malloc tunables that ``mallopt`` sets as well taken out of GLIBC_TUNABLES, and
    those as ``mallopt`` calls for the child: so CPU candidates (perturbed heap) and baselines
    share one zygote. Any other tunable stays a start variable."""
    tunables = env.get("GLIBC_TUNABLES")
    if not tunables:
        return env, []
    calls, rest = [], []
    for item in tunables.split(":"):
        name, _, value = item.partition("=")
        if name in MALLOPT and value.isdigit():
            calls.append((MALLOPT[name], int(value)))
        elif item:
            rest.append(item)
    start = {k: v for k, v in env.items() if k != "GLIBC_TUNABLES"}
    if rest:
        start["GLIBC_TUNABLES"] = ":".join(rest)
    return start, calls


def status() -> dict[str, str]:
    """Each zygote's state, for diagnosis: 'pid N' or why it could not start."""
    with _lock:
        out = {repr(dict(k)): f"pid {z.pid}" for k, z in _zygotes.items() if z.alive()}
        out.update({repr(dict(k)): why for k, why in _failed.items()})
    return out


def shutdown() -> None:
    """End every zygote (and with it any worker it forked that is still alive)."""
    with _lock:
        zygotes = list(_zygotes.values())
        _zygotes.clear()
    for z in zygotes:
        z.close()


def _forget() -> None:
    """In a child forked from this process: the zygotes are the parent's (their sockets and reader
    threads stay there); the child starts its own when it needs one."""
    global _lock
    _zygotes.clear()
    _failed.clear()
    _lock = threading.Lock()


atexit.register(shutdown)
os.register_at_fork(after_in_child=_forget)


class Forked:
    """A forked worker as its parent sees it: the ``subprocess.Popen`` calls the pool makes."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._ended = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def _end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._ended.set()


class Zygote:
    """One zygote process: started on construction, forks on request, reports exits."""

    def __init__(self, start_env: dict[str, str]):
        self.dirs = PrivateDir.create("zygote-")
        self.log_path = self.dirs.root / "zygote.log"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        from kernelproof.sandbox.plan import library_paths  # plan imports identity, which is heavier

        env = {
            **start_env,
            "PYTHONPATH": os.pathsep.join([str(package_link(self.dirs.ro)), *library_paths()]),
            "HOME": str(self.dirs.rw),
            "TMPDIR": str(self.dirs.rw / "tmp"),
            "CUDA_VISIBLE_DEVICES": "",  # never initialised here; each child sets its own
        }
        safe_path = ("-P",) if sys.version_info >= (3, 11) else ()
        cmd = [
            sys.executable,
            *safe_path,
            "-m",
            "kernelproof.worker.zygote_main",
            "--fd",
            str(theirs.fileno()),
        ]
        cmd += ["--folder", str(self.dirs.root)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                pass_fds=(theirs.fileno(),),
                env=env,
                cwd=str(self.dirs.rw),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C reaches the parent, which then ends it
            )
        theirs.close()
        self.sock = ours
        self.pid = self.proc.pid
        self._send_lock = threading.Lock()
        self._state = threading.Lock()
        self._next = 0
        self._pending: dict[int, Future] = {}
        self._children: dict[int, Forked] = {}
        self._closed = False
        self.sock.settimeout(START_TIMEOUT_S)
        try:
            first = json.loads(self.sock.recv(MAX_MESSAGE) or b"{}")
        except (OSError, ValueError):
            first = {}
        if not first.get("ready"):
            why = first.get("error") or f"no answer within {START_TIMEOUT_S:.0f} s ({self._log_tail()})"
            self.close()
            raise SandboxError(f"the worker zygote did not start: {why}")
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, name="kernelproof-zygote", daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def fork(
        self,
        args: Sequence[str],
        env: dict[str, str],
        cwd: Path,
        fds: tuple[int, ...],
        malloc: Sequence[tuple[int, int]] = (),
        entry: str = "worker",
    ) -> Forked:
        future: Future = Future()
        with self._state:
            if self._closed:
                raise SandboxError("the worker zygote has ended")
            self._next += 1
            ident = self._next
            self._pending[ident] = future
        doc = {
            "id": ident,
            "entry": entry,
            "args": list(args),
            "env": env,
            "cwd": str(cwd),
            "mallopt": list(malloc),
        }
        try:
            with self._send_lock:
                socket.send_fds(self.sock, [json.dumps(doc).encode()], list(fds))
            reply, child = future.result(timeout=SPAWN_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure here: the caller starts it itself
            with self._state:
                self._pending.pop(ident, None)
            raise SandboxError(f"the worker zygote did not fork: {exc}") from None
        if child is None:
            raise SandboxError(f"the worker zygote did not fork: {reply.get('error')}")
        # the child itself, not a lookup: one that exits at once (a build whose import fails) may
        # have had its exit read, and left the table, before this thread runs again
        return child

    def _read(self) -> None:
        """Replies and exit reports, until the zygote's socket closes."""
        while True:
            try:
                data = self.sock.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            with self._state:
                if "exit" in msg:
                    child = self._children.pop(msg["exit"], None)
                    if child is not None:
                        child._end(int(msg["code"]))
                    continue
                child = None
                if "pid" in msg:
                    child = self._children[msg["pid"]] = Forked(msg["pid"])
                future = self._pending.pop(msg.get("id"), None)
            if future is not None:
                future.set_result((msg, child))
        self._ended()

    def _ended(self) -> None:
        """The zygote is gone: its children are orphans; kill them and report them killed."""
        with self._state:
            self._closed = True
            children, self._children = list(self._children.values()), {}
            pending, self._pending = list(self._pending.values()), {}
        for child in children:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
            child._end(-signal.SIGKILL)
        for future in pending:
            future.set_result(({"error": "the worker zygote ended"}, None))

    def close(self) -> None:
        """Close the socket (the zygote then kills its children and exits) and wait for it."""
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        self.sock.close()
        self.dirs.remove()

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip() or "its log is empty"
        except OSError:
            return "no log"
