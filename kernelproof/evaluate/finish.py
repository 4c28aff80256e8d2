"""Step 5, finish: the verdict assembled from the steps' records, in one function.

Pass only by positive confirmation (I9): every planned case ran and passed, and no step found a
reason to reject. Anything else is a fail (the candidate's doing) or an error (the task's, found
before the candidate ran). The environment says what judged: versions, the device, the phases'
times and the worker's own account of itself.
"""

from __future__ import annotations

import datetime as _dt
import platform
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from kernelproof._version import __version__
from kernelproof.code_identity import this_source
from kernelproof.evaluate import machine
from kernelproof.evaluate.build import with_worker_report
from kernelproof.evaluate.provenance import provenance_of
from kernelproof.evaluate.step_records import Built, Checked, Probed, Setup, Stopped, Timed
from kernelproof.evaluate.worker_requests import device_name
from kernelproof.options import EvalOptions
from kernelproof.verdict import (
    Correctness,
    FileRef,
    Outcome,
    Reason,
    ReasonCode,
    Verdict,
    compute_reward,
)
from kernelproof.verify.oracle_compare import C_NORM, K_NORM

# The parent's findings that excuse a candidate (an error of the evaluation, never stored).
EXCUSES = frozenset({ReasonCode.MACHINE_BUSY, ReasonCode.ENVIRONMENT, ReasonCode.TOO_LARGE})


@dataclass(frozen=True)
class Envelope:
    """What every verdict of one evaluation shares, whichever step decided it."""

    environment: Mapping[str, Any]  # what judged, and how the phases went
    settings: Mapping[str, Any]  # what was asked for (the seed included)
    started: float  # time.monotonic() when the evaluation began
    kernelbench_asked: bool  # report KernelBench's own allclose rule


def environment(device: str) -> dict[str, Any]:
    """What judged: kernelproof's code, the interpreter, torch, the device."""
    env: dict[str, Any] = {
        "kernelproof": __version__,
        "kernelproof_source_sha256": this_source(),  # which code judged, beyond the version string
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "device_name": device_name(device),
        "host": platform.node(),
    }
    if device.startswith("cuda"):
        env["cuda"] = torch.version.cuda
    return env


def settings_of(options: EvalOptions, seed: int | None, device: str) -> dict[str, Any]:
    """What was asked for, as the verdict records it (the seed once it is no longer secret)."""
    return {**options.cache_key_fields(), "seed": seed, "device": device}


def stopped_verdict(
    stop: Stopped,
    task_ref: FileRef,
    solution_ref: FileRef,
    envelope: Envelope,
    built: Built | None = None,
) -> Verdict:
    """A verdict decided before the candidate's worker ran."""
    flags = stop.flags + (built.flags if built else ())
    build = built.record if built else None
    return _verdict(stop.outcome, (stop.reason,), task_ref, solution_ref, envelope, flags, build=build)


