"""Whether an out-of-memory was kernelproof's own is decided from the parent's facts, never from
what the solution can write (its log, an exception's text): I10, I11.

A solution that printed CUDA's out-of-memory words and died with the harness's exit status got
too_large (an error, never stored, never its fault); one that raised an exception with those words
was run again and could be reclassified. Both are the solution's failures now. The rule itself
(memory_blame.own_out_of_memory) takes only the parent's footprint estimate against the memory it
measured, or a re-run of the reference alone that also failed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernelproof import api, blame
from kernelproof.api import evaluate
from kernelproof.evaluate.memory_blame import (
    MemoryFacts,
    memory_shaped,
    near_the_edge,
    own_out_of_memory,
    reference_alone_fails,
)
from kernelproof.options import EvalOptions
from kernelproof.submission import read_submitted
from kernelproof.verdict import Outcome, Reason, ReasonCode

TESTS = Path(__file__).resolve().parents[1]
SCALE_RELU = str(TESTS / "data" / "tasks" / "scale_relu.py")
SOLUTIONS = TESTS / "protocol" / "solutions"
GB = 10**9


def test_an_evaluation_larger_than_the_memory_the_parent_measured_is_its_own():
    assert own_out_of_memory(MemoryFacts(footprint_bytes=137 * GB, available_bytes=129 * GB))
    assert not own_out_of_memory(MemoryFacts(footprint_bytes=10 * GB, available_bytes=129 * GB))


def test_without_a_fact_the_failure_is_the_solution_s():
    assert not own_out_of_memory(MemoryFacts(footprint_bytes=None, available_bytes=129 * GB))
    assert not own_out_of_memory(MemoryFacts(footprint_bytes=0, available_bytes=None))  # the CPU


def test_a_reference_that_also_fails_alone_makes_it_kernelproof_s():
    assert own_out_of_memory(
        MemoryFacts(footprint_bytes=None, available_bytes=None, reference_alone_failed=True)
    )


def test_only_failures_that_can_be_a_lack_of_memory_are_weighed():
    assert memory_shaped(Reason(ReasonCode.CRASH, "x")) and not memory_shaped(
        Reason(ReasonCode.MISMATCH, "x")
    )
    assert memory_shaped(Reason(ReasonCode.RUNTIME_ERROR, "x"))
    assert not memory_shaped(Reason(ReasonCode.RUNTIME_ERROR, "x", memory_excluded=True))


def _verdict_of(code: ReasonCode | None, footprint_bytes: int = 0):
    """An evaluation's verdict failed with `code` (None: passed), with the footprint its setup estimated."""
    reasons = (Reason(code, "forward raised OutOfMemoryError"),) if code else ()
    v = blame.error_verdict(SCALE_RELU, SCALE_RELU, "cpu", reasons[0]) if reasons else None
    if v is None:
        v = blame.error_verdict(SCALE_RELU, SCALE_RELU, "cpu", Reason(ReasonCode.CRASH, "x"))
        v = dataclasses.replace(v, verdict=Outcome.PASS, reasons=())
    return dataclasses.replace(v, environment={"memory": {"footprint_bytes": footprint_bytes}})


@pytest.mark.parametrize(
    ("alone", "expected"), [(ReasonCode.CRASH, True), (None, False), (ReasonCode.MISMATCH, False)]
)
def test_the_reference_alone_runs_as_the_candidate_and_its_failure_is_the_fact(alone, expected):
    seen = []

    def judge(task, solution, options):
        seen.append((solution.text, options.correctness_only))
        return _verdict_of(alone)

    task = read_submitted(SCALE_RELU)
    assert reference_alone_fails(task, EvalOptions(device="cpu", db=""), judge) is expected
    source, correctness_only = seen[0]
    assert (
        source.startswith(Path(SCALE_RELU).read_text()) and "ModelNew = Model" in source and correctness_only
    )


