"""Whose out-of-memory was it: decided from the parent's own facts, never from a worker's words.

Why: ``too_large`` is an error of the evaluation (exit 2, never stored, never the candidate's
fault). The parent used to decide it by reading "out of memory" in the worker's log, or in a
reason's message, text the solution controls: a solution that printed those words and then died
got ``too_large`` instead of ``crash`` (I10). Only facts the parent established itself decide it:

- its footprint estimate of the evaluation (inputs, reference, float64 oracle, the candidate's
  outputs: kernelproof/evaluate/setup.py) against the device memory it measured as free or
  admitted for the evaluation: an evaluation that cannot fit cannot judge anything;
- or a re-run of the reference alone, in a fresh worker of the same size, that also failed.

The worker's log is still shown to the user as evidence; it just decides nothing. One word of the
worker's is taken, because it can only keep a failure the solution's: that its exception's class
(and every one it was raised from) is one no lack of memory takes, a TypeError or an IndexError
(``Reason.memory_excluded``). Such a failure is never weighed: on a task beyond the device, a wrong
kernel's TypeError was ``too_large``; near the device's edge, it paid for the reference's re-run
alone on the whole device. On the CPU there
is no device memory to run out of: there is never a fact, and a worker's death is the solution's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelproof.options import EvalOptions
from kernelproof.submission import Submitted, submitted_bytes
from kernelproof.verdict import Reason, ReasonCode, Verdict

# Failures a lack of device memory can take the form of: a worker that died (crash), a forward
# that raised torch.OutOfMemoryError (crash), a harness step in the worker that could not
# allocate (crash: exit status 3, or a case's inputs it could not place on the device:
# kernelproof/worker/case_runs.py; on an H100, KernelBench level1/94_MSELoss's two 4 GiB inputs
# beside three other evaluations, once reported as missing_result and stored as the candidate's).
MEMORY_SHAPED = frozenset({ReasonCode.CRASH, ReasonCode.RUNTIME_ERROR, ReasonCode.INTERNAL_ERROR})
# An evaluation whose footprint is at least this share of the memory admitted for the device is
# close enough to its edge that a failure is worth the reference's re-run alone (on an H200,
# KernelBench level1/21_Sigmoid: 137 GB estimated of 138 GB admitted, and the worker's poison fill
# found no memory). Smaller ones never pay for the re-run.
RERUN_SHARE = 0.5
REFERENCE_ALONE_NAME = "reference_alone.py"  # names the candidate; no file is read or written
REFERENCE_ALONE = "\n\nModelNew = Model  # the task's own reference, run as the candidate (memory_blame)\n"


@dataclass(frozen=True)
class MemoryFacts:
    """What the parent itself knows about an evaluation's device memory."""

    footprint_bytes: int | None  # the parent's estimate of the evaluation's device memory (None: none)
    available_bytes: int | None  # device memory the parent measured free or admitted for it (None: CPU)
    reference_alone_failed: bool | None = None  # a fresh worker running only the reference also failed


def own_out_of_memory(facts: MemoryFacts) -> bool:
    """Was a failure kernelproof's own lack of memory, by the parent's facts alone?"""
    if facts.reference_alone_failed:
        return True
    if not facts.footprint_bytes or facts.available_bytes is None:
        return False
    return facts.footprint_bytes > facts.available_bytes


def memory_shaped(reason: Reason) -> bool:
    """Can this failure be a lack of device memory at all (what the facts then decide)? Its code
    says so, unless the candidate's worker found its exception of a class no lack of memory takes
    (``Reason.memory_excluded``: a TypeError, an IndexError): a word of the solution's process,
    taken only because it can do nothing but keep the failure the solution's."""
    return reason.code in MEMORY_SHAPED and not reason.memory_excluded


def near_the_edge(facts: MemoryFacts) -> bool:
    """Is the evaluation large enough, against the memory admitted, for the reference's re-run?"""
    if not facts.footprint_bytes or not facts.available_bytes:
        return False
    return facts.footprint_bytes >= RERUN_SHARE * facts.available_bytes


def failed_after_correctness(verdict: Verdict) -> bool:
    """Did the candidate's failure come after its correctness cases, all of which the parent
    confirmed (in the timing phase, which holds its own inputs: a batch of fresh input sets in the
    candidate's worker and the baselines' own)? Read from the parent's comparison of the cases,
    never from the reason's text."""
    c = verdict.correctness
    return c is not None and c.cases_run > 0 and c.cases_passed == c.cases_run


def reference_alone_fails(
    task: Submitted,
    options: EvalOptions,
    judge: Callable[[Submitted, Submitted, EvalOptions], Verdict],
    through_timing: bool = False,
) -> bool:
    """Run the task's own reference as the candidate, in a fresh worker of the same size, through
    the phase the candidate failed in (its correctness cases only, or, `through_timing`, the timed
    rounds too, as the evaluation was asked for): does it fail as a lack of memory would? Then the
    candidate's failure was the evaluation's size, not its code. (On an H100, KernelBench
    level1/47_Sum_reduction_over_a_dimension, 8 GiB a case: an honest kernel passed its four cases
    alone on the device, then a timed call ran out of memory while the harness drew the round's
    inputs; the reference's correctness-only re-run passed, and the candidate was stored as a crash.)"""
    # the task's bytes as the evaluation read them, with the line that makes its Model the candidate
    alone = submitted_bytes(REFERENCE_ALONE_NAME, task.data + REFERENCE_ALONE.encode())
    timed = through_timing and not options.correctness_only
    # through the timed rounds themselves: the reference defines no kernel of its own, and one
    # profiled call would refuse it (no_custom_kernel) before any batch, the phase that ran out of
    # memory never reached (on an H100, 47_Sum's honest CUDA kernel stayed a crash that way)
    again = options.replace(refuse_plain_first=False) if timed else options.replace(correctness_only=True)
    verdict = judge(task, alone, again)
    first = verdict.reasons[0] if verdict.reasons else None
    return first is not None and (memory_shaped(first) or first.code is ReasonCode.TOO_LARGE)
