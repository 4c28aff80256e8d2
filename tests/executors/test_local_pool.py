"""The local pool keeps a started worker of each role ready, so a new task's baseline starts warm."""

import time

from kernelproof.executors.local import LocalPool


def test_a_new_tasks_baseline_is_the_worker_started_in_the_background():
    pool = LocalPool()
    try:
        first = pool.baseline(("task-a", "default", "eager", "cpu"), "cpu")
        first.wait_ready()
        spare = None
        for _ in range(600):  # the spare is started by a background thread
            spare = pool._spare.get(("baseline", "cpu"))
            if spare is not None:
                break
            time.sleep(0.05)
        assert spare is not None and spare is not first
        second = pool.baseline(("task-b", "default", "eager", "cpu"), "cpu")
        assert second is spare  # taken, not spawned
        assert first.proc.wait(timeout=30) is not None  # task-a's baseline was closed
    finally:
        pool.close()