@pytest.mark.parametrize(("alone", "codes"), [(ReasonCode.CRASH, ["too_large"]), (None, ["crash"])])
def test_a_crash_near_the_device_s_edge_is_too_large_only_if_the_reference_alone_fails_too(
    monkeypatch, alone, codes
):
    """80 GB of 129 GB admitted: the estimate alone does not decide, the reference's re-run does."""
    from kernelproof.executors.device_memory import DeviceMemory
    from kernelproof.executors.local import LocalPool

    outcomes = [_verdict_of(ReasonCode.CRASH, 80 * GB), _verdict_of(alone)]
    ran = []

    def fake(task, solution, options, device, workers):
        ran.append(Path(solution.path).name)
        return outcomes.pop(0)

    monkeypatch.setattr(api, "evaluate_pair", fake)
    pool = LocalPool(prespawn=False)
    monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(129 * GB))
    try:
        v = api.evaluate(SCALE_RELU, SCALE_RELU, EvalOptions(device="cpu", db=""), pool=pool)
    finally:
        pool.close()
    assert ran[1] == "reference_alone.py" and v.codes == codes, v.reasons
    if codes == ["too_large"]:
        assert "reference, run alone in a fresh worker, failed too" in v.reasons[0].message


def test_a_crash_far_from_the_edge_never_runs_the_reference_again():
    assert not near_the_edge(MemoryFacts(footprint_bytes=10 * GB, available_bytes=129 * GB))
    assert near_the_edge(MemoryFacts(footprint_bytes=80 * GB, available_bytes=129 * GB))
    assert not near_the_edge(MemoryFacts(footprint_bytes=0, available_bytes=None))


@pytest.mark.parametrize(
    ("solution", "codes"),
    [("oom_text_then_exit.py", ["crash"]), ("oom_text_in_exception.py", ["runtime_error"])],
)
def test_out_of_memory_words_from_the_solution_are_its_own_failure(solution, codes):
    options = EvalOptions(device="cpu", db="", seed=3, correctness_only=True, seeds_per_case=1)
    v = evaluate(SCALE_RELU, str(SOLUTIONS / solution), options)
    assert v.verdict.value == "fail" and v.codes == codes, v.reasons
    assert "too_large" not in v.codes
    if solution == "oom_text_then_exit.py":
        assert "out of memory" in v.reasons[0].detail  # the log is shown, deciding nothing


@pytest.mark.gpu
@pytest.mark.parametrize(("admitted_bytes", "codes"), [(1, ["too_large"]), (None, ["crash"])])
def test_a_worker_out_of_memory_on_the_gpu_is_too_large_only_by_the_parent_s_facts(
    monkeypatch, admitted_bytes, codes
):
    """A real CUDA out-of-memory in the candidate's worker (a 64 TiB allocation): the worker's
    account is a crash either way; the parent's facts decide. Where its footprint estimate exceeds
    what it admits for the device (forced here by admitting 1 byte), the evaluation does not fit
    and is too_large (an error, never stored); where it fits, the crash is the solution's."""
    from kernelproof.executors.device_memory import DeviceMemory
    from kernelproof.executors.local import LocalPool

    pool = LocalPool(prespawn=False)
    try:
        if admitted_bytes is not None:
            monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(admitted_bytes))
        options = EvalOptions(device="cuda", db="", seed=3, correctness_only=True, seeds_per_case=1)
        v = api.evaluate(SCALE_RELU, str(TESTS / "data" / "solutions" / "gpu_oom.py"), options, pool=pool)
    finally:
        pool.close()
    assert v.codes == codes, v.reasons
    assert v.verdict.value == ("error" if codes == ["too_large"] else "fail")


