"""Whose failure an evaluation's is when it is none of the solution's: kernelproof's own, or the task's size.

Split from :mod:`kernelproof.api`, which runs the evaluation; this decides what its verdict says
when GPU memory ran short or the harness broke. An evaluation that may have failed for want of
memory while it shared the device runs again alone (:func:`worth_running_alone`); a memory-shaped
failure of one that does not fit the device is ``too_large``, never the solution's crash
(:func:`beyond_the_device`). Both are decided from the parent's own facts
(kernelproof/evaluate/memory_blame.py), never from a reason's text or the worker's log, which the
solution writes (I1). A bug of kernelproof's becomes an ``internal_error`` verdict, so a run never
loses its other verdicts to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from kernelproof.evaluate.memory_blame import (
    MemoryFacts,
    failed_after_correctness,
    memory_shaped,
    near_the_edge,
    own_out_of_memory,
    reference_alone_fails,
)
from kernelproof.options import EvalOptions
from kernelproof.submission import Submitted, read_submitted
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict

if TYPE_CHECKING:
    from kernelproof.executors.local import LocalPool

# One evaluation of (task, solution), each read once, under options on the device the caller holds:
# api's, which turns kernelproof's own failures into verdicts (the reference's re-run alone goes
# through it).
Judge = Callable[[Submitted, Submitted, EvalOptions], Verdict]


RUN_ALONE_CODES = frozenset({ReasonCode.TOO_LARGE, ReasonCode.CRASH, ReasonCode.INTERNAL_ERROR})


def worth_running_alone(verdict: Verdict) -> bool:
    """Could the evaluation have failed for want of GPU memory while it shared the device: the
    parent's own (too_large), a worker that died or ran out of memory (crash: a forward's
    out-of-memory, or a case's inputs the worker could not place on the device), a worker's
    harness step that failed? Decided by codes, never by a reason's text (the solution writes
    that): running it again alone only gathers facts, it blames no one. A runtime error is left
    out, though memory-shaped for the reference's re-run: a wrong kernel's exception is common,
    and each re-run holds the device."""
    codes = {r.code for r in verdict.reasons}
    return bool(codes & RUN_ALONE_CODES) or lost_a_baseline(verdict)


def lost_a_baseline(verdict: Verdict) -> bool:
    """Was a baseline dropped from the timed rounds by a crash (out of device memory, a lost
    context)? A baseline runs the task's own code in a worker of kernelproof's, so that is the
    device's memory, not the solution's: alone, its speedup may be measured. (On an H200, with
    four evaluations in flight, every honest kernel of KernelBench level 1's 6.4 GB tasks passed
    with no speedup: eager ran out of memory mid-run and was dropped with a flag.) Read from the
    parent's record of the drop's code, never from a message."""
    timing = verdict.timing
    return timing is not None and any(
        code == ReasonCode.CRASH.value for shape in timing.shapes for code in shape.baselines_lost.values()
    )


def memory_facts(verdict: Verdict, device: str, pool: LocalPool) -> MemoryFacts:
    """The parent's facts on the evaluation: its footprint as its setup measured it, in the phase it
    failed in (its correctness cases', unless every case passed and the failure came in the timed
    rounds, which may hold more: a batch's inputs in each timed program's worker), and what the
    pool admits on the device. A wrong kernel that crashes among its cases is weighed against what
    its cases take, never against the timed rounds it never reached."""
    capacity = getattr(pool.memory(device), "capacity_bytes", None)
    memory = verdict.environment.get("memory") or {}
    whole = memory.get("footprint_bytes")
    phase = whole if failed_after_correctness(verdict) else memory.get("correctness_bytes") or whole
    return MemoryFacts(phase, capacity)


def near_the_edge_failure(verdict: Verdict, device: str, pool: LocalPool) -> bool:
    """A memory-shaped failure of an evaluation large enough for the reference's re-run alone."""
    return (
        bool(verdict.reasons)
        and memory_shaped(verdict.reasons[0])
        and near_the_edge(memory_facts(verdict, device, pool))
    )


