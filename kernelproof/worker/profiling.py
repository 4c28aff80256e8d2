"""One call under the profiler: every device activity it caused, for launch accounting (E1-E3).

A decoy kernel that is never launched, a fallback to torch or a library call inside a "custom"
kernel all look fine statically; the parent attributes each activity listed here by name
(kernelproof.measure.accounting).

On the CPU there are no device activities. The solution's launches are marked and counted instead
(:mod:`kernelproof.worker.launches`) over two forwards, the second under the CPU profiler: the
reply lists the launches the harness counted in each and the ATen ops the profiled one ran outside
them. The parent judges only whether each forward launched a kernel of the solution's own; time
shares mean nothing under an interpreter that is orders of magnitude slower than ATen.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.inputs import timed_inputs
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker import calls, checks
from kernelproof.worker.checks import hooks
from kernelproof.worker.clock import kernels_of_call
from kernelproof.worker.launches import EXTENSION, PREFIX
from kernelproof.worker.state import WorkerState
from kernelproof.worker.timed_calls import input_spec

# ATen ops that allocate, reshape or alias without computing anything: left out of the list of
# ops a call ran outside its launches (an honest Triton forward allocates its output with
# torch.empty_like). An op nested inside one of them is still seen (reshape's copy of a
# non-contiguous tensor shows as aten::clone).
NO_WORK_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::resize_",
        "aten::set_",
        "aten::lift_fresh",
        "aten::detach",
        "aten::alias",
        "aten::view",
        "aten::view_as",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::_unsafe_view",
        "aten::flatten",
        "aten::unflatten",
        "aten::as_strided",
        "aten::movedim",
        "aten::moveaxis",
        "aten::swapaxes",
        "aten::swapdims",
        "aten::broadcast_to",
        "aten::split",
        "aten::split_with_sizes",
        "aten::chunk",
        "aten::unbind",
        "aten::diagonal",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::expand",
        "aten::expand_as",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::contiguous",
        "aten::unfold",
        "aten::tensor_split",
        "aten::unsafe_split",
        "aten::unsafe_chunk",
        "aten::conj",
        "aten::_conj",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::type_as",
        "aten::to",
        "aten::item",
        "aten::_local_scalar_dense",
    }
)


def profile(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """The reply to a ``profile`` request: (name, stream, gpu_ms) of every device activity of one
    call; on the CPU, the call's launches and the ATen ops it ran outside them."""
    if state.device.type != "cuda":
        return profile_cpu(state, h, tensors)
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    slots, fixed, scalars = input_spec(h, tensors)
    with hooks.quiet():
        args = timed_inputs(slots, fixed, scalars, int(h["seed"]), state.device)
    torch.cuda.synchronize(state.device)
    try:
        # CPU ops with their input shapes too: the parent weighs an ATen kernel over a small tensor
        # (an epilogue over partial sums) apart from one over the inputs (measure/coverage.py).
        with profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            calls.call(state, args)
            torch.cuda.synchronize(state.device)
    except BaseException as exc:  # noqa: BLE001
        return calls.call_failure(exc, "the profiled call", state.solution_path), []
    found = checks.harness_intact(state)
    if found is not None:
        return found, []
    elements = _op_elements(prof)
    rows = [[*row, elements.get(row[0], -1)] for row in kernels_of_call(prof)]
    return {"ok": True, "kernels": rows}, []


UNKNOWN_SIZE = 1 << 62


def _op_elements(prof: Any) -> dict[str, int]:
    """Per device-kernel name, the largest input (in elements) of the ATen op that launched it, the
    largest over every launch of that name; a kernel no op launched (Triton's) is absent."""
    out: dict[str, int] = {}
    try:
        events = prof.events()
    except Exception:  # noqa: BLE001 - no op tree: nothing is known, every kernel counts
        return out
    for ev in events:
        kernels = getattr(ev, "kernels", None) or []
        if not kernels:
            continue
        largest = _largest_input(ev)
        for k in kernels:
            out[k.name] = max(out.get(k.name, -1), largest)
    return out


def _largest_input(ev: Any) -> int:
    """The largest tensor input of a profiled op, in elements (shapes recorded); a list of tensors
    (cat, stack, einsum's operands) is not known to be small: :data:`UNKNOWN_SIZE` (the profiler
    records its shape as ``[]``; its type says it is a list, where the profiler gives types)."""
    if any("List" in str(t) for t in getattr(ev, "input_dtypes", None) or []):
        return UNKNOWN_SIZE
    largest = 0
    for shape in getattr(ev, "input_shapes", None) or []:
        if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) for d in shape):
            return UNKNOWN_SIZE
        n = 1
        for d in shape:
            n *= d
        largest = max(largest, n if shape else 1)
    return largest


