"""One worker process seen from the trusted parent: spawn, talk, time out, kill.

The worker gets a scrubbed environment (no API keys, a private HOME/TMPDIR/cache dirs out of
/tmp), its own process group (a timeout kills everything it started), a cgroup with memory and
process limits where the machine allows, a containment plan its bootstrap applies before torch is
imported (kernelproof.sandbox.contain: own uid, Landlock, mounts, seccomp; :attr:`layers` says
what held), and a socket the parent reads with strict framing (I1, I8). Whatever the worker does,
the parent gets either a well-formed reply or a :class:`WorkerDied` with a reason code and a sentence.

What it starts from is decided in :mod:`kernelproof.host.launch`, when it runs and on which
cores in :mod:`kernelproof.host.scheduling`, and what its death was in
:mod:`kernelproof.host.deaths`; this module spawns it and carries its requests and replies.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelproof.errors import SandboxError, WorkerDied  # WorkerDied: defined in the one tree, raised here
from kernelproof.host import deaths, inbox, launch, members, zygote
from kernelproof.host.launch import CPU_MALLOC_TUNABLES, SAFE_PATH, SpawnSpec  # noqa: F401  (importable here)
from kernelproof.host.scheduling import Scheduling
from kernelproof.sandbox import contain, limits
from kernelproof.sandbox import plan as sandbox_plan
from kernelproof.sandbox.plan import Layer
from kernelproof.sandbox.private import PrivateDir
from kernelproof.wire import handoff, protocol, schemas
from kernelproof.wire.expected import Expected

# Tests only switch this off, to show an attack's effect without the reply checks (never the CLI,
# never a stored verdict): every reply is then taken as it comes, as before nonces and schemas.
REPLY_CHECKS = True
LAST_WORD_TIMEOUT_S = 15.0  # the candidate's bye at close: its reply (or a stray one before it) is immediate
STARTUP_TIMEOUT_S = 120.0  # importing torch and initialising CUDA
REPORT_TIMEOUT_S = 30.0  # the bootstrap reports its layers before it imports anything heavy


class WorkerProcess(Scheduling):
    """A spawned worker and the parent's end of its socket; :meth:`close` ends both."""

    def __init__(self, spec: SpawnSpec):
        self.spec = spec
        self.dirs = PrivateDir.create("worker-")
        self.private = self.dirs.ro  # what the parent fills: the solution's copy and its build
        self.scratch = self.dirs.rw  # the worker's only writable directory (its /tmp, where possible)
        self.log_path = self.dirs.root / "worker.log"
        self.plan = launch.worker_plan(spec, self.dirs)
        self._layers: list[Layer] | None = None
        self.cgroup = limits.create(launch.WORKER_MEMORY_BYTES, launch.WORKER_MAX_PIDS)
        parent_sock, child_sock = socket.socketpair()
        env = launch.worker_env(spec, self.dirs)
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
                launch.worker_args(spec, self.dirs, plan_path, zygote.REPORT_FD, zygote.SOCK_FD),
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
                *launch.worker_args(spec, self.dirs, plan_path, report_w, child_sock.fileno()),
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
        # Answers a build message the worker sends mid-request (kernelproof.build.runtime_request); None: refused.
        self.build_handler: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._init_scheduling()  # running, unpinned, nothing stopped (host/scheduling.py)

    @property
    def layers(self) -> list[Layer]:
        """The containment layers the worker applied, each active or not and why (its bootstrap's
        report, written before any candidate code ran; read once)."""
        if self._layers is None:
            self._layers = contain.parse_report(launch.read_report(self._report, REPORT_TIMEOUT_S))
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

    def stage_solution(self, source_path: str, data: bytes | None = None) -> str:
        """Write the candidate's file into the worker's private dir; return the path the worker imports.

        `data`: the bytes the evaluation read, hashed and judges (kernelproof/submission.py); the
        path then only names the copy. Without it the file is read here (tests and tools only)."""
        dest = self.private / "solution" / (Path(source_path).stem + ".py")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(Path(source_path).read_bytes() if data is None else data)
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
        reads any tensor data (:mod:`kernelproof.wire.expected`). The request carries a fresh
        nonce; a reply that is not the one to this request, in its kind's schema, with the tensors
        `expect` allows (none without it), ends the worker as ``protocol_violation``
        (:mod:`kernelproof.host.inbox`)."""
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
        runs: int = 1,
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """A request whose reply returns outputs shaped like ``like`` (the reference's), ``runs``
        times over.

        Large ones come back on the device where both sides can (:mod:`kernelproof.wire.handoff`),
        the others over the wire; either way the list is in the worker's order. With more than one
        run every output takes the wire (a case's two runs of small outputs: the worker hands over
        run 1's only where run 2 answers by fingerprint). With `lend`, the request's large tensors
        go to the worker on the device (a run's inputs).
        """
        inbox = self._handoff_inbox()
        offered = inbox.offer(like) if inbox is not None and runs == 1 else []
        lent = inbox.lend(tensors or []) if inbox is not None and lend else []
        sent = list(tensors or [])
        for d in lent:  # an empty stand-in keeps every other tensor at its index
            sent[d["t"]] = torch.empty(0, dtype=sent[d["t"]].dtype)
        extra = {**({"into": offered} if offered else {}), **({"from": lent} if lent else {})}
        expect = Expected.like(like, runs)
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

    def handoff_bytes(self) -> int:
        """Device memory this process holds for the worker's handoff, kept until the worker exits
        (:mod:`kernelproof.wire.handoff` says why); 0 with none. Setup predicts it beside its
        measure of the parent (kernelproof/evaluate/setup.py, ``handoff_bytes``); the timed
        rounds' reservation adds what the cases made beyond that (kernelproof/evaluate/timing.py)."""
        return self._inbox.held_bytes() if self._inbox is not None else 0

    def handoff_note(self) -> str | None:
        """A flag for the verdict when large tensors took host memory where the device handoff was
        meant to carry them (seconds a tensor: an evaluation's seconds are not its kernels' alone);
        None when none did. A note only: nothing is judged by it. Where the worker's reply says
        it could not map a lent buffer, that is the worker's word (the candidate shares its
        process), and the flag says so."""
        if self.handoff_failed:
            return (
                "handoff_fell_back: a device buffer could not be mapped (the worker's word) or read "
                "back here; this worker's large tensors took host memory from then on"
            )
        if self._inbox is not None and self._inbox.short_tensors:
            gb = self._inbox.short_bytes / 1e9
            return (
                f"handoff_fell_back: {self._inbox.short_tensors} large tensors ({gb:.1f} GB) took host "
                "memory: no device memory for the parent's buffers"
            )
        return None

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
                # The solution asked for a build (kernelproof.build.runtime_request): not the reply. Its
                # arguments are read in that module's schema by the handler; it carries no tensors.
                if incoming.metas:
                    incoming.drop()
                    raise self._violated(f"a build message carries {len(incoming.metas)} tensors")
                incoming.drop()
                protocol.send(self.sock, self._built(incoming.header))
                self._await_reply(timeout_s)  # the build's time is --build-timeout's, not the request's
                incoming = protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES)
            candidate = getattr(self.spec, "role", "candidate") != "baseline"  # unknown: the stricter rule
            found = inbox.violation(request, nonce, incoming, expect, candidate) if REPLY_CHECKS else None
            if found is not None:
                incoming.drop()
                raise self._violated(found)
            if nonce is not None:  # the envelope has done its job: callers read the reply itself
                for key in schemas.ENVELOPE[1:]:
                    incoming.header.pop(key, None)
            return incoming.header, incoming.read()
        except TimeoutError:
            self.kill()
            raise deaths.timed_out(timeout_s) from None
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

    def _last_word(self) -> None:
        """The candidate's ``bye``, whose reply must be the next frame: the worker answers one
        request at a time, so a second reply to an earlier request (the solution wrote one in the
        harness's place, then the harness wrote its own) or any frame nobody asked for is already
        in the stream before it. Found here, it is :attr:`violation` (read by the caller before
        the verdict), as it would be at the next request."""
        try:
            nonce = secrets.randbits(62)
            self.sock.settimeout(LAST_WORD_TIMEOUT_S)  # a loaded machine may not schedule it within 2 s
            protocol.send(self.sock, {"op": "bye", "nonce": nonce})
            incoming = protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES)
            incoming.drop()
        except (OSError, protocol.PeerClosed):
            return  # gone, or silent past the limit: nothing more was said
        except protocol.ProtocolError as exc:  # bytes that are no frame, where the bye's reply was due
            self._violated(f"after its last reply it sent bytes that are no frame: {exc}")
            return
        said = incoming.header
        if said.get("op") != "bye" or said.get("nonce") != nonce or incoming.metas:
            self._violated(
                f"after its last reply it sent a {str(said.get('op'))[:40]!r} frame that no request in "
                "flight asked for (a second reply to an earlier request, or an unasked frame)"
            )

    def _violated(self, found: str) -> WorkerDied:
        """End the worker for a protocol violation and remember it: nothing it sent is used after."""
        self.kill()
        self.violation = deaths.violated(found, self.log_tail())
        return self.violation

    def _raise_if_violated(self) -> None:
        if self.violation is not None:
            raise self.violation

    def _built(self, header: dict[str, Any]) -> dict[str, Any]:
        """The answer to a build message: the handler's, or a refusal where none is set.

        While the build runs the worker only waits for this answer: it gives up its GPU slot as a
        worker awaiting a reply does (:meth:`lend`, host/gate.py). A timing waiting for the
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
                    raise deaths.timed_out(timeout_s)
        finally:
            self._busy_since = None

    def _death(self) -> WorkerDied:
        """The worker's end, explained once it is reaped (host/deaths.py)."""
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        return deaths.explain(rc, self.log_tail(), self.cgroup)

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
        """End the worker. A candidate's last word is checked first (:meth:`_last_word`): a frame
        nobody asked for, left after the last reply, is its :attr:`violation`."""
        if self.proc.poll() is None:
            members.end(self.proc.pid, self.cgroup)  # found while it lives: its exit orphans them
            try:
                self.sock.settimeout(2.0)
                if getattr(self.spec, "role", "") == "candidate" and self.violation is None and REPLY_CHECKS:
                    self._last_word()
                else:
                    protocol.send(self.sock, {"op": "bye"})
                    protocol.recv_header(self.sock, schemas.MAX_REPLY_HEADER_BYTES).drop()  # never used
            except Exception:  # noqa: BLE001 - the worker is going away either way
                pass
        self.kill()
        self.give_back_cores()
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
