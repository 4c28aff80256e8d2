"""A real ``kernelproof serve`` process on loopback for the tests of tests/serve, and its clients.

The server is the command line's own verb in a subprocess (``python -m kernelproof.cli serve
--port 0``), reached over a real socket by httpx: no test client in process. It judges on the CPU,
correctness only by default, one seed per case and the task's own shapes, so each evaluation takes
seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
HERE = Path(__file__).resolve().parent
TASKS = DATA / "tasks"
GOOD = (DATA / "solutions" / "scale_relu_triton.py").read_text()
WRONG = (HERE / "solutions" / "scale_relu_no_bias.py").read_text()
FAST = ("--device", "cpu", "--correctness-only", "--seeds-per-case", "1", "--shape-variants", "task")
START_TIMEOUT_S = 120.0


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    log: Path
    token: str | None = None

    def client(self, timeout: float = 300.0, token: str | None = None) -> httpx.Client:
        token = token or self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill_all(self) -> None:
        """SIGKILL the server and every process it started (a crash, not a shutdown)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def start(state: Path, *args: str, tasks: tuple[Path, ...] = (TASKS,), token: str | None = None) -> Server:
    """Start a server whose store and job book live under ``state``; wait until it listens."""
    state.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "kernelproof.cli",
        "serve",
        "--port",
        "0",
        "--db",
        str(state / "store.sqlite"),
    ]
    for t in tasks:
        cmd += ["--tasks", str(t)]
    cmd += list(args)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = state / f"server-{time.time_ns()}.log"
    err = open(log, "w")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not line or "listening on" not in line[0]:
        proc.kill()
        raise RuntimeError(f"the server did not start: {line} {log.read_text()[-3000:]}")
    url = line[0].strip().rsplit(" ", 1)[-1]
    return Server(proc, url, log, token)


def wait_for(client: httpx.Client, job_id: str, timeout_s: float = 300.0) -> dict:
    """Poll a job until it is done or cancelled."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = client.get(f"/v1/jobs/{job_id}").json()
        if doc["state"] in ("done", "cancelled"):
            return doc
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} not done in {timeout_s} s")
