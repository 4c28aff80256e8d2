"""The local pool keeps started workers waiting, so a new task's first baseline starts warm."""

import subprocess
import threading
import time
from types import SimpleNamespace

from proc_state import stopped

from kernelproof.executors.local import LocalPool, run_many


def _wait_for_spare(pool: LocalPool, role: str):
    for _ in range(600):  # spares are started by background threads
        spares = pool._spare.get((role, "cpu"))
        if spares:
            return spares[0]
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
        assert not pool._spare.get(("baseline", "cpu"))
        pool.release_baseline(first)  # its evaluation's timing is over: it rests, idle, kept for task-a
        assert first.proc.poll() is None and pool._baselines[("task-a", "default", "eager", "cpu")] is first
        second = pool.baseline(("task-b", "default", "eager", "cpu"), "cpu")
        assert second is not first and first.proc.wait(timeout=30) is not None  # task-a's was closed
    finally:
        pool.close()


class _Started:
    """A worker double: alive until closed; it rests when asked unless told it cannot."""

    rests_ok = True

    def __init__(self, spec):
        self.spec, self.closed, self.rests = spec, False, 0
        self.proc = SimpleNamespace(poll=lambda: 1 if self.closed else None)

    def request(self, header, tensors=None, timeout_s=600.0, expect=None):
        assert header == {"op": "rest"}
        self.rests += 1
        return {"ok": self.rests_ok}, []

    def resume(self):
        pass

    def close(self):
        self.closed = True


def test_a_leased_baseline_is_neither_handed_out_nor_closed_until_released(monkeypatch):
    """An evaluation loads its baseline in a shared turn and times it later, alone: in between,
    another evaluation of the same task gets a worker of its own, and one of another task closes
    only idle workers, never the one leased."""
    from kernelproof.executors import local

    monkeypatch.setattr(local, "WorkerProcess", _Started)
    pool = LocalPool(prespawn=False)
    a, b = ("task-a", "default", "eager", "cpu"), ("task-b", "default", "eager", "cpu")
    first = pool.baseline(a, "cpu")
    second = pool.baseline(a, "cpu")  # the same key while the first is leased: another worker
    assert second is not first
    pool.release_baseline(second)
    other = pool.baseline(b, "cpu")  # another task: task-a's idle worker goes, the leased one stays
    assert second.closed and not first.closed
    pool.release_baseline(first)
    pool.release_baseline(other)
    assert pool.baseline(a, "cpu") is first  # released: the next timing of task-a reuses it
    pool.discard_baseline(a, first)  # died while loading: closed, never handed out again
    assert first.closed and pool.baseline(a, "cpu") is not first
    pool.close()


def test_one_idle_baseline_waits_per_key_and_a_large_evaluation_keeps_none(monkeypatch):
    """Each idle baseline worker caches a timed batch on the GPU that no reservation counts: two
    released for one key leave one waiting, and one released with keep=False (an evaluation larger
    than its share of the device) is closed."""
    from kernelproof.executors import local

    monkeypatch.setattr(local, "WorkerProcess", _Started)
    pool = LocalPool(prespawn=False)
    a = ("task-a", "default", "eager", "cpu")
    one, two = pool.baseline(a, "cpu"), pool.baseline(a, "cpu")
    pool.release_baseline(one)
    pool.release_baseline(two)
    assert not one.closed and two.closed
    again = pool.baseline(a, "cpu")
    assert again is one
    pool.release_baseline(again, keep=False)
    assert one.closed and pool.baseline(a, "cpu") is not one
    pool.close()


def test_a_released_baseline_rests_before_it_waits_and_one_that_cannot_is_closed(monkeypatch):
    """Idle, a baseline worker holds no batch and no allocator cache (the rest request: its last
    batch and cached blocks are memory no reservation counts once its lease ends); one whose rest
    fails is closed, never kept."""
    from kernelproof.executors import local

    monkeypatch.setattr(local, "WorkerProcess", _Started)
    pool = LocalPool(prespawn=False)
    a = ("task-a", "default", "eager", "cpu")
    worker = pool.baseline(a, "cpu")
    assert worker.rests == 0  # leased: never asked to rest between its evaluation's rounds
    pool.release_baseline(worker)
    assert worker.rests == 1 and not worker.closed and pool.baseline(a, "cpu") is worker
    worker.rests_ok = False
    pool.release_baseline(worker)
    assert worker.closed and pool.baseline(a, "cpu") is not worker
    pool.close()


def test_an_evaluation_beyond_its_share_of_the_device_memory():
    from kernelproof.executors.device_memory import DeviceMemory

    pool = LocalPool(prespawn=False)
    memory = DeviceMemory(100, "cuda:0")
    pool.memory = lambda device: memory
    assert pool.beyond_share(30, "cuda:0", 4) and not pool.beyond_share(25, "cuda:0", 4)
    assert not pool.beyond_share(0, "cuda:0", 4)  # no estimate (the CPU's footprint is 0)
    pool.close()


