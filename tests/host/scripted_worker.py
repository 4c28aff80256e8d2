"""A WorkerProcess whose far end is a script, not a worker: it answers each request with given bytes.

What the parent does with a reply it reads is the subject of these tests, so the worker's side is
played by a thread on the other end of a socket pair. It writes what a candidate could write on
the worker's socket: forged replies, malformed ones, frames nobody asked for. A `sleep` process
stands in for the worker's process (the parent kills its group on a violation).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelproof.host.process import WorkerProcess
from kernelproof.wire import protocol

# (request header) -> the bytes to write back; None writes nothing more.
Script = Callable[[dict[str, Any]], "bytes | None"]
HELLO = {"op": "hello", "pid": 1, "python": "3", "torch": "2", "cuda_available": False}


def frame(header: dict[str, Any], tensor_metas: list[dict[str, Any]] | None = None) -> bytes:
    """A frame's bytes as protocol.send writes them (inline tensor data not included)."""
    head = json.dumps({**header, "_tensors": tensor_metas or []}).encode()
    return protocol.MAGIC + struct.pack("<Q", len(head)) + head


def reply_to(request: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A successful reply's header carrying the request's op and nonce (what a forger who read the
    nonce would write)."""
    return {"ok": True, "op": request.get("op"), "nonce": request.get("nonce"), **fields}


@contextmanager
def scripted(tmp_path: Path, script: Script) -> Iterator[WorkerProcess]:
    """A WorkerProcess talking to `script` (one answer per request, after the hello)."""
    parent, child = socket.socketpair()
    stand_in = subprocess.Popen(["sleep", "600"], start_new_session=True)
    w = WorkerProcess.__new__(WorkerProcess)
    w.sock, w.proc, w.cgroup, w.spec = parent, stand_in, None, None
    w.log_path = tmp_path / "worker.log"
    w.log_path.write_text("")
    w.hello, w.violation = None, None
    w.paused, w.lent, w._stopped_s, w._paused_at, w._busy_since = False, False, 0.0, 0.0, None
    w._lending = threading.Condition()
    w.handoff_failed, w._inbox = True, None

    def serve() -> None:
        try:
            child.sendall(frame(HELLO))
            while True:
                request, _ = protocol.recv(child)
                answer = script(request)
                if answer is None:
                    return
                child.sendall(answer)
        except (OSError, protocol.ProtocolError):
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield w
    finally:
        stand_in.kill()
        stand_in.wait()
        parent.close()
        child.close()
        thread.join(timeout=10)
