"""On a GPU, a solution that defines no kernel of its own is profiled once before any timing and
refused there (evaluate/timing.py, ``_no_kernel_of_its_own``): none of its GPU time can be its own.

The profile itself needs a GPU; here the parent's side is driven with the profile's reply faked at
its seam (``account``), which is what the rule reads."""

from __future__ import annotations

import random
from contextlib import contextmanager

import pytest

from kernelproof.evaluate import timing
from kernelproof.measure.attribution import KernelIdentity
from kernelproof.measure.floor import LaunchFloor
from kernelproof.verdict import Coverage, ReasonCode


def _profiled(monkeypatch: pytest.MonkeyPatch, kernels: tuple, identity: KernelIdentity):
    def account(worker, ctx, seed, own, policy, limit, floor_us):
        assert own is identity
        gpu = sum(ms for _, _, ms in kernels)
        mine = sum(ms for _, origin, ms in kernels if origin == "solution")
        return Coverage(mine / gpu if gpu else None, kernels, policy)

    monkeypatch.setattr(timing, "account", account)
    monkeypatch.setattr(timing, "launch_floor", lambda device: LaunchFloor(2.0, 200, "measured"))
    flags: list[str] = []
    return timing._no_kernel_of_its_own(
        object(), None, random.Random(0), identity, "strict", 30.0, "cuda:0", flags
    )


def test_gpu_work_of_a_solution_with_no_kernel_of_its_own_is_refused_before_timing(monkeypatch):
    refused = _profiled(monkeypatch, (("ampere_sgemm_128x64_nn", "library", 1.5),), KernelIdentity())
    assert refused is not None and refused.timing is None and refused.speedup == {}
    assert [r.code for r in refused.reasons] == [ReasonCode.NO_CUSTOM_KERNEL]
    assert refused.coverage is not None and refused.coverage.custom_fraction == 0.0
    assert "not timed" in refused.coverage.note and "durations not its alone" in refused.coverage.note


def test_a_call_with_no_gpu_work_decides_nothing_and_timing_goes_on(monkeypatch):
    assert _profiled(monkeypatch, (), KernelIdentity()) is None


class _Stop(Exception):
    """Ends the faked timing where the test has seen what it needs."""


def _timing_events(
    monkeypatch: pytest.MonkeyPatch,
    own: bool,
    kernels: tuple,
    handoff_bytes: int = 0,
    refuse_plain_first: bool = True,
) -> list[tuple]:
    """What ``time_candidate`` asks for, in order, up to its first baseline: each growth of the
    memory reservation, the candidate's load and its profiled call (a GPU faked at its seams)."""
    from types import SimpleNamespace

    events: list[tuple] = []

    class Turns:
        @contextmanager
        def shared(self, lend=None):
            events.append(("turn",))
            yield

        alone = shared

    def load(worker, ctx, staged, task_path, options, let_go=False):
        assert let_go  # the worker drops what its cases kept before it loads for its timed rounds
        events.append(("load",))
        return {"ok": True}

    def account(worker, ctx, seed, identity, policy, limit, floor_us):
        events.append(("profile",))
        gpu = sum(ms for _, _, ms in kernels)
        return Coverage(0.0 if gpu else None, kernels, policy)

    def baselines(*args, **kwargs):
        events.append(("baselines",))
        raise _Stop

    identity = KernelIdentity(frozenset({"my_kernel"}) if own else frozenset())
    monkeypatch.setattr(timing, "kernel_identity", lambda setup, worker: identity)
    monkeypatch.setattr(timing, "_gpu_telemetry", lambda device, turns: None)
    monkeypatch.setattr(timing, "load_candidate", load)
    monkeypatch.setattr(timing, "account", account)
    monkeypatch.setattr(timing, "launch_floor", lambda device: LaunchFloor(2.0, 200, "measured"))
    monkeypatch.setattr(timing, "_followed_setting", lambda ctx, reply, flags: {})
    monkeypatch.setattr(timing, "_baselines", baselines)
    setup = SimpleNamespace(
        timing_seed=1,
        solution=SimpleNamespace(file=SimpleNamespace(triage=SimpleNamespace(backend="cuda"))),
        task=SimpleNamespace(meta=SimpleNamespace(policy="strict"), path="task.py"),
        timed=("default",),
        contexts={"default": None},
        profile_bytes=110,
        footprint_bytes=170,
        handoff_bytes=4,  # what setup counted of the parent's handoff buffers
    )
    checked = SimpleNamespace(tolerances={"default": object()})
    options = SimpleNamespace(
        policy=None, step_limit=lambda step: 30.0, refuse_plain_first=refuse_plain_first
    )
    grow = lambda nbytes: events.append(("grow", nbytes))  # noqa: E731
    try:
        worker = SimpleNamespace(handoff_bytes=lambda: handoff_bytes)
        refused = timing.time_candidate(setup, checked, worker, "s", options, "cuda:0", None, Turns(), grow)
        events.append(("refused", [r.code for r in refused.reasons]))
    except _Stop:
        pass
    return [e for e in events if e[0] != "turn"]


def test_a_solution_with_no_kernel_of_its_own_is_refused_in_the_room_of_one_call(monkeypatch):
    """Its cases passed, it reserves only its cases' and one call's memory (``profile_bytes``) for
    the call that refuses it: never the timed rounds' room, which on a large task is the device."""
    events = _timing_events(monkeypatch, own=False, kernels=(("ampere_sgemm", "library", 1.5),))
    assert events == [("grow", 110), ("load",), ("profile",), ("refused", [ReasonCode.NO_CUSTOM_KERNEL])]


def test_a_screened_solution_that_goes_on_grows_to_the_timed_rounds_before_its_baselines(monkeypatch):
    events = _timing_events(monkeypatch, own=False, kernels=())
    assert events == [("grow", 110), ("load",), ("profile",), ("grow", 170), ("baselines",)]


def test_a_solution_with_a_kernel_of_its_own_reserves_the_timed_rounds_before_its_load(monkeypatch):
    events = _timing_events(monkeypatch, own=True, kernels=())
    assert events[:2] == [("grow", 170), ("load",)] and ("profile",) not in events
    assert events[-1] == ("baselines",)


def test_the_references_rerun_alone_is_taken_through_the_timed_rounds_unprofiled(monkeypatch):
    """The reference run as the candidate (kernelproof/evaluate/memory_blame.py) defines no kernel:
    profiled first, it would be refused before the batch that ran out of memory in the candidate's
    evaluation. With ``refuse_plain_first`` off it reserves the timed rounds and goes on to its
    baselines, as a solution with kernels of its own does."""
    library = (("ampere_sgemm", "library", 1.5),)
    events = _timing_events(monkeypatch, own=False, kernels=library, refuse_plain_first=False)
    assert events == [("grow", 170), ("load",), ("grow", 170), ("baselines",)]


@pytest.mark.parametrize("own", [True, False])
@pytest.mark.parametrize("held", [9, 3])
def test_the_parents_handoff_buffers_beyond_what_setup_counted_are_reserved_beside_the_timed_rounds(
    monkeypatch, own, held
):
    """The parent's device buffers for the worker's handoff live until the worker exits; setup
    counted those it expected (4): each growth adds only what the worker's cases made beyond that."""
    events = _timing_events(monkeypatch, own=own, kernels=(), handoff_bytes=held)
    grown = [e[1] for e in events if e[0] == "grow"]
    more = max(0, held - 4)
    assert grown == ([170 + more] * 2 if own else [110 + more, 170 + more])  # growing again holds as much
