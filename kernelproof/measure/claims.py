"""What a verdict claims: one rule for the CPU and the GPU (docs/verdict.md, "What a verdict claims").

Correctness is proven the same way on both. Speed is a claim where the timed code is the code a
user would run: on a GPU, and on the CPU for plain PyTorch and C++ extensions compiled for it.
Triton's interpreter runs a kernel as Python over NumPy, orders of magnitude slower than the kernel
would be anywhere, so for a candidate that launches interpreted kernels the speedups are withheld
(null, with the reason): the reward has no speed term and bench's fast_p leaves the verdict out.
The measured times stay under ``timing``.

Kernel coverage (the share of the work in the solution's kernels) is judged on a GPU only. On the
CPU the verdict records instead which of the reference's own ATen operations the forward ran
outside the solution's launches (``reference_ops_outside_kernels``): a one-element Triton store
followed by ``torch.softmax`` passes there, flagged, and is never the one an optimiser keeps.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

import torch

from kernelproof.verdict import (
    REFERENCE_OPS_OUTSIDE,
    SPEED_WITHHELD_ATEN,
    SPEED_WITHHELD_INTERPRETER,
    SPEED_WITHHELD_UNCONFIRMED,
    Claims,
    Coverage,
    Speedup,
)
from kernelproof.verify.case_plan import VariantContext, make_inputs, run_model

KINETO_QUIET = "6"  # above Kineto's USDT level (5), whose lines torch 2.13 prints at every profiler start
WITHHELD_NOTE = (
    "withheld: the candidate's kernels ran in Triton's interpreter, whose speed says nothing about a "
    "kernel (claims.speed_withheld); the measured times are under timing"
)
CPU_COVERAGE_NOTE = (
    "kernel coverage is not judged on the CPU (only that a solution that defines kernels launches them)"
)


def gpu_claims() -> Claims:
    """On a GPU every figure is a claim."""
    return Claims(speed=True)


def cpu_claims(backend: str, coverage: Coverage | None, reference_ops: frozenset[str] | None) -> Claims:
    """The CPU's claims from the launch count (`coverage`) and the reference's operations (None:
    they could not be profiled, and the note says so).

    Interpreted launches withhold speed; where launches could not be counted, the solution's static
    backend decides (a Triton solution runs interpreted on the CPU)."""
    counted = coverage.interpreted_launches if coverage is not None else None
    interpreted = counted > 0 if counted is not None else backend == "triton"
    outside = tuple(op for op in (coverage.aten_outside if coverage else ()) if op in (reference_ops or ()))
    parts = [CPU_COVERAGE_NOTE]
    if reference_ops is None:
        parts.append(
            "the reference's operations could not be profiled: the ATen ops outside the launches were not compared with them"
        )
    wrapped = coverage is not None and bool(coverage.aten_launches) and not coverage.custom_launches
    if interpreted:
        parts.append("speed is not a claim: the kernels ran in Triton's interpreter")
    elif wrapped:
        parts.append("speed is not a claim: the solution's launches ran ATen's work, no kernel of its own")
    if outside:
        parts.append(
            f"the forward ran the reference's own {', '.join(outside)} outside the solution's kernels"
        )
    withheld_why = SPEED_WITHHELD_INTERPRETER if interpreted else SPEED_WITHHELD_ATEN if wrapped else ""
    return Claims(
        speed=not withheld_why,
        speed_withheld=withheld_why,
        coverage_judged=False,
        reference_ops_outside=outside,
        note="; ".join(parts),
    )


def outside_flag(claims: Claims) -> str | None:
    """The ``reference_ops_outside_kernels`` flag for the verdict's flags, when it applies."""
    if not claims.reference_ops_outside:
        return None
    return (
        f"{REFERENCE_OPS_OUTSIDE}: the forward ran the reference's own {', '.join(claims.reference_ops_outside)} "
        "outside the solution's kernels (on the CPU, where coverage is not judged)"
    )


UNCONFIRMED_NOTE = (
    "withheld: the parent's clock could not confirm the reported windows (work outside them seen once "
    "and not cleared, or calls too short for its back-to-back bound: claims.speed_withheld; the "
    "timing_unconfirmed flag says which); the measured times are under timing"
)


ATEN_NOTE = (
    "withheld: the solution's launches ran ATen's work, no kernel of its own (a wrapper of torch ops: "
    "claims.speed_withheld), so the time is ATen's; the measured times are under timing"
)


NOTES = {
    SPEED_WITHHELD_INTERPRETER: WITHHELD_NOTE,
    SPEED_WITHHELD_UNCONFIRMED: UNCONFIRMED_NOTE,
    SPEED_WITHHELD_ATEN: ATEN_NOTE,
}


def withheld(speedup: Mapping[str, Speedup], why: str = SPEED_WITHHELD_INTERPRETER) -> dict[str, Speedup]:
    """The headline speedups with every figure null and the reason (a ``speed_withheld`` code) in each note."""
    return {name: Speedup(name, None, None, None, NOTES[why]) for name in speedup}


def unconfirmed(claims: Claims) -> Claims:
    """The claims of a timing whose gap check could not be confirmed: no speed claim, whatever the
    device (kernelproof/measure/parent_clock.py)."""
    import dataclasses

    why = "speed is not a claim: the parent's clock could not confirm the reported windows"
    return dataclasses.replace(
        claims,
        speed=False,
        speed_withheld=SPEED_WITHHELD_UNCONFIRMED,
        note="; ".join(x for x in (claims.note, why) if x),
    )


_profiler_ready = threading.Lock()
_profiler_started: list[bool] = []


def start_profiler_here() -> None:
    """Start the process's first profiler session now, in the calling thread, when it is the main one.

    Kineto (torch's profiler library) registers its client in the thread that loads torch, and runs
    that client's init when the process's first profiler session starts. Started first in another
    thread (an evaluation in bench's, kernelbench's or optimize's pool profiles the reference:
    :func:`reference_ops`), it prints ``ERROR: External init callback must run in same thread as
    registerClient`` on the user's stderr and skips the init. An empty session from the main thread
    (where torch is loaded) before any evaluation's thread starts is the init done where Kineto wants
    it: under a millisecond, once a process, and nothing is printed afterwards from any thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _profiler_ready:
        if _profiler_started:
            return
        _profiler_started.append(True)
        from torch.autograd.profiler import profile as cpu_profiler

        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)  # read at the first start: below
        try:
            with cpu_profiler(use_cpu=True):
                pass
        except RuntimeError:  # another profiler active in this process: it has started Kineto already
            pass


def reference_ops(ctx: VariantContext, seed: int) -> frozenset[str] | None:
    """Every ATen op the reference's forward runs, at any depth, on one case of `ctx` (in the parent);
    None when the profiler could not run (another profiler active in this process, say).

    Only the intersection with the candidate's ``aten_outside`` (already reduced to ops that do
    work) is used, so allocation and view ops listed here do no harm."""
    from torch.autograd.profiler import profile as cpu_profiler

    # Kineto's log level, read when the profiler first starts: above its USDT level, so that a timed
    # CPU run does not print "USDT: ... profiler_start/stop" on the user's stderr (a user's own
    # setting is kept).
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
    args = make_inputs(ctx, "normal", seed)
    try:
        with cpu_profiler(use_cpu=True) as prof:
            run_model(ctx.reference, args, ctx.precision, ctx.inplace)
    except torch.OutOfMemoryError:
        raise
    except RuntimeError:  # the profiler's own refusal; a reference that raises was caught by setup
        return None
    return frozenset(str(ev.name) for ev in prof.function_events if str(ev.name).startswith("aten::"))