def verdict_of(
    setup: Setup,
    built: Built,
    checked: Checked,
    timed: Timed | None,
    probed: Probed,
    died: Reason | None,
    envelope: Envelope,
) -> Verdict:
    """The verdict of an evaluation whose candidate ran: from every step's record, nothing else."""
    # What this machine lacks is the parent's decision, made before the worker ran: never a reply's.
    device, file = str(setup.device), setup.solution.file
    found = tuple(
        machine.judged_on_this_machine(r, file, device)
        for r in checked.reasons + (timed.reasons if timed else ())
    )
    too_large = died is not None and died.code is ReasonCode.TOO_LARGE  # the device's memory, first
    # A protocol violation is the solution's, whatever else was found: nothing excuses it (I10).
    violated = died is not None and died.code is ReasonCode.PROTOCOL_VIOLATION
    if violated:  # the excuses go: the verdict is the solution's fail, and it is stored
        found = tuple(r for r in found if r.code not in EXCUSES)
    reasons = (died,) + found if too_large or violated else found + ((died,) if died else ())
    busy = [r for r in reasons if r.code is ReasonCode.MACHINE_BUSY]  # timing found the machine too busy
    if busy and not too_large and not violated:
        reasons = tuple(busy)
    flags = setup.flags + built.flags + checked.flags + (timed.flags if timed else ()) + probed.flags
    if not checked.cases and not reasons:
        reasons += (Reason(ReasonCode.MISSING_RESULT, "no case was run"),)
    passed = not reasons and checked.passed
    precision, source = setup.task.meta.precision, setup.task.meta.precision_source
    correctness = Correctness(
        cases_run=len(checked.cases),
        cases_passed=sum(c.passed for c in checked.cases),
        worst_rel_norm_err=max((c.rel_norm_err for c in checked.cases), default=0.0),
        worst_max_abs_err=max((c.max_abs_err for c in checked.cases), default=0.0),
        tolerance=f"rel-norm <= max({K_NORM:g} x reference error, {C_NORM:g} x eps) "
        f"against the float64 oracle; contract {precision} ({source})",
        precision=precision,
        precision_source=source,
        kernelbench_compatible=checked.kernelbench_ok if envelope.kernelbench_asked else None,
        cases=checked.cases,
    )
    settings = {**envelope.settings, "cases": [c.case_id for c in setup.cases + setup.probe_cases]}
    record = with_worker_report(built.record, checked.worker_build) if built.record is not None else None
    excused = too_large or (busy and not violated)
    outcome = Outcome.ERROR if excused else Outcome.PASS if passed else Outcome.FAIL
    return _verdict(
        outcome,
        reasons,
        setup.task_ref,
        setup.solution.ref,
        envelope,
        flags,
        settings=settings,
        correctness=correctness,
        timed=timed,
        build=record,
        ran=True,
    )


def _verdict(
    outcome: Outcome,
    reasons: tuple[Reason, ...],
    task_ref: FileRef,
    solution_ref: FileRef,
    envelope: Envelope,
    flags: tuple[str, ...],
    *,
    settings: Mapping[str, Any] | None = None,
    correctness: Correctness | None = None,
    timed: Timed | None = None,
    build=None,
    ran: bool = False,
) -> Verdict:
    speedup = dict(timed.speedup) if timed else {}
    best = speedup.get("best") or speedup.get("eager")
    if outcome is Outcome.PASS and reasons:
        outcome = Outcome.FAIL
    return Verdict(
        verdict=outcome,
        reasons=tuple(_named_as_given(r, solution_ref.path) for r in reasons),
        task=task_ref,
        solution=solution_ref,
        correctness=correctness,
        timing=timed.timing if timed else None,
        speedup=speedup,
        roofline=timed.roofline if timed else None,
        coverage=timed.coverage if timed else None,
        environment=dict(envelope.environment),
        reward=compute_reward(outcome, best),
        flags=tuple(flags),
        settings=dict(settings if settings is not None else envelope.settings),
        elapsed_s=time.monotonic() - envelope.started,
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        build=build,
        claims=timed.claims if timed else None,
        provenance=provenance_of(
            ran, timed.timing if timed else None, timed.coverage if timed else None, build is not None
        ),
    )


# The copy of the solution a worker imports: <its private folder>/ro/solution/<stem>.py
_STAGED = re.compile(r"[^\s\"'()]*/worker-[A-Za-z0-9_]+/ro/solution/([A-Za-z0-9_.-]+)")


def _named_as_given(reason: Reason, solution_path: str) -> Reason:
    """The reason with the worker's copy of the solution named by the path the user gave, so that a
    traceback's ``File "...", line N`` (and an editor's jump to it) leads to the user's file."""
    staged = Path(solution_path).stem + ".py"

    def named(text: str) -> str:
        return _STAGED.sub(lambda m: solution_path if m.group(1) == staged else m.group(0), text)

    message, detail = named(reason.message), named(reason.detail)
    if message == reason.message and detail == reason.detail:
        return reason
    return replace(reason, message=message, detail=detail)
