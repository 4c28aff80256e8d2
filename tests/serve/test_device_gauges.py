"""The service's device gauges: each device's admission (slots, standing aside, alone) and memory
reservations, read at once and written in the Prometheus text format."""

from __future__ import annotations

import threading
import time

from kernelproof.executors.device_memory import DeviceMemory, MemoryState, Unlimited
from kernelproof.executors.local import DeviceState, LocalPool
from kernelproof.host.admission import Admission, SlotState
from kernelproof.serve.prometheus import Metrics


def _wait_for(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the state never came"
        time.sleep(0.01)


def test_an_admission_says_who_runs_who_stands_aside_and_whether_the_device_is_alone() -> None:
    admission = Admission(2)
    assert admission.state() == SlotState(2, 0, 0, False)
    with admission.slot():
        with admission.slot():
            assert admission.state() == SlotState(2, 2, 0, False)
            with admission.aside():
                assert admission.state() == SlotState(2, 1, 1, False)
        assert admission.state() == SlotState(2, 1, 0, False)
        seen: list[SlotState] = []
        alone = threading.Thread(target=lambda: _alone(admission, seen))
        alone.start()
        _wait_for(lambda: admission.state().alone)  # draining: it waits for this slot to end
        assert admission.state() == SlotState(2, 1, 0, True)
    alone.join(5)
    assert seen == [SlotState(2, 0, 0, True)]
    assert admission.state() == SlotState(2, 0, 0, False)


def _alone(admission: Admission, seen: list[SlotState]) -> None:
    with admission.alone():
        seen.append(admission.state())


def test_a_memory_admission_says_what_is_held_and_who_waits_to_arrive_or_grow() -> None:
    memory = DeviceMemory(100)
    assert memory.state() == MemoryState(100, 0, 0, 0, 0)
    release = threading.Event()

    def hold(first: int, then: int) -> None:
        with memory.hold(first) as held:
            held.grow(then)
            release.wait(5)

    with memory.hold(60):
        grower = threading.Thread(target=hold, args=(10, 50))  # arrives with 10, waits to grow to 50
        grower.start()
        _wait_for(lambda: memory.state().growing == 1)
        arrival = threading.Thread(target=hold, args=(40, 40))  # no room for 40 beside 70: waits
        arrival.start()
        _wait_for(lambda: memory.state().arriving == 1)
        assert memory.state() == MemoryState(100, 70, 2, 1, 1)
    _wait_for(lambda: memory.state().growing == 0 and memory.state().arriving == 0)
    assert memory.state() == MemoryState(100, 90, 2, 0, 0)
    release.set()
    grower.join(5)
    arrival.join(5)
    assert memory.state() == MemoryState(100, 0, 0, 0, 0)
    assert Unlimited().state() == MemoryState(None, 0, 0, 0, 0)


def test_a_pool_lists_each_device_it_admitted_evaluations_to() -> None:
    pool = LocalPool(prespawn=False)
    try:
        assert pool.device_states() == []
        with pool.device_slots("cpu", 3):
            pool.memory("cpu")
            assert pool.device_states() == [
                DeviceState("cpu", SlotState(3, 1, 0, False), MemoryState(None, 0, 0, 0, 0))
            ]
    finally:
        pool.close()


def test_the_gauges_are_written_for_each_device_and_memory_only_where_it_is_admitted() -> None:
    gpu = DeviceState(
        "cuda:0", SlotState(4, 3, 2, True), MemoryState(138_000_000_000, 96_500_000_000, 3, 2, 1)
    )
    cpu = DeviceState("cpu", SlotState(1, 0, 0, False), MemoryState(None, 0, 0, 0, 0))
    text = Metrics().render([gpu, cpu])
    lines = set(text.splitlines())
    for line in (
        'kernelproof_device_slots{device="cuda:0"} 4',
        'kernelproof_device_running{device="cuda:0"} 3',
        'kernelproof_device_standing_aside{device="cuda:0"} 2',
        'kernelproof_device_alone{device="cuda:0"} 1',
        'kernelproof_device_memory_capacity_bytes{device="cuda:0"} 138000000000',
        'kernelproof_device_memory_reserved_bytes{device="cuda:0"} 96500000000',
        'kernelproof_device_memory_holders{device="cuda:0"} 3',
        'kernelproof_device_memory_waiting{device="cuda:0",stage="arrive"} 2',
        'kernelproof_device_memory_waiting{device="cuda:0",stage="grow"} 1',
        'kernelproof_device_slots{device="cpu"} 1',
        'kernelproof_device_alone{device="cpu"} 0',
        "# TYPE kernelproof_device_memory_waiting gauge",
    ):
        assert line in lines, line
    assert 'kernelproof_device_memory_reserved_bytes{device="cpu"}' not in text  # no admission by memory
    assert "kernelproof_device_" not in Metrics().render()  # no device admitted to yet: no family
