"""The worker process: it leaves when asked, so a wrapper (compute-sanitizer) can print its report."""

import shutil

import pytest

from kernelproof.host import process
from kernelproof.host.process import SpawnSpec, WorkerProcess


def test_worker_exits_with_status_zero_when_told_bye():
    w = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        w.wait_ready()
        assert w.finish(timeout_s=30) == 0  # None would mean it had to be killed
    finally:
        w.close()


@pytest.mark.gpu
def test_a_cuda_worker_initialises_the_profiler_before_it_says_hello():
    """CUPTI's start-up (seconds) happens while the worker starts, not in the first timed batch."""
    w = WorkerProcess(SpawnSpec("candidate", "cuda:0"))
    try:
        hello = w.wait_ready()
        assert isinstance(hello.get("profiler_warm_s"), float), hello
        print(f"profiler start-up in a fresh worker: {hello['profiler_warm_s']:.2f} s")
    finally:
        w.close()


def test_a_worker_under_a_wrapper_leaves_the_profiler_to_the_tool(monkeypatch):
    """compute-sanitizer owns CUPTI: its worker is told not to start a profiler session."""
    seen = []
    monkeypatch.setenv("KERNELPROOF_ZYGOTE", "0")  # both started by exec, so both commands are seen
    monkeypatch.setattr(process.subprocess, "Popen", lambda cmd, **kw: seen.append(cmd) or _NoProcess())
    monkeypatch.setattr(process.limits, "create", lambda *a: None)
    for wrapper in ((), ("compute-sanitizer", "--tool", "memcheck")):
        w = process.WorkerProcess(SpawnSpec("candidate", "cpu", wrapper=wrapper))
        w.sock.close()
        w._log.close()
        shutil.rmtree(w.private, ignore_errors=True)
        w.log_path.unlink(missing_ok=True)
    assert "--no-profiler-warmup" not in seen[0] and "--no-profiler-warmup" in seen[1]


class _NoProcess:
    pid = 0

    def poll(self):
        return 0
