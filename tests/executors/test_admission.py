"""A device's admission: ``per_device`` slots, lent while an evaluation waits for its build."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from kernelproof.build import runtime_request as build_requests
from kernelproof.evaluate.build_requests import BuildService
from kernelproof.host.admission import Admission, held, stand_aside


def _enter_in_thread(cm) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Enter `cm` in a thread; returns the thread, an event set once inside, and one that lets it leave."""
    inside, leave = threading.Event(), threading.Event()

    def body():
        with cm:
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, inside, leave


def test_slots_admit_at_most_their_number():
    adm = Admission(1)
    with adm.slot():
        assert adm.free == 0
        t, inside, leave = _enter_in_thread(adm.slot())
        assert not inside.wait(0.3)  # the second evaluation waits
    assert inside.wait(5)
    leave.set()
    t.join(5)
    assert adm.free == 1


def test_an_evaluation_standing_aside_lets_another_in_and_comes_back_without_waiting():
    adm = Admission(1)
    with adm.slot():
        assert held() is adm
        with stand_aside(held()):
            t, inside, leave = _enter_in_thread(adm.slot())
            assert inside.wait(5)  # the slot was lent while this one waits for its build
        # back at once although the other still runs: more than per_device for a moment
        assert adm.running == 2 and adm.free == 0
        leave.set()
        t.join(5)
    assert adm.running == 0 and adm.free == 1


def test_the_device_alone_waits_for_evaluations_standing_aside():
    adm = Admission(2)
    aside_entered, aside_leave = threading.Event(), threading.Event()

    def building():
        with adm.slot(), stand_aside(held()):
            aside_entered.set()
            aside_leave.wait(10)

    t = threading.Thread(target=building, daemon=True)
    t.start()
    assert aside_entered.wait(5)
    assert adm.running == 0 and adm.aside_now == 1
    alone, alone_inside, alone_leave = _enter_in_thread(adm.alone())
    assert not alone_inside.wait(0.3)  # one standing aside still holds its worker and memory
    newcomer, newcomer_inside, newcomer_leave = _enter_in_thread(adm.slot())
    aside_leave.set()
    t.join(5)
    assert alone_inside.wait(5)
    assert not newcomer_inside.wait(0.3)  # nothing new starts while the device is alone
    alone_leave.set()
    alone.join(5)
    assert newcomer_inside.wait(5)
    newcomer_leave.set()
    newcomer.join(5)


def test_alone_holds_no_slot_to_lend_and_outside_any_admission_nothing_is_lent():
    adm = Admission(1)
    assert held() is None
    with stand_aside(held()):  # a no-op
        pass
    with adm.alone():
        assert held() is None
    with pytest.raises(ValueError):
        Admission(0)


def test_a_build_the_worker_asks_for_lends_the_evaluations_slot(tmp_path):
    """The evaluation whose candidate asked for a build waits for the compiler, not the device:
    while the builder pool works, another evaluation may take the slot."""
    adm = Admission(1)
    seen = []

    class Builders:
        device = "cpu"

        def build(self, path):
            seen.append(adm.free)
            return SimpleNamespace(ok=False, log="no compiler here", cached=False, key="", cuda=())

    with adm.slot():
        service = BuildService(Builders(), tmp_path / "private", tmp_path / "rw")
        args = {
            "name": "kp_lazy",
            "cpp_sources": ["int f() { return 1; }"],
            "cuda_sources": [],
            "functions": ["f"],
        }
        answer = service(build_requests.message(args))
        assert adm.free == 0  # taken back once the build answered
    assert answer["ok"] is False and "failed to build" in answer["message"]
    assert seen == [1]  # free for another evaluation while it built


def test_a_slot_is_given_back_when_the_evaluation_raises():
    adm = Admission(1)
    with pytest.raises(RuntimeError), adm.slot(), stand_aside(held()):
        raise RuntimeError("the evaluation failed")
    assert adm.running == 0 and adm.aside_now == 0 and adm.free == 1
    deadline = time.monotonic() + 1
    with adm.slot():
        assert time.monotonic() < deadline
