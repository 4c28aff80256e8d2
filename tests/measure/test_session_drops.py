"""A baseline dropped from a shape's timing is recorded with the code of the batch that dropped it
(kernelproof/measure/session.py): the API runs an evaluation whose baseline crashed beside others
again alone (kernelproof/blame.py, ``lost_a_baseline``), decided by that code, never by the note."""

from __future__ import annotations

from types import SimpleNamespace

from kernelproof.measure import session


def _program(name: str, reply: dict):
    return SimpleNamespace(name=name, reply=reply, worker=None)


def test_a_baseline_that_crashes_in_its_warm_up_is_dropped_with_its_code():
    crashed = {"ok": False, "code": "crash", "message": "a timed call raised OutOfMemoryError"}
    programs = [_program("candidate", {"ok": True}), _program("eager", crashed)]
    shape = SimpleNamespace(lost={}, ctx=None, attempt=lambda prog, n: SimpleNamespace(reply=prog.reply))
    notes: list[str] = []
    assert session._warm_up(shape, programs, notes) is None
    assert [p.name for p in programs] == ["candidate"] and shape.lost == {"eager": "crash"}
    assert notes and "eager was dropped" in notes[0]


def test_a_baseline_whose_worker_died_is_dropped_as_a_crash():
    died = {"ok": False, "message": "the worker died (signal 9)"}
    programs = [_program("candidate", {"ok": True}), _program("eager", died)]
    shape = SimpleNamespace(lost={}, ctx=None, attempt=lambda prog, n: SimpleNamespace(reply=prog.reply))
    session._warm_up(shape, programs, [])
    assert shape.lost == {"eager": "crash"}
