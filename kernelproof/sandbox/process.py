"""One worker process seen from the trusted parent: spawn, talk, time out, kill, explain a death.

The worker gets a scrubbed environment (no API keys, a private HOME/TMPDIR/cache dirs out of
/tmp), its own process group (a timeout kills everything it started), a cgroup with memory and
process limits where the machine allows, a containment plan its bootstrap applies before torch is
imported (kernelproof.sandbox.contain: own uid, Landlock, mounts, seccomp; :attr:`layers` says
what held), and a socket the parent reads with strict framing (I1, I8). Whatever the worker does,
the parent gets either a well-formed reply or a :class:`WorkerDied` with a reason code and a sentence.
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelproof.errors import SandboxError, WorkerDied  # WorkerDied: defined in the one tree, raised here
from kernelproof.sandbox import contain, limits, members, replies, zygote
from kernelproof.sandbox import plan as sandbox_plan
from kernelproof.sandbox.dirs import artifact_env
from kernelproof.sandbox.guards import EXIT_VIOLATION, VIOLATION_PREFIX
from kernelproof.sandbox.plan import Layer
from kernelproof.sandbox.private import PrivateDir, package_link
from kernelproof.worker import handoff, protocol, schemas
from kernelproof.worker.expected import Expected

# Tests only switch this off, to show an attack's effect without the reply checks (never the CLI,
# never a stored verdict): every reply is then taken as it comes, as before nonces and schemas.
REPLY_CHECKS = True
# Tests only: False stops only the worker's process group, as kernelproof once did, to show what a
# child that left the group does meanwhile (never the CLI, never a stored verdict).
STOP_MEMBERS = True
STARTUP_TIMEOUT_S = 120.0  # importing torch and initialising CUDA
REPORT_TIMEOUT_S = 30.0  # the bootstrap reports its layers before it imports anything heavy
# -P (Python 3.11+): the working directory (the worker's writable rw/) is not put on sys.path, so a
# module the solution saves there cannot stand in for one the harness imports later.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
BASELINE_UNCONTAINED = "a baseline worker runs the task's own reference, as the parent's uid"
WORKER_MEMORY_BYTES = 64 * 1024**3  # host memory per worker (cgroup); GPU memory is the device's
WORKER_MAX_PIDS = 512  # threads and processes per worker (cgroup): stops fork/thread bombs
# glibc fills freshly allocated heap memory with 0x7f... (perturb byte 0x80 -> fill ^0xff): huge
# finite floats, so a CPU kernel that leaves output elements unwritten fails (the CPU build has
# no caching allocator to poison). mmap_threshold raised so large blocks also come from the heap.
CPU_MALLOC_TUNABLES = "glibc.malloc.perturb=128:glibc.malloc.mmap_threshold=33554432"
PASSED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CC",
    "CXX",
)  # thread counts are the parent's (kernelproof.sandbox.cpus), never the user's OMP_NUM_THREADS


@dataclass
class SpawnSpec:
    role: str  # "candidate" | "baseline"
    device: str  # "cpu" | "cuda:N"
    deny_read: tuple[str, ...] = ()  # paths the worker must not read
    env: dict[str, str] = field(default_factory=dict)  # extra environment (build cache materialisations)
    wrapper: tuple[str, ...] = ()  # a command the worker runs under (compute-sanitizer)
    protected: tuple[str, ...] = ()  # paths no rule may reach (a custom store, its key), besides the defaults


class WorkerProcess:
    def __init__(self, spec: SpawnSpec):
        self.spec = spec
        self.dirs = PrivateDir.create("worker-")
        self.private = self.dirs.ro  # what the parent fills: the solution's copy and its build
        self.scratch = self.dirs.rw  # the worker's only writable directory (its /tmp, where possible)
        self.log_path = self.dirs.root / "worker.log"
        # Looked up on the module at each spawn: the tests' switch for showing an attack uncontained.
        self.plan = (
            sandbox_plan.plan_for(
                spec.role,
                readable=[self.dirs.ro],
                writable=[self.dirs.rw],
                scratch=self.dirs.rw,
                devices=spec.device.startswith("cuda"),
                relaxed=bool(spec.wrapper),
                protected=spec.protected,
            )
            if spec.role == "candidate"
            else sandbox_plan.uncontained(spec.role, BASELINE_UNCONTAINED)
        )
        self._layers: list[Layer] | None = None
        self.cgroup = limits.create(WORKER_MEMORY_BYTES, WORKER_MAX_PIDS)
        parent_sock, child_sock = socket.socketpair()
        env = _worker_env(spec, self.dirs)
        if self.plan.uid >= 0:
            self.dirs.hand_over(self.plan.uid, self.plan.gid)
        plan_path = self.dirs.root / "plan.json"
        plan_path.write_text(self.plan.to_json())
        report_r, report_w = os.pipe()
        self._report = report_r
        self._log = open(self.log_path, "wb")
        forked = (
            None  # a wrapper tool execs its target: that worker is an interpreter of its own
            if spec.wrapper
            else zygote.spawn(
                _worker_args(spec, self.dirs, plan_path, zygote.REPORT_FD, zygote.SOCK_FD),
                env,
                self.dirs.rw,
                (child_sock.fileno(), report_w, self._log.fileno()),
            )
        )
        self.proc: subprocess.Popen | zygote.Forked
        if forked is not None:
            self.proc = forked
        else:
            cmd = [
                *spec.wrapper,
                sys.executable,
                *SAFE_PATH,
                "-m",
                "kernelproof.worker",
                *_worker_args(spec, self.dirs, plan_path, report_w, child_sock.fileno()),
            ]
            self.proc = subprocess.Popen(
                cmd,
                pass_fds=(child_sock.fileno(), report_w),
                env=env,
                cwd=str(self.dirs.rw),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                start_new_session=True,
            )
        os.close(report_w)
        child_sock.close()
        if self.cgroup is not None:
            try:
                self.cgroup.add(self.proc.pid)
            except OSError:
                self.cgroup = None
        self.sock = parent_sock
        self.started = time.monotonic()
        self.hello: dict[str, Any] | None = None
        self.violation: WorkerDied | None = None  # the first protocol violation: nothing read after it
        self._inbox: handoff.Inbox | None = None  # device buffers the worker copies large outputs into
        self.handoff_failed = False  # reading them failed once: outputs take the wire from then on
        # Answers a build message the worker sends mid-request (kernelproof.build.requests); None: refused.
        self.build_handler: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.paused = False  # stopped by pause() until resume()
        self.cores: tuple[int, ...] = ()  # the cores pin() gave it
        self.pinned = ""  # how they hold: "affinity", "affinity+cpuset", or "" (not pinned)
        self._stopped_s = 0.0  # seconds spent stopped, over the worker's life
        self._paused_at = 0.0
        self._stopped_members: set[int] = set()  # processes outside its group that pause() stopped
        self._busy_since: float | None = None  # a request is waiting for its reply since then
        self._lending = threading.Condition()
        self.lent = False  # stopped by the device gate while another evaluation is timed (lend)

    @property
    def layers(self) -> list[Layer]:
        """The containment layers the worker applied, each active or not and why (its bootstrap's
        report, written before any candidate code ran; read once)."""
        if self._layers is None:
            self._layers = contain.parse_report(_read_report(self._report, REPORT_TIMEOUT_S))
            os.close(self._report)
            self._report = -1
        return self._layers

    def sandbox_record(self) -> dict[str, dict[str, Any]]:
        """The layers for a verdict's environment: name -> {"active", "detail"}."""
        return {x.name: {"active": x.active, "detail": x.detail} for x in self.layers}

    def require_layers(self) -> None:
        """Raise SandboxError naming every layer that does not hold (``--require-sandbox``)."""
        missing = [x for x in self.layers if not x.active]
        if missing:
            raise SandboxError(
                "--require-sandbox: the worker's containment is incomplete: "
                + "; ".join(f"{x.name}: {x.detail}" for x in missing)
                + " (python -m kernelproof.sandbox shows the layers on this machine)"
            )

    @property
    def limits_applied(self) -> str:
        return f"cgroup {self.cgroup.kind}" if self.cgroup else "none (cgroups not writable here)"

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> dict[str, Any]:
        self.resume()  # a stopped worker never says hello
        if self.hello is None:
            self._raise_if_violated()
            hello, _ = self._recv(timeout_s, None, {"op": "hello"}, None)
            self.hello = hello
        return self.hello

    def ready_now(self) -> bool:
        """Has the worker finished starting (said hello, or died trying)? Never waits for it."""
        if self.hello is not None:
            return True
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return False
        try:
            self.wait_ready()
        except WorkerDied:
            pass  # dead: nothing is starting any more; whoever takes it replaces it
        return True

    def pause(self, members_too: bool = True) -> None:
        """Stop the worker's processes (SIGSTOP) where they are, e.g. half-way through starting:
        its process group, and (`members_too`) every process it started that left the group
        (:mod:`kernelproof.sandbox.members`), which a frozen cgroup holds already."""
        if not self.paused and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGSTOP)
                self.paused = True
                self._paused_at = time.monotonic()
            except OSError:
                return
            if STOP_MEMBERS and members_too:
                self._stopped_members = members.stop(self.proc.pid, self.cgroup)

    def pin(self, cores: tuple[int, ...]) -> str:
        """Pin every thread of the worker to `cores` (and its cgroup, where cpusets can be written):
        what it starts from now on inherits them, and its filter keeps a candidate from widening
        them. Returns what holds, as the verdict says it ("" when no cores were asked for)."""
        if not cores or not hasattr(os, "sched_setaffinity"):
            return ""
        done, pinned = [], 0
        try:
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                try:
                    os.sched_setaffinity(int(tid), cores)
                    pinned += 1
                except (OSError, ValueError):
                    pass  # a thread that ended meanwhile, or one this process may not pin
        except OSError:
            pass
        if pinned:
            done.append("affinity")
        if self.cgroup is not None and self.cgroup.confine_cpus(cores):
            done.append("cpuset")
        self.cores = cores
        self.pinned = "+".join(done)
        return self.pinned

    @contextmanager
    def frozen(self) -> Iterator[str]:
        """The worker and everything it started stand still meanwhile (a baseline is timed, the
        machine's load is read). Yields how: "cgroup" (its cgroup frozen: every process in it,
        including those that left its process group), "process group" (stopped by signals: its
        process group, and every process of its cgroup or every descendant outside it), or ""
        (it could not be stopped)."""
        if self.lent or self.paused or self.proc.poll() is not None:
            yield "process group" if self.paused else ""
            return
        how = ""
        if self.cgroup is not None and self.cgroup.freeze(True):
            how = "cgroup"
        self.pause(members_too=not how)
        how = how or ("process group" if self.paused else "")
        members.wait_stopped({self.proc.pid})
        try:
            yield how
        finally:
            self.resume()
            if how == "cgroup" and self.cgroup is not None:
                self.cgroup.freeze(False)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._stopped_s += time.monotonic() - self._paused_at
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            members.resume(self._stopped_members)
            self._stopped_members = set()

    def stopped_s(self) -> float:
        """Seconds this worker has spent stopped so far (a stop under way included)."""
        return self._stopped_s + (time.monotonic() - self._paused_at if self.paused else 0.0)

    def lend(self, min_wait_s: float) -> bool:
        """Stop the worker if a request of ours has waited at least `min_wait_s` for its reply, so
        that another evaluation can time the device meanwhile (sandbox/gate.py). Until
        :meth:`give_back` its reply is held back from the caller, and the stopped time does not
        count towards the request's timeout. False if no request is waiting that long."""
        with self._lending:
            since = self._busy_since
            if self.lent or self.paused or since is None or time.monotonic() - since < min_wait_s:
                return False
            self.pause()
            self.lent = self.paused
            return self.lent

    def give_back(self) -> None:
        with self._lending:
            if self.lent:
                self.lent = False
                self.resume()
                self._lending.notify_all()

    def stage_solution(self, source_path: str) -> str:
        """Copy the candidate's file into the worker's private dir; return the path the worker imports."""
        dest = self.private / "solution" / (Path(source_path).stem + ".py")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, dest)
        return str(dest)

    def request(
        self,
        header: dict[str, Any],
        tensors: list[torch.Tensor] | None = None,
        timeout_s: float = 600.0,
        expect: Expected | None = None,
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """One request and its reply. With `expect` (the reference's outputs), the worker compares
        what the call returned before it sends anything (a mismatch is its failed reply,
        ``wrong_shape`` or ``wrong_dtype``), and this process compares the reply's header before it
        reads any tensor data (:mod:`kernelproof.worker.expected`). The request carries a fresh
        nonce; a reply that is not the one to this request, in its kind's schema, with the tensors
        `expect` allows (none without it), ends the worker as ``protocol_violation``
        (:mod:`kernelproof.sandbox.replies`)."""
        self.wait_ready()
        self._raise_if_violated()
        if REPLY_CHECKS:
            self._refuse_unsolicited()
        nonce = secrets.randbits(62)  # keeps frames in step; the candidate can read it (no secret)
        header = {**header, "nonce": nonce}
        if expect is not None:
            header = {**header, "expect": expect.to_json()}
        try:
            self.sock.settimeout(timeout_s)
            protocol.send(self.sock, header, tensors)
        except (OSError, protocol.ProtocolError):
            raise self._death() from None
        return self._recv(timeout_s, expect, header, nonce)

    def request_outputs(
        self,
        header: dict[str, Any],
        tensors: list[torch.Tensor] | None,
        like: list[torch.Tensor],
        timeout_s: float = 600.0,
        lend: bool = False,
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """A request whose reply returns outputs shaped like ``like`` (the reference's).

        Large ones come back on the device where both sides can (:mod:`kernelproof.worker.handoff`),
        the others over the wire; either way the list is in the worker's order. With `lend`, the
        request's large tensors go to the worker the same way (a run's inputs).
        """
        inbox = self._handoff_inbox()
        offered = inbox.offer(like) if inbox is not None else []
        lent = inbox.lend(tensors or []) if inbox is not None and lend else []
        sent = list(tensors or [])
        for d in lent:  # an empty stand-in keeps every other tensor at its index
            sent[d["t"]] = torch.empty(0, dtype=sent[d["t"]].dtype)
        extra = {**({"into": offered} if offered else {}), **({"from": lent} if lent else {})}
        expect = Expected.like(like)
        reply, outs = self.request({**header, **extra}, sent, timeout_s, expect)
        failed = bool(lent) and reply.get("handoff") == "failed"  # the worker could not map a lent input
        if offered and reply.get("ok"):
            try:
                outs = inbox.collect(offered, reply, outs)  # type: ignore[union-attr]
            except protocol.ProtocolError as exc:
                raise self._violated(f"its device buffers do not match the request: {exc}") from None
            except Exception:  # noqa: BLE001 - this process cannot read its buffers
                failed = True
        if failed:  # the wire from now on; runs and fetches can be asked again
            self.handoff_failed = True
            return self.request(header, tensors, timeout_s, expect)
        return reply, outs

    def _handoff_inbox(self) -> handoff.Inbox | None:
        if self.handoff_failed:
            return None
        if self._inbox is None and self.spec.device.startswith("cuda") and not self.spec.wrapper:
            if self.wait_ready().get("handoff") and handoff.available():
                self._inbox = handoff.Inbox(torch.device(self.spec.device))
        return self._inbox

    def _recv(
        self, timeout_s: float, expect: Expected | None, request: dict[str, Any], nonce: int | None
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """The reply to `request` (sent with `nonce`; None: the worker's hello), checked against
        its kind's schema and `expect` before any tensor byte is read (I10). Anything else ends
        the worker as ``protocol_violation``; a closed connection is explained as a death."""
        self._await_reply(timeout_s)
        self.sock.settimeout(timeout_s)
        try:
            incoming = protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES)
            while incoming.header.get("op") == "build" and nonce is not None:
                # The solution asked for a build (kernelproof.build.requests): not the reply. Its
                # arguments are read in that module's schema by the handler; it carries no tensors.
                if incoming.metas:
                    incoming.drop()
                    raise self._violated(f"a build message carries {len(incoming.metas)} tensors")
                incoming.drop()
                protocol.send(self.sock, self._built(incoming.header))
                self._await_reply(timeout_s)  # the build's time is --build-timeout's, not the request's
                incoming = protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES)
            found = replies.violation(request, nonce, incoming, expect) if REPLY_CHECKS else None
            if found is not None:
                incoming.drop()
                raise self._violated(found)
            if nonce is not None:  # the envelope has done its job: callers read the reply itself
                for key in schemas.ENVELOPE[1:]:
                    incoming.header.pop(key, None)
            return incoming.header, incoming.read()
        except TimeoutError:
            self.kill()
            raise self._timed_out(timeout_s) from None
        except protocol.PeerClosed:
            raise self._death() from None
        except protocol.ProtocolError as exc:
            raise self._violated(str(exc)) from None
        except OSError:
            raise self._death() from None

    def _refuse_unsolicited(self) -> None:
        """Between requests nothing may arrive: bytes waiting now are a frame nobody asked for
        (the candidate wrote to the worker's socket), an end of file a death."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            if not readable:
                return
            waiting = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            raise self._death() from None
        if not waiting:
            raise self._death()
        raise self._violated("the worker sent a frame between requests, which no request asked for")

    def _violated(self, found: str) -> WorkerDied:
        """End the worker for a protocol violation and remember it: nothing it sent is used after."""
        self.kill()
        self.violation = WorkerDied(
            "protocol_violation",
            f"the worker broke the reply protocol ({found}): the solution shares the worker's process "
            "and its socket, so the violation is the solution's",
            _tail(self.log_tail()),
        )
        return self.violation

    def _raise_if_violated(self) -> None:
        if self.violation is not None:
            raise self.violation

    def _built(self, header: dict[str, Any]) -> dict[str, Any]:
        """The answer to a build message: the handler's, or a refusal where none is set.

        While the build runs the worker only waits for this answer: it gives up its GPU slot as a
        worker awaiting a reply does (:meth:`lend`, sandbox/gate.py). A timing waiting for the
        device may stop it and go ahead once the device is quiet; the answer is still sent, and the
        request's reply is held back until the worker is given back, as any lent worker's is."""
        if self.build_handler is None:
            return {"op": "built", "ok": False, "message": "this worker's builds are not served"}
        with self._lending:
            self._busy_since = time.monotonic()
        try:
            return self.build_handler(header)
        finally:
            with self._lending:
                self._busy_since = None

    def _await_reply(self, timeout_s: float) -> None:
        """Wait until the reply starts (or the socket closes), counting only the time the worker
        ran: time it spent stopped (:meth:`lend`, :meth:`pause`) is not its own. A lent worker's
        reply waits for :meth:`give_back`, so its caller does nothing while the device is timed."""
        start, stopped = time.monotonic(), self.stopped_s()
        self._busy_since = start
        try:
            while True:
                readable, _, _ = select.select([self.sock], [], [], 0.1)
                if readable:
                    with self._lending:
                        while self.lent:
                            self._lending.wait()
                        self._busy_since = None
                    return
                if time.monotonic() - start - (self.stopped_s() - stopped) >= timeout_s:
                    self.kill()
                    raise self._timed_out(timeout_s)
        finally:
            self._busy_since = None

    def _timed_out(self, timeout_s: float) -> WorkerDied:
        return WorkerDied("timeout", f"the worker did not answer within {timeout_s:.0f} s and was killed")

    def _death(self) -> WorkerDied:
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        log = self.log_tail()
        for line in reversed(log.splitlines()):
            if line.startswith(VIOLATION_PREFIX):
                return WorkerDied(
                    "forbidden_construct", "forbidden action: " + line[len(VIOLATION_PREFIX) :], ""
                )
        if rc == EXIT_VIOLATION:
            return WorkerDied("forbidden_construct", "the solution attempted a forbidden action")
        low = log.lower()
        if (
            "illegal memory access" in low
            or "misaligned address" in low
            or "unspecified launch failure" in low
        ):
            return WorkerDied(
                "crash", "CUDA error in the solution's kernel (illegal memory access)", _tail(log)
            )
        # "out of memory" in the log decides nothing: the solution writes that log. Whether a death
        # was kernelproof's own lack of memory is decided from the parent's facts only
        # (kernelproof/evaluate/memory_blame.py, api._beyond_the_device); the log is shown.
        if self.cgroup is not None and self.cgroup.oom_killed():
            return WorkerDied("crash", "the worker exceeded its host memory limit and was killed", _tail(log))
        if rc is not None and rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            return WorkerDied("crash", f"the worker died from signal {name}", _tail(log))
        if rc == 0:
            return WorkerDied(
                "forbidden_construct", "the solution ended the worker process (sys.exit / os._exit)"
            )
        if rc == protocol.EXIT_HARNESS:
            return WorkerDied(
                "crash",
                f"the worker exited with status {rc}: its harness failed, or the solution ended it "
                "(its log is below)",
                _tail(log),
            )
        return WorkerDied("crash", f"the worker exited with status {rc}", _tail(log))

    def log_tail(self, max_bytes: int = 8000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-max_bytes:].decode("utf-8", errors="replace")

    def finish(self, timeout_s: float = 300.0) -> int | None:
        """Ask the worker to exit and wait for it (a wrapper prints its report at exit)."""
        try:
            self.sock.settimeout(10.0)
            protocol.send(self.sock, {"op": "bye"})
            protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES).drop()  # read, never used
        except Exception:  # noqa: BLE001 - it may already be gone
            pass
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """End the worker and everything it started: the processes that left its group first
        (found while it lives, or through its cgroup), then its process group."""
        if self.proc.poll() is None or self.cgroup is not None:  # a dead worker's pid may be reused
            members.end(self.proc.pid, self.cgroup)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self.proc.poll() is None:
            members.end(self.proc.pid, self.cgroup)  # found while it lives: its exit orphans them
            try:
                self.sock.settimeout(2.0)
                protocol.send(self.sock, {"op": "bye"})
                protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES).drop()  # never used
            except Exception:  # noqa: BLE001 - the worker is going away either way
                pass
        self.kill()
        if self._inbox is not None:  # the worker, and with it every mapping of these buffers, is gone
            self._inbox.close()
            self._inbox = None
        self.sock.close()
        self._log.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self._report >= 0:
            os.close(self._report)
            self._report = -1
        self.dirs.remove()
        sandbox_plan.release(self.plan)


def _worker_args(
    spec: SpawnSpec, dirs: PrivateDir, plan_path: Path, report_fd: int, sock_fd: int
) -> list[str]:
    """``python -m kernelproof.worker``'s arguments, with the descriptor numbers the worker will see."""
    args = [
        contain.PLAN_FLAG,
        str(plan_path),
        contain.REPORT_FLAG,
        str(report_fd),
        "--fd",
        str(sock_fd),
        "--role",
        spec.role,
        "--private-dir",
        str(dirs.rw),
    ]
    for p in spec.deny_read:
        args += ["--deny-read", p]
    if spec.wrapper:  # compute-sanitizer: the worker leaves CUPTI to the tool
        args.append("--no-profiler-warmup")
    return args


def _tail(log: str, lines: int = 12) -> str:
    return "\n".join(log.splitlines()[-lines:])


def _read_report(fd: int, timeout_s: float) -> str:
    """What the worker's bootstrap wrote on its report pipe, up to the pipe's end."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not readable:
            break
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _worker_env(spec: SpawnSpec, dirs: PrivateDir) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(package_link(dirs.ro)), *sandbox_plan.library_paths()])
    built = artifact_env(dirs.ro)  # the parent materialises a solution's build there after spawn
    env.update(
        {
            "HOME": str(dirs.rw),
            "TMPDIR": str(dirs.rw / "tmp"),
            "TORCH_EXTENSIONS_DIR": built["TORCH_EXTENSIONS_DIR"],
            "KERNELPROOF_NATIVE_DIR": built["KERNELPROOF_NATIVE_DIR"],
            "TRITON_CACHE_DIR": str(dirs.rw / "triton"),  # Triton compiles in the worker at first launch
            "TORCHINDUCTOR_CACHE_DIR": str(dirs.rw / "inductor"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONHASHSEED": "0",
        }
    )
    if spec.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        # Candidate and baselines alike: the perturbed heap poisons the candidate's fresh blocks for
        # correctness, and a baseline timed with glibc's plain malloc against a candidate whose
        # every malloc and free fills its block would compare two allocators, not two programs.
        env["GLIBC_TUNABLES"] = CPU_MALLOC_TUNABLES
    else:
        index = int(spec.device.split(":")[1]) if ":" in spec.device else 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [v for v in visible.split(",") if v.strip()] if visible else None
        env["CUDA_VISIBLE_DEVICES"] = ids[index] if ids and index < len(ids) else str(index)
    env.update(spec.env)
    return env
