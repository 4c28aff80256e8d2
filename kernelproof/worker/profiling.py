"""One call under the profiler: every device activity it caused, for launch accounting (E1-E3).

A decoy kernel that is never launched, a fallback to torch or a library call inside a "custom"
kernel all look fine statically; the parent attributes each activity listed here by name
(kernelproof.measure.accounting).
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.inputs import timed_inputs
from kernelproof.worker import calls, checks
from kernelproof.worker.checks import hooks
from kernelproof.worker.clock import kernels_of_call
from kernelproof.worker.state import WorkerState
from kernelproof.worker.timing import input_spec


def profile(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """The reply to a ``profile`` request: (name, stream, gpu_ms) of every device activity of one call."""
    if state.device.type != "cuda":
        return {"ok": True, "kernels": [], "skipped": "launch accounting needs CUDA"}, []
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    slots, fixed, scalars = input_spec(h, tensors)
    with hooks.quiet():
        args = timed_inputs(slots, fixed, scalars, int(h["seed"]), state.device)
    torch.cuda.synchronize(state.device)
    try:
        with profiler(activities=[ProfilerActivity.CUDA]) as prof:
            calls.call(state, args)
            torch.cuda.synchronize(state.device)
    except BaseException as exc:  # noqa: BLE001
        return calls.call_failure(exc, "the profiled call", state.solution_path), []
    found = checks.harness_intact(state)
    if found is not None:
        return found, []
    return {"ok": True, "kernels": kernels_of_call(prof)}, []
