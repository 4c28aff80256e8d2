"""The local pool keeps started workers waiting, so a new task's first baseline starts warm."""

import time

from kernelproof.executors.local import LocalPool


def _wait_for_spare(pool: LocalPool, role: str):
    for _ in range(600):  # spares are started by background threads
        spare = pool._spare.get((role, "cpu"))
        if spare is not None:
            return spare
        time.sleep(0.05)
    return None


def test_a_new_tasks_baseline_is_the_worker_started_with_the_previous_candidate():
    pool = LocalPool()
    try:
        pool.candidate("cpu").close()  # an evaluation starts: replacements are started now
        spare = _wait_for_spare(pool, "baseline")
        assert spare is not None
        first = pool.baseline(("task-a", "default", "eager", "cpu"), "cpu")
        assert first is spare  # taken, not spawned
        # Taking a baseline starts nothing (timing may be about to run on this device).
        time.sleep(0.5)
        assert ("baseline", "cpu") not in pool._spare
        second = pool.baseline(("task-b", "default", "eager", "cpu"), "cpu")
        assert second is not first and first.proc.wait(timeout=30) is not None  # task-a's was closed
    finally:
        pool.close()


def test_an_evaluation_that_times_nothing_starts_no_baseline_worker():
    pool = LocalPool()
    try:
        pool.candidate("cpu", timed=False).close()
        assert _wait_for_spare(pool, "candidate") is not None
        time.sleep(0.5)
        assert ("baseline", "cpu") not in pool._spare
    finally:
        pool.close()
