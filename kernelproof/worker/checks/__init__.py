"""The worker's defences, one per file, organised as the exploit zoo is (tests/exploits/zoo.py).

Each check returns a failed reply (:func:`kernelproof.wire.replies.failure`) or None. The
worker's judgement is data the parent re-checks where it can (I1); these checks are what only the
candidate's process can see: the exact type of an output, its storage, the inputs after the call,
the threads, the flags and what the solution left active in the harness.

- ``output_type``: an output is a plain, materialised tensor on the device (I6, C3)
- ``aliasing``: no output shares memory with an input (I6, A7, A8)
- ``mutation``: inputs come back unchanged (I3, A8)
- ``threads``: no thread started or left by a call (I5, C2)
- ``flags``: the numeric flags the contract pinned (I7, C7)
- ``hooks``: no mode, aten override or hook left in the harness's own torch calls (I1, I5, D4)
- ``reuse``: outputs of different calls that share storage (B4: a warning, not a failure)
- ``shadows``: no tensor the solution held carries a method of its own (D4), looked at first
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker import calls
from kernelproof.worker.checks import aliasing, flags, hooks, mutation, output_type, shadows, threads
from kernelproof.worker.state import WorkerState


def harness_intact(state: WorkerState, timing: bool = False, full: bool = False) -> dict[str, Any] | None:
    """Before a harness step: a failed reply if the solution replaced harness code or left a hook
    in the harness's torch calls since the last look; else None.

    Replaced functions keep their codes (``forbidden_construct``, ``timing_tamper`` during timed
    requests); a mode, an aten override or a trace hook is ``harness_hooked``. ``full`` also
    compares the dispatcher's tables with the snapshot (after a load, before untimed requests).
    """
    replaced = state.integrity()
    if replaced:
        if timing:
            message = f"the solution replaced timing or harness functions: {', '.join(replaced)}"
            return failure(ReasonCode.TIMING_TAMPER, message)
        return failure(
            ReasonCode.FORBIDDEN_CONSTRUCT, f"the solution replaced harness functions: {', '.join(replaced)}"
        )
    hooked = state.hooked(full) if state.candidate else []
    if hooked:
        return failure(
            ReasonCode.HARNESS_HOOKED,
            f"the solution left {', '.join(hooked)} active in the harness's own steps",
            "a mode, an aten override, a trace hook, a signal handler or a planted module left by the "
            "solution runs its code inside the harness (fingerprints, checks, the copy to the parent), "
            "after the timed window has closed",
        )
    return None


def after_call(
    state: WorkerState,
    out: Any,
    args: list[Any],
    originals: list[tuple[int, torch.Tensor]],
    threads_before: tuple[set[int], int],
    expected_flags: dict[str, Any],
) -> dict[str, Any] | None:
    """Every check of one correctness call, in order; the first failure, or None."""
    found = harness_intact(state)
    if found is not None:
        return found
    outputs = calls.outputs(out)
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    with hooks.quiet():
        return (
            shadows.check(outputs, "output")
            or shadows.check(inputs, "input")
            or output_type.check(outputs, state.device)
            or aliasing.check(outputs, args, state.inplace)
            or mutation.check(args, originals, state.inplace)
            or threads.check(state, threads_before)
            or flags.check(expected_flags)
        )
