"""An evaluation waiting for a large task's device memory, before it holds anything there, lends
its device slot: a small evaluation runs in its place instead of queueing behind it."""

from __future__ import annotations

import threading
import time

import pytest

from kernelproof.errors import UsageError
from kernelproof.executors.device_memory import DeviceMemory, Unlimited
from kernelproof.host.admission import Admission
from kernelproof.options import EvalOptions
from kernelproof.serve.config import DEFAULT_JOBS_PER_SLOT, ServeConfig
from kernelproof.serve.eval_backends import LocalBackend


def _large_one_in_flight(mem: DeviceMemory, nbytes: int):
    """A thread holding `nbytes` of `mem` until the returned event is set."""
    inside, leave = threading.Event(), threading.Event()

    def holder():
        with mem.hold(0) as held:
            held.grow(nbytes)
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=holder, daemon=True)
    t.start()
    assert inside.wait(5)
    return t, leave


def test_an_arrival_that_must_wait_for_memory_lends_its_slot_and_comes_back_with_it():
    adm, mem = Admission(1), DeviceMemory(capacity_bytes=100)
    holder, release = _large_one_in_flight(mem, 90)
    seen: dict[str, object] = {}
    waiting = threading.Event()

    def large_arrival():
        with adm.slot(), mem.hold(0) as held:
            waiting.set()
            held.grow(90, aside=True)  # waits for the first to leave, standing aside
            seen["running_after"] = adm.running

    t = threading.Thread(target=large_arrival, daemon=True)
    t.start()
    assert waiting.wait(5)
    deadline = time.monotonic() + 5
    while adm.free == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert adm.free == 1 and adm.aside_now == 1  # the slot is lent while it waits
    with adm.slot():  # a small evaluation takes it now, not after the large one
        release.set()
        holder.join(5)
        t.join(5)
        # the large one came back without waiting for the slot the small one holds
        assert seen["running_after"] == 2
    assert adm.running == 0 and adm.aside_now == 0 and mem.reserved_bytes() == 0


def test_an_arrival_that_fits_keeps_its_slot():
    adm, mem = Admission(1), DeviceMemory(capacity_bytes=100)
    with adm.slot(), mem.hold(0) as held:
        assert not mem.would_wait(0, 40)
        held.grow(40, aside=True)
        assert adm.running == 1 and adm.aside_now == 0 and adm.free == 0


def test_only_the_arrival_stands_aside_a_later_growth_keeps_the_slot():
    """A growth without `aside` (an evaluation already holding device memory: its cases, its timed
    rounds) waits in its slot, as before."""
    adm, mem = Admission(1), DeviceMemory(capacity_bytes=100)
    holder, release = _large_one_in_flight(mem, 90)
    lent: list[int] = []

    def grower():
        with adm.slot(), mem.hold(0) as held:
            held.grow(20)
            lent.append(adm.free)

    t = threading.Thread(target=grower, daemon=True)
    t.start()
    time.sleep(0.3)
    assert adm.free == 0 and adm.aside_now == 0
    release.set()
    holder.join(5)
    t.join(5)
    assert lent == [0]


def test_would_wait_counts_nothing_and_an_unlimited_device_never_waits():
    mem = DeviceMemory(capacity_bytes=100)
    with mem.hold(60):
        with mem.hold(0) as held:
            assert mem.would_wait(held._ticket, 50) and not mem.would_wait(held._ticket, 40)
            assert not mem.would_wait(held._ticket, 0)  # never less than it holds
    assert Unlimited().would_wait(0, 10**15) is False


def test_the_service_runs_more_jobs_than_slots_and_the_device_admits_per_device(tmp_path):
    options = EvalOptions(device="cpu", db="", per_device=3)
    for lanes, threads in ((DEFAULT_JOBS_PER_SLOT, 3 * DEFAULT_JOBS_PER_SLOT), (1, 3), (4, 12)):
        backend = LocalBackend(options, lanes)
        try:
            assert backend.slots() == ["cpu"] * threads
        finally:
            backend.close()
    assert DEFAULT_JOBS_PER_SLOT == 2
    with pytest.raises(UsageError, match="--jobs-per-slot"):
        ServeConfig(task_dirs=(), options=options, state_dir=tmp_path, jobs_per_slot=0)


def test_an_evaluation_stands_aside_only_for_its_arrival(monkeypatch):
    """The real pipeline on the CPU: the growth before setup allocates is asked with `aside`, every
    later one (its cases, while it holds the task's tensors) without."""
    from pathlib import Path

    from kernelproof import api
    from kernelproof.executors import device_memory

    asked: list[bool] = []
    real = device_memory.Held.grow

    def recorded(self, nbytes, aside=False):
        asked.append(aside)
        return real(self, nbytes, aside=aside)

    monkeypatch.setattr(device_memory.Held, "grow", recorded)
    data = Path(__file__).resolve().parents[1] / "data"
    options = EvalOptions(device="cpu", db="", correctness_only=True, seeds_per_case=1, seed=3)
    v = api.evaluate(data / "tasks" / "scale_relu.py", data / "solutions" / "plain_torch.py", options)
    assert v.verdict.value == "pass"
    assert asked[0] is True and len(asked) >= 2 and not any(asked[1:])