def test_an_evaluation_that_times_nothing_starts_no_baseline_worker():
    pool = LocalPool()
    try:
        pool.candidate("cpu", timed=False).close()
        assert _wait_for_spare(pool, "candidate") is not None
        time.sleep(0.5)
        assert not pool._spare.get(("baseline", "cpu"))
    finally:
        pool.close()


def test_with_two_evaluations_in_flight_twice_as_many_candidate_workers_wait():
    pool = LocalPool()
    try:
        pool.device_slots("cpu", 2)
        pool.candidate("cpu", timed=False).close()
        for _ in range(600):
            if len(pool._spare.get(("candidate", "cpu"), [])) == 2:
                break
            time.sleep(0.05)
        assert len(pool._spare[("candidate", "cpu")]) == 2
    finally:
        pool.close()


_held = threading.local()  # set in the threads whose worker processes start held


class _HeldAtStart(subprocess.Popen):
    """A process that stops itself (SIGSTOP) before it runs anything, when a held thread starts it:
    a worker still starting, whatever the machine's load, until someone resumes it (SIGCONT)."""

    def __init__(self, args, *rest, **kwargs):
        if getattr(_held, "on", False):
            args = ["/bin/sh", "-c", 'kill -STOP $$ && exec "$@"', "held", *args]
        super().__init__(args, *rest, **kwargs)


def _spares_start_held(pool: LocalPool, monkeypatch) -> None:
    """This pool's spares (started in its background threads) start held; nothing else does.
    They are exec'd (the hold is a shell in front of the interpreter), not forked from the zygote."""
    from kernelproof.host import process, zygote

    monkeypatch.setenv(zygote.ENV_SWITCH, "0")

    shim = SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")})
    shim.Popen = _HeldAtStart
    monkeypatch.setattr(process, "subprocess", shim)
    spawn_spare = pool._spawn_spare

    def held(role: str, device: str) -> None:
        _held.on = True
        try:
            spawn_spare(role, device)
        finally:
            _held.on = False

    monkeypatch.setattr(pool, "_spawn_spare", held)


def test_settle_stops_the_spares_still_starting_until_resumed_or_taken(monkeypatch):
    pool = LocalPool()
    _spares_start_held(pool, monkeypatch)  # neither spare can say hello before settle looks
    try:
        pool.candidate("cpu").close()  # starts a candidate and a baseline spare in the background
        pool.settle("cpu")
        (baseline,) = pool._spare[("baseline", "cpu")]
        (candidate,) = pool._spare[("candidate", "cpu")]
        for w in (baseline, candidate):
            assert w.hello is None and w.paused and stopped(w.proc.pid, True)
        # Timing needs a baseline: the stopped spare is taken, resumed, and finishes starting.
        taken = pool.baseline(("task-a", "default", "eager", "cpu"), "cpu")
        assert taken is baseline and not taken.paused
        assert taken.wait_ready(timeout_s=120)["op"] == "hello"
        assert candidate.paused and stopped(candidate.proc.pid, True)  # a later evaluation's: still stopped
        pool.resume("cpu")
        assert not candidate.paused and not stopped(candidate.proc.pid, False)
        assert candidate.wait_ready(timeout_s=120)["op"] == "hello"  # it goes on starting
        pool.settle("cpu")  # nothing starting: returns at once, stops nothing
        assert not candidate.paused
    finally:
        pool.close()


def test_a_gpu_keeps_two_candidate_spares_and_an_evaluation_takes_the_oldest(monkeypatch):
    from kernelproof.executors import local

    class Started:
        count = 0

        def __init__(self, spec):
            Started.count += 1
            self.spec, self.n, self.paused, self.hello = spec, Started.count, False, {"op": "hello"}
            self.proc = self

        def poll(self):
            return None

        def resume(self):
            self.paused = False

    monkeypatch.setattr(local, "WorkerProcess", Started)
    pool = LocalPool()

    def settled():
        for t in pool._spawning.pop("cuda:0", []):
            t.join()

    first = pool.candidate("cuda:0")  # nothing waited: started on the spot
    settled()
    oldest, younger = pool._spare[("candidate", "cuda:0")]
    assert first.n == 1 and len(pool._spare[("baseline", "cuda:0")]) == 1
    second = pool.candidate("cuda:0")
    settled()
    assert second is oldest  # the spare that had the longest to start
    waiting = pool._spare[("candidate", "cuda:0")]
    assert waiting[0] is younger and len(waiting) == 2 and waiting[1].n == Started.count  # topped up
    assert len(pool._spare[("baseline", "cuda:0")]) == 1  # one was waiting: none started


def test_timing_waits_for_the_pools_starting_workers(monkeypatch):
    """The evaluation settles the device after correctness and before the first timed request."""
    from kernelproof.api import evaluate
    from kernelproof.host import process
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
    # Each device's thread may have finished one item and taken the next before the close: 4 at most.
    assert len(started) <= 4, started
