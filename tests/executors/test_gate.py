"""The device gate: untimed work of several evaluations overlaps on a device, timing never does."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from kernelproof.api import evaluate_many
from kernelproof.errors import UsageError
from kernelproof.executors.gate import DeviceGate
from kernelproof.executors.local import LocalPool
from kernelproof.options import EvalOptions

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")


def _start(target) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def test_shared_holders_overlap_and_timing_waits_for_them_to_leave():
    gate = DeviceGate()
    inside = threading.Event()
    leave = threading.Event()
    entered_exclusive = threading.Event()

    def shared_worker():
        with gate.shared():
            inside.set()
            leave.wait(10)

    def timing():
        with gate.exclusive():
            entered_exclusive.set()

    _start(shared_worker)
    assert inside.wait(10)
    with gate.shared():  # a second shared holder gets in at once
        assert gate.holders() == (2, False)
    t = _start(timing)
    time.sleep(0.2)
    assert not entered_exclusive.is_set()  # a shared holder is still inside
    leave.set()
    t.join(10)
    assert entered_exclusive.is_set()
    assert gate.holders() == (0, False)


def test_a_waiting_timing_keeps_new_shared_work_out():
    """Writer preference: timing waits for the stretches under way, not for a stream of new ones."""
    gate = DeviceGate()
    leave = threading.Event()
    order: list[str] = []
    inside = threading.Event()

    def first():
        with gate.shared():
            inside.set()
            leave.wait(10)
        order.append("first left")

    def timing():
        with gate.exclusive() as waited:
            order.append("timing")
            assert gate.holders() == (0, True)
            assert waited > 0.1

    def latecomer():
        with gate.shared():
            order.append("latecomer")

    _start(first)
    assert inside.wait(10)
    t = _start(timing)
    time.sleep(0.2)  # the timing is waiting now
    late = _start(latecomer)
    time.sleep(0.2)
    assert "latecomer" not in order  # kept out while the timing waits
    leave.set()
    t.join(10)
    late.join(10)
    assert order == ["first left", "timing", "latecomer"]


class SpyGate(DeviceGate):
    """Records every stretch, checks that timing is alone, and makes the first two evaluations meet
    inside their first shared stretch: a run that did not overlap them breaks the barrier."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int, float, float]] = []
        self.lonely_timing: list[tuple[int, bool]] = []
        self._meet = threading.Barrier(2, timeout=120)
        self._met: set[int] = set()
        self._spy_lock = threading.Lock()

    @contextmanager
    def shared(self):
        with DeviceGate.shared(self) as waited:
            me = threading.get_ident()
            with self._spy_lock:
                first_visit = me not in self._met and len(self._met) < 2
                self._met.add(me)
            if first_visit:
                self._meet.wait()
            t0 = time.monotonic()
            try:
                yield waited
            finally:
                self.log.append(("shared", me, t0, time.monotonic()))

    @contextmanager
    def exclusive(self):
        with DeviceGate.exclusive(self) as waited:
            if self.holders() != (0, True):
                self.lonely_timing.append(self.holders())
            t0 = time.monotonic()
            try:
                yield waited
            finally:
                self.log.append(("exclusive", threading.get_ident(), t0, time.monotonic()))


class SpyPool(LocalPool):
    def __init__(self) -> None:
        super().__init__()
        self.spy = SpyGate()

    def gate(self, device: str) -> DeviceGate:
        return self.spy


def test_two_evaluations_per_device_overlap_their_checks_and_never_their_timing():
    pool = SpyPool()
    opts = EvalOptions(
        device="cpu",
        db="",
        seed=5,
        seeds_per_case=1,
        timeout_s=120,
        time_budget_s=0.5,
        min_rounds=3,
        max_rounds=4,
        per_device=2,
    )
    pairs = [(TASK, str(DATA / "solutions" / "plain_torch.py"))] * 3
    try:
        verdicts = list(evaluate_many(pairs, opts, pool=pool))
    finally:
        pool.close()
    assert [v.verdict.value for v in verdicts] == ["pass"] * 3, [v.reasons for v in verdicts]
    assert all(v.timing is not None for v in verdicts)
    log = pool.spy.log
    timings = [e for e in log if e[0] == "exclusive"]
    assert len(timings) == 3
    assert pool.spy.lonely_timing == []
    for timing in timings:  # nothing else was inside while a timing was
        _, who, t0, t1 = timing
        others = [e for e in log if e is not timing and e[2] < t1 and t0 < e[3]]
        assert others == [], (who, others)
    threads = {who for _, who, _, _ in log}
    assert len(threads) == 2  # two evaluations in flight on the one device


def test_per_device_below_one_is_a_usage_error():
    with pytest.raises(UsageError, match="per-device"):
        list(evaluate_many([(TASK, TASK)], EvalOptions(device="cpu", db="", per_device=0)))