def beyond_the_device(
    verdict: Verdict, task: Submitted, options: EvalOptions, device: str, pool: LocalPool, judge: Judge
) -> Verdict:
    """A worker that ran out of GPU memory in an evaluation whose own footprint (the parent's
    estimate: inputs, reference, float64 oracle, the candidate's outputs) is more than the device
    admits is the task's size, not the solution's fault: too_large, never a crash.

    Decided from the parent's facts only (kernelproof/evaluate/memory_blame.py): never from the
    worker's log or a reason's text, which the solution controls. (On an H200, KernelBench
    level1/21_Sigmoid's footprint was estimated at 137 GB, within the 138 GB admitted, while the
    parent held 115 GiB and the worker's poison fill found no memory: the reference, run alone as
    the candidate in a fresh worker, fails the same way; that is the second fact.) ``judge`` runs
    that re-run; the caller holds the whole device for it, beside other evaluations its failure
    would be theirs.
    """
    facts = memory_facts(verdict, device, pool)
    capacity, footprint = facts.available_bytes, facts.footprint_bytes
    if not verdict.reasons or not memory_shaped(verdict.reasons[0]):
        return verdict
    if not own_out_of_memory(facts) and near_the_edge(facts):
        timed = failed_after_correctness(verdict)
        facts = dataclasses.replace(
            facts, reference_alone_failed=reference_alone_fails(task, options, judge, through_timing=timed)
        )
    if not own_out_of_memory(facts):
        return verdict
    why = (
        "the task's reference, run alone in a fresh worker, failed too"
        if facts.reference_alone_failed
        else (f"{capacity / 1e9:.0f} GB are admitted")
    )
    held = (
        "inputs, reference, float64 oracle and the candidate's outputs, and in the timed rounds a "
        "batch's inputs and outputs in each timed worker"
        if failed_after_correctness(verdict)
        else "inputs, reference, float64 oracle and the candidate's outputs"
    )
    message = (
        f"the task needs more GPU memory than {device} admits: this evaluation's footprint is "
        f"{footprint / 1e9:.0f} GB ({held}, as its setup measured them), {why}, and the candidate's worker failed "
        f"({verdict.reasons[0].message[:200]}); run it on a device with more memory or give the task smaller shapes"
    )
    reason = Reason(ReasonCode.TOO_LARGE, message, verdict.reasons[0].detail if verdict.reasons else "")
    # what the evaluation recorded (its footprint, phases, layers) stays: it is how it was decided
    return dataclasses.replace(
        verdict, verdict=Outcome.ERROR, reasons=(reason,), timing=None, speedup={}, reward=0.0
    )


def too_large_verdict(
    task: Submitted | str, solution: Submitted | str, device: str, exc: BaseException
) -> Verdict:
    """The parent ran out of GPU memory holding this task's references, alone on the device."""
    total = (
        torch.cuda.get_device_properties(torch.device(device)).total_memory
        if device.startswith("cuda")
        else 0
    )
    message = (
        f"the task needs more GPU memory than {device} has ({total / 2**30:.0f} GiB): the parent ran out "
        f"while holding its reference, float64 oracle and the candidate's outputs ({str(exc).splitlines()[0][:200]})"
    )
    return error_verdict(task, solution, device, Reason(ReasonCode.TOO_LARGE, message))


def internal_error_verdict(
    task: Submitted | str, solution: Submitted | str, device: str, exc: BaseException
) -> Verdict:
    """kernelproof failed (a harness bug): the run goes on, and this verdict shows the traceback's end."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    reason = Reason(ReasonCode.INTERNAL_ERROR, f"kernelproof failed: {type(exc).__name__}: {exc}", tb)
    return error_verdict(task, solution, device, reason)


def error_verdict(task: Submitted | str, solution: Submitted | str, device: str, reason: Reason) -> Verdict:
    """An ``error`` verdict of one reason, naming both files by their contents: the bytes the
    evaluation read (a path is read here, for callers that hold no bytes)."""
    task_file, solution_file = _submitted(task, "task"), _submitted(solution, "solution")
    return Verdict(
        verdict=Outcome.ERROR,
        reasons=(reason,),
        task=FileRef(task_file.path, task_file.sha256),
        solution=FileRef(solution_file.path, solution_file.sha256),
        correctness=None,
        timing=None,
        speedup={},
        roofline=None,
        coverage=None,
        environment={"device": device},
        reward=0.0,
    )


def _submitted(file: Submitted | str, what: str) -> Submitted:
    return file if isinstance(file, Submitted) else read_submitted(file, what)