def test_the_reference_alone_runs_with_every_device_slot_held(monkeypatch):
    """Its failure decides too_large: beside another evaluation's memory it would be theirs."""
    from kernelproof.executors.device_memory import DeviceMemory
    from kernelproof.executors.local import LocalPool

    outcomes = [_verdict_of(ReasonCode.CRASH, 80 * GB), _verdict_of(None)]
    free_slots = []
    pool = LocalPool(prespawn=False)
    options = EvalOptions(device="cpu", db="", per_device=3)

    def fake(task, solution, options, device, workers):
        free_slots.append(pool.admission(device, options.per_device).free)
        return outcomes.pop(0)

    monkeypatch.setattr(api, "evaluate_pair", fake)
    monkeypatch.setattr(
        blame, "worth_running_alone", lambda verdict: False
    )  # straight to the reference's re-run
    monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(129 * GB))
    try:
        api.evaluate(SCALE_RELU, SCALE_RELU, options, pool=pool)
    finally:
        pool.close()
    assert free_slots == [2, 0]  # the evaluation in one slot of three; the reference's re-run in all


def _with_cases(verdict, run: int, passed: int):
    """`verdict` with the parent's count of its correctness cases."""
    from kernelproof.verdict import Correctness

    record = Correctness(run, passed, 0.0, 0.0, "rel 1e-5", "fp32")
    return dataclasses.replace(verdict, correctness=record)


@pytest.mark.parametrize(
    ("cases", "correctness_only", "rerun_timed"),
    [
        ((4, 4), False, True),  # failed in the timed rounds: the reference is timed too
        ((4, 3), False, False),  # failed among its cases: the reference's cases alone
        ((0, 0), False, False),  # failed before any case
        ((4, 4), True, False),  # nothing was timed: neither is the reference
    ],
)
def test_the_reference_alone_runs_through_the_phase_the_candidate_failed_in(
    monkeypatch, cases, correctness_only, rerun_timed
):
    """A timed call that runs out of memory after every case passed (the harness's batch of fresh
    inputs, the baselines' workers) is weighed by a reference that is timed as well: a
    correctness-only re-run passes and would store an honest kernel as a crash."""
    from kernelproof.executors.device_memory import DeviceMemory
    from kernelproof.executors.local import LocalPool

    failed = _with_cases(_verdict_of(ReasonCode.CRASH, 80 * GB), *cases)
    alone = _verdict_of(ReasonCode.CRASH) if rerun_timed else _verdict_of(None)
    outcomes = [failed, alone]
    asked = []

    def fake(task, solution, options, device, workers):
        asked.append((options.correctness_only, options.refuse_plain_first))
        return outcomes.pop(0)

    monkeypatch.setattr(api, "evaluate_pair", fake)
    pool = LocalPool(prespawn=False)
    monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(129 * GB))
    options = EvalOptions(device="cpu", db="", correctness_only=correctness_only)
    try:
        v = api.evaluate(SCALE_RELU, SCALE_RELU, options, pool=pool)
    finally:
        pool.close()
    # a timed re-run is not refused at one profiled call before its batches (the reference has no
    # kernel of its own): it reaches the phase the candidate ran out of memory in
    assert asked == [(correctness_only, True), (not rerun_timed, not rerun_timed)], asked
    assert v.codes == (["too_large"] if rerun_timed else ["crash"]), v.reasons


def _judged_in_turn(monkeypatch, outcomes: list) -> tuple:
    """(the verdict, the device slots free at each judgement) of one evaluation at four in flight
    whose judgements are `outcomes` in turn: a second one ran only if it was run again alone."""
    from kernelproof.executors.device_memory import DeviceMemory
    from kernelproof.executors.local import LocalPool

    free_slots = []
    pool = LocalPool(prespawn=False)

    def fake(task, solution, options, device, workers):
        free_slots.append(pool.admission(device, options.per_device).free)
        return outcomes.pop(0)

    monkeypatch.setattr(api, "evaluate_pair", fake)
    monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(129 * GB))
    try:
        v = api.evaluate(SCALE_RELU, SCALE_RELU, EvalOptions(device="cpu", db="", per_device=4), pool=pool)
    finally:
        pool.close()
    return v, free_slots