def profile_cpu(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """Two forwards with the solution's launches counted, the second under the CPU profiler.

    The first runs unwatched, as a timed call does: a solution that launches its kernel only while
    a profiler records (``torch.autograd.profiler._is_profiler_enabled``) launches none there. On
    the CPU the timed calls run without a profiler, so that is the forward a fallback would take.
    Each forward gets inputs of its own (I4).

    The reply: ``launches`` [(kind:name, returned)] of the profiled forward and ``unwatched``, the
    same for the first, as the harness counted them; ``aten_outside`` [(op, calls)] outside every
    launch range of the profiled forward; or ``unmarked`` (why launches could not be marked:
    nothing is decided then). A launch range the harness did not open is forbidden_construct.
    """
    marks = state.launches
    if marks is None or marks.missing:
        why = marks.missing if marks is not None else "the worker did not wrap the launch paths"
        return {"ok": True, "kernels": [], "unmarked": why}, []
    # The autograd profiler, not torch.profiler.profile: the latter's start imports torch._inductor
    # (5-7 s on a loaded two-core machine) only to read a CUDA-graph setting.
    from torch.autograd.profiler import profile as cpu_profiler

    slots, fixed, scalars = input_spec(h, tensors)
    seed = int(h["seed"])
    with hooks.quiet():
        plain_args = timed_inputs(slots, fixed, scalars, seed, state.device)
        args = timed_inputs(slots, fixed, scalars, seed + 1, state.device)
    what = "the forward counted without the profiler"
    try:
        marks.start()
        calls.call(state, plain_args)
        unwatched = marks.stop()
        what = "the profiled call"
        marks.start()
        with cpu_profiler(use_cpu=True, use_kineto=True, record_shapes=True) as prof:
            calls.call(state, args)
    except BaseException as exc:  # noqa: BLE001
        marks.stop()
        return calls.call_failure(exc, what, state.solution_path), []
    launched = marks.stop()
    found = checks.harness_intact(state)
    if found is not None:
        return found, []
    with hooks.quiet():
        ranges, outside = _split(prof.function_events)
        inside = _inside_extensions(prof.function_events)
    if ranges != len(launched):
        return failure(
            ReasonCode.FORBIDDEN_CONSTRUCT,
            f"the profiled call shows {ranges} launch ranges named {PREFIX!r} where the harness opened "
            f"{len(launched)}: a range of that name is the harness's own",
        ), []
    reply = {
        "ok": True,
        "kernels": [],
        "launches": launched,
        "unwatched": unwatched,
        "aten_outside": outside,
        "aten_in_launches": inside,
    }
    return reply, []


def _split(events: Any) -> tuple[int, list[tuple[str, int]]]:
    """(launch ranges, [(ATen op, calls)] outside them): the outermost ops that do work, in order.

    An op inside a launch range is the launch's (the interpreter's argument copies, or what a
    compiled extension function calls); an op nested in a listed op is part of it (aten::matmul's
    aten::mm); an op nested in one of :data:`NO_WORK_OPS` is listed in its own right.
    """
    ranges = 0
    counts: dict[str, int] = {}
    for ev in events:
        name = str(ev.name)
        if name.startswith(PREFIX):
            ranges += 1
        elif name.startswith("aten::") and name not in NO_WORK_OPS and _enclosing(ev) is None:
            counts[name] = counts.get(name, 0) + 1
    return ranges, list(counts.items())


def _inside_extensions(events: Any) -> list[tuple[str, str, int, int]]:
    """[(launch label, ATen op, calls, elements)]: the outermost ops that do work inside each
    extension launch's range (``extension:<name>``), with the elements they worked over: each
    call's largest input (or that of any op it ran), summed over its calls, so that the task's data
    cut into small pieces counts whole. The parent counts an op over the task's data as ATen work, and one over a small
    tensor (the sum of a kernel's partial results) as the launch's epilogue
    (kernelproof.measure.accounting). A Triton launch's ops are its interpreter's argument copies
    and are left out: its kernel's body cannot call ATen."""
    counts: dict[tuple[str, str], list[int]] = {}
    for ev in events:
        name = str(ev.name)
        if not name.startswith("aten::") or name in NO_WORK_OPS:
            continue
        around = _enclosing(ev)
        if around is not None and around.startswith(PREFIX + EXTENSION + ":"):
            entry = counts.setdefault((around.removeprefix(PREFIX), name), [0, 0])
            entry[0] += 1
            entry[1] = min(UNKNOWN_SIZE, entry[1] + _largest_within(ev))
    return [(label, op, n, elements) for (label, op), (n, elements) in counts.items()]


def _largest_within(ev: Any, depth: int = 0) -> int:
    """The largest tensor input of an op and of every op it ran: ``aten::einsum``'s arguments are
    recorded as a list its shapes do not show, its ``aten::bmm``'s are not."""
    largest = _largest_input(ev)
    if depth < 32:
        for child in getattr(ev, "cpu_children", None) or []:
            largest = max(largest, _largest_within(child, depth + 1))
    return largest


def _enclosing(ev: Any) -> str | None:
    """The nearest enclosing launch range or listed op of a profiler event; None at the top."""
    parent = ev.cpu_parent
    while parent is not None:
        name = str(parent.name)
        if name.startswith(PREFIX) or (name.startswith("aten::") and name not in NO_WORK_OPS):
            return name
        parent = parent.cpu_parent
    return None
