"""The worker process: it leaves when asked, so a wrapper (compute-sanitizer) can print its report."""

from kernelproof.executors.process import SpawnSpec, WorkerProcess


def test_worker_exits_with_status_zero_when_told_bye():
    w = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        w.wait_ready()
        assert w.finish(timeout_s=30) == 0  # None would mean it had to be killed
    finally:
        w.close()