@pytest.mark.parametrize(
    ("code", "again"),
    [
        (ReasonCode.CRASH, True),  # out of memory, a forward's or placing a case's inputs
        (ReasonCode.MISSING_RESULT, False),  # a timed output overwritten: a cheat, never the device's
        (ReasonCode.TOO_LARGE, True),
        (ReasonCode.RUNTIME_ERROR, False),  # a wrong kernel's exception: never worth the device
        (ReasonCode.MISMATCH, False),
    ],
)
def test_a_failure_that_shared_the_device_runs_again_alone_when_memory_could_explain_it(
    monkeypatch, code, again
):
    """On an H100, KernelBench level1/94_MSELoss beside three other evaluations: the worker of an
    honest Triton kernel could not place its two 4 GiB inputs (then missing_result, now a crash),
    and the verdict was stored as the candidate's. Alone on the device it is judged on its merit."""
    v, free_slots = _judged_in_turn(monkeypatch, [_verdict_of(code), _verdict_of(None)])
    if again:
        assert free_slots == [3, 0] and v.codes == []  # the second judgement, alone, is the verdict
    else:
        assert free_slots == [3] and v.codes == [code.value]


def _passed_with_lost(code: str | None):
    """A pass whose eager baseline was dropped from its timed rounds with `code` (None: none was)."""
    from kernelproof.verdict import ShapeTiming, TimeStats, Timing

    stats = TimeStats(10, 1.0, 1.0, 1.0, 1.0, 0.1, (0.9, 1.1))
    shape = ShapeTiming("default", "cold", "cuda-event", stats, {}, (), 3, "ci_target")
    if code is not None:
        shape = dataclasses.replace(shape, baselines_lost={"eager": code})
    return dataclasses.replace(_verdict_of(None), timing=Timing("cold", "cuda:0", (shape,)))


@pytest.mark.parametrize(("code", "again"), [("crash", True), ("runtime_error", False), (None, False)])
def test_a_pass_whose_baseline_crashed_beside_others_runs_again_alone(monkeypatch, code, again):
    """On an H200, four in flight, every honest kernel of KernelBench level 1's 6.4 GB tasks passed
    with no speedup: eager ran out of memory mid-run and was dropped. A baseline's crash is the
    device's memory (the task's own code, in a worker of kernelproof's): alone, it is measured."""
    v, free_slots = _judged_in_turn(monkeypatch, [_passed_with_lost(code), _passed_with_lost(None)])
    assert free_slots == ([3, 0] if again else [3])  # alone, the second judgement is the verdict
    assert not blame.lost_a_baseline(v)
    assert v.timing.shapes[0].baselines_lost == ({"eager": code} if code and not again else {})


def test_a_verdict_decided_alone_is_charged_with_its_first_attempt_and_its_wait(monkeypatch):
    """A verdict kept its last run's seconds only: on an H200 the first attempts of evaluations run
    again alone, and the waits for the device to empty, were in no verdict and no cost table."""
    first = dataclasses.replace(_verdict_of(ReasonCode.CRASH), elapsed_s=7.0)
    second = dataclasses.replace(_verdict_of(None), elapsed_s=5.0)
    second = dataclasses.replace(
        second, environment={**second.environment, "steps": {"setup": {"s": 1.0, "n": 1}}}
    )
    v, free_slots = _judged_in_turn(monkeypatch, [first, second])
    assert free_slots == [3, 0] and v.codes == []
    steps = v.environment["steps"]
    assert steps["first_attempt"] == {"s": 7.0, "n": 1} and steps["setup"] == {"s": 1.0, "n": 1}
    charged = sum(steps.get(k, {}).get("s", 0.0) for k in ("first_attempt", "alone_wait", "alone_checks"))
    assert v.elapsed_s == pytest.approx(5.0 + charged) and v.elapsed_s >= 12.0


def test_a_verdict_decided_in_its_first_attempt_charges_nothing_twice():
    v = dataclasses.replace(_verdict_of(None), elapsed_s=4.0)
    charged = api.with_earlier_attempt(v, None, 0.5, 2.0)
    assert charged.elapsed_s == pytest.approx(6.5)
    assert "first_attempt" not in charged.environment["steps"]
    assert charged.environment["steps"]["alone_checks"] == {"s": 2.0, "n": 1}
    assert api.with_earlier_attempt(v, None, 0.0, 0.0).elapsed_s == 4.0
