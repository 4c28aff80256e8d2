"""The local pool keeps started workers waiting, so a new task's first baseline starts warm."""

import time

from kernelproof.executors.local import LocalPool, run_many


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


def test_settle_returns_only_when_every_spare_on_the_device_has_started():
    pool = LocalPool()
    try:
        pool.candidate("cpu").close()  # starts a candidate and a baseline spare in the background
        pool.settle("cpu")
        spares = [w for (_, d), w in pool._spare.items() if d == "cpu"]
        assert {r for r, _ in pool._spare} == {"candidate", "baseline"}
        assert all(w.hello is not None for w in spares)  # each said hello: torch imported, CUDA up
        pool.settle("cpu")  # nothing starting: returns at once
    finally:
        pool.close()


def test_timing_waits_for_the_pools_starting_workers(monkeypatch):
    """The evaluation settles the device after correctness and before the first timed request."""
    from kernelproof.api import evaluate
    from kernelproof.executors import process
    from kernelproof.options import EvalOptions

    events = []
    request = process.WorkerProcess.request
    monkeypatch.setattr(
        process.WorkerProcess,
        "request",
        lambda self, header, *a, **k: events.append(header.get("op")) or request(self, header, *a, **k),
    )
    settle = LocalPool.settle
    monkeypatch.setattr(
        LocalPool, "settle", lambda self, device: events.append("settle") or settle(self, device)
    )
    pool = LocalPool()
    try:
        opts = EvalOptions(
            device="cpu", db="", seeds_per_case=1, time_budget_s=0.5, max_rounds=2, min_rounds=2
        )
        v = evaluate(
            "tests/data/tasks/scale_relu.py", "tests/data/solutions/scale_relu_triton.py", opts, pool=pool
        )
    finally:
        pool.close()
    assert v.passed, v.reasons
    assert events.count("settle") == 1
    first_time = events.index("time")
    assert events.index("settle") < first_time and "run" in events[: events.index("settle")]
    assert "settled_s" in v.environment["phases"]


def test_closing_run_many_early_starts_no_further_item():
    started: list[int] = []

    def work(item, device):
        started.append(item)
        time.sleep(0.05)
        return item

    results = run_many(range(20), ["cpu", "cpu"], work)
    first = next(results)
    results.close()  # the consumer stops: only the items already in flight may finish
    assert first in started
    assert len(started) <= 3, started
