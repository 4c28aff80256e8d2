"""Launch accounting: which kernels a call really ran, and how much GPU time is the submission's (E1-E3).

A decoy kernel that is defined but never launched, a try/except that falls back to torch, or a
"custom" kernel that calls cuBLAS all look fine statically. One hidden timed call runs under the
profiler; every device activity it caused is listed with its GPU time and attributed: the
solution's kernels by identity, never by the text of a name (what the parent built for it and the
Triton kernels its code defines: kernelproof/measure/attribution.py), library GEMM/convolution
kernels (cuBLAS, cuDNN, CUTLASS), and everything else (ATen). The profile is the worker's report;
its GPU time must fit the parent's clock (:func:`reconcile`). The share in the submission's
kernels, against the task's kernel policy, decides ``no_custom_kernel`` / ``low_kernel_coverage``.

On the CPU (:func:`account_cpu`) there are no device kernels. The solution's launches are marked
and counted by the worker's harness (kernelproof/worker/launches.py) in two hidden forwards, one
unwatched as a timed call is and one under the CPU profiler. The decision is per forward: a forward
that launched no kernel of the solution's own is ``no_custom_kernel``, as on the GPU, and the ATen
ops the profiled forward ran outside its launches are listed by name, with the reference's own
ops that ran inside a launch (ATen work wherever it runs: such a launch is not the solution's
kernel). Only the presence of a launch is judged there: Triton's interpreter is orders of
magnitude slower than ATen, so a time share would say nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.inputs import dtype_from_name
from kernelproof.measure.attribution import KernelIdentity, identity_of
from kernelproof.measure.coverage import EPILOGUE_INPUT_FRACTION, SET_ASIDE, classify, shares
from kernelproof.verdict import Coverage, Reason, ReasonCode
from kernelproof.verify.case_plan import VariantContext
from kernelproof.wire.protocol import ProtocolError
from kernelproof.wire.replies import reason_of

# Vendor-library kernels (cuBLAS/cuBLASLt, cuDNN, cuFFT, CUTLASS, cuTENSOR) by name. cuDNN may pick
# an FFT algorithm for a convolution (seen on an H200: DSE::regular_fft_*, vector_fft,
# pointwise_mult_and_sum_complex) and wraps its kernels in layout transforms (nchwToNhwc...).
LIBRARY_PATTERN = re.compile(
    r"gemm|gemv|cublas|cutlass|xmma|cudnn|conv|winograd|implicit_convolve|sm\d+_|nvjet|splitKreduce"
    r"|fft|DSE::|pointwise_mult_and_sum_complex|nchwToNhwc|nhwcToNchw|cutensor",
    re.IGNORECASE,
)
TOP_KERNELS = 8  # kernels listed in the verdict
CPU_NOTE = "on the CPU only the presence of a launch is judged (the Triton interpreter makes time shares meaningless)"


def origin_of(name: str, own: KernelIdentity | Iterable[str]) -> str:
    """``solution`` for a kernel the solution built or JIT-compiled (by identity, the whole qualified
    name: kernelproof/measure/attribution.py), ``library`` for a vendor library's, else ``aten``."""
    if identity_of(own).is_own(name):
        return "solution"
    if LIBRARY_PATTERN.search(name.split("(")[0]):
        return "library"
    return "aten"


def account(
    worker: WorkerProcess,
    ctx: VariantContext,
    seed: int,
    own: KernelIdentity | Iterable[str],
    policy: str,
    timeout_s: float,
    floor_us: float | None = None,
) -> Coverage:
    """One hidden call under the profiler: its kernels, and the submission's share of the work
    above the launch floor (`floor_us`, measured apart: kernelproof/measure/floor.py), with data
    movement and a small ATen epilogue set aside (kernelproof/measure/coverage.py)."""
    if ctx.device.type != "cuda":
        return Coverage(None, (), policy, "launch accounting needs CUDA; skipped on the CPU")
    reply, why = _profile(worker, ctx, seed, timeout_s)
    if why is not None:
        return Coverage(None, (), policy, f"profiling failed ({why.code.value}): {why.message}")
    try:
        identity = identity_of(own)
        parsed = [_row(r, identity) for r in reply.get("kernels", [])]
    except (TypeError, ValueError):
        worker.kill()
        raise WorkerDied("crash", "the candidate's worker sent a malformed profile reply") from None
    small = input_elements(ctx) // EPILOGUE_INPUT_FRACTION
    rows = classify(parsed, movement_budget(ctx), floor_us, small, element_bytes(ctx))
    total = sum(ms for _, _, ms in rows)
    share = shares(rows, floor_us)
    other = "library-ok" if policy == "strict" else "strict"
    merged: dict[tuple[str, str], float] = {}
    for n, o, ms in rows:
        merged[(n[:120], o)] = merged.get((n[:120], o), 0.0) + ms
    top = sorted(((n, o, ms) for (n, o), ms in merged.items()), key=lambda r: -r[2])[:TOP_KERNELS]
    note = f"{len(rows)} device activities, {total:.3f} ms GPU time"
    if identity.shadowed():
        note += "; never the solution's, as a baseline's profile of the task shows them too: " + ", ".join(
            identity.shadowed()[:TOP_KERNELS]
        )
    if floor_us:
        note += f"; each counted above the launch floor of {floor_us:.2f} us"
    aside = {o: sum(ms for _, k, ms in rows if k == o) for o in SET_ASIDE}
    if any(aside.values()):
        said = ", ".join(f"{o} {ms * 1e3:.1f} us" for o, ms in aside.items() if ms)
        note += f"; set aside (neither the solution's work nor library work): {said}"
    return Coverage(
        share.above_floor[policy] if rows else 0.0,
        tuple(top),
        policy,
        note,
        custom_fraction_raw=share.raw[policy] if rows else 0.0,
        floor_us=floor_us,
        other_policy_fraction=share.above_floor[other] if rows else 0.0,
    )


def _tensor_inputs(ctx: VariantContext) -> list[tuple[int, str]]:
    """(elements, dtype name) of each tensor input of the task."""
    slots = getattr(ctx, "slots", None) or []
    return [(math.prod(int(d) for d in s.shape), s.dtype) for s in slots if s.kind in ("float", "fixed")]


def input_elements(ctx: VariantContext) -> int:
    """Elements of the task's tensor inputs in all (what an epilogue's op is small against)."""
    return sum(n for n, _ in _tensor_inputs(ctx))


def movement_budget(ctx: VariantContext) -> int:
    """Bytes of device-to-device copies and memsets set aside: the outputs' size, plus the inputs'
    (a CUDA-graph solution copies each call's inputs into its captured buffers and clones its
    output). Copies cannot compute, so no decoy gains own work from this."""
    outputs = sum(getattr(ctx, "output_nbytes", None) or [])
    return outputs + sum(n * dtype_from_name(dt).itemsize for n, dt in _tensor_inputs(ctx))


def element_bytes(ctx: VariantContext) -> int:
    """The smallest element size of the task's tensor inputs (0 without any): a copy whose bytes the
    profiler did not record is sized as its op's largest input in these (never larger than it is)."""
    sizes = [dtype_from_name(dt).itemsize for _, dt in _tensor_inputs(ctx)]
    return min(sizes) if sizes else 0


def gpu_ms(cov: Coverage) -> float:
    """The GPU time a coverage record's call took (from its note; 0 when it was not profiled)."""
    m = re.search(r"([0-9.]+) ms GPU time", cov.note)
    return float(m.group(1)) if m else 0.0


def baseline_kernels(
    worker: WorkerProcess, ctx: VariantContext, seed: int, timeout_s: float
) -> tuple[str, ...]:
    """The device kernels a baseline's worker (eager, torch.compile: the task's own reference, in a
    worker of the parent's) ran for one call of `ctx`, under the profiler: names that are never the
    solution's (kernelproof/measure/attribution.py). Empty when it could not be profiled."""
    try:
        reply, why = _profile(worker, ctx, seed, timeout_s)
    except WorkerDied:
        return ()
    if why is not None:
        return ()
    return tuple(str(r[0]) for r in reply.get("kernels", []) if isinstance(r, (list, tuple)) and r)


# A profile's GPU time against the parent's clock: a call's kernels cannot take longer on the device
# than the call took on the parent's clock, beyond streams running side by side (up to this many)
# and the profiler's own cost, added once.
RECONCILE_STREAMS = 4
RECONCILE_SLACK_MS = 0.25


def reconcile(cov: Coverage, call_ms: float, variant: str) -> Reason | None:
    """``timing_tamper`` when the profiled call's GPU time cannot be one call's on the parent's clock
    (`call_ms`: the slowest call the parent timed for this shape): the profile is the worker's
    report, and one that claims more device time than the call had is forged (I10)."""
    total = gpu_ms(cov)
    bound = RECONCILE_STREAMS * call_ms + RECONCILE_SLACK_MS
    if cov.custom_fraction is None or call_ms <= 0 or total <= bound:
        return None
    return Reason(
        ReasonCode.TIMING_TAMPER,
        f"the profile of a call of shape {variant!r} reports {total:.3f} ms of GPU time, where the parent's "
        f"clock timed no call of it above {call_ms:.3f} ms (bound {bound:.3f} ms): the worker's profile "
        "does not reconcile with the parent's own measurements",
    )


def _row(row: list, own: KernelIdentity) -> tuple[str, str, float, int, int]:
    """One profiled activity, [name, stream, ms(, bytes(, op input elements))], attributed."""
    name, ms = str(row[0]), float(row[2])
    nbytes = int(row[3]) if len(row) > 3 else -1
    elements = int(row[4]) if len(row) > 4 else -1
    return name, origin_of(name, own), ms, nbytes, elements


def account_cpu(
    worker: WorkerProcess,
    ctx: VariantContext,
    seed: int,
    own: KernelIdentity | Iterable[str],
    policy: str,
    timeout_s: float,
    reference: frozenset[str] | None = None,
) -> tuple[Coverage, Reason | None]:
    """Two hidden forwards with the solution's launches counted, one under the CPU profiler: the
    coverage record, and the reason the verdict fails (``no_custom_kernel`` when either forward
    launched no kernel of the solution's own, or why they failed: they are hidden timed calls).

    ATen work is ATen work wherever it runs: the reference's own ops (`reference`, profiled in the
    parent) that ran inside a launch are listed with those outside it, and a launch that ran them
    (a ``load_inline`` wrapper of ``torch::gelu``, a declared operator whose implementation is a
    Python ``torch.library`` impl calling ``F.gelu``) is not a launch of the solution's kernels
    (:func:`aten_launches`). An extension launch is the solution's only where the parent built a
    binary for it (`own`: kernelproof/measure/attribution.py)."""
    identity = identity_of(own)
    reply, why = _profile(worker, ctx, seed, timeout_s)
    if why is not None:
        # Unlike the GPU's, these are forwards the verdict depends on: a solution must not escape
        # the count by failing only here (raising while a profiler records, say).
        return Coverage(None, (), policy, f"profiling failed ({why.code.value}): {why.message}"), why
    if reply.get("unmarked"):
        note = f"launches could not be marked on the CPU ({reply['unmarked']}); nothing was decided from the profile"
        return Coverage(None, (), policy, note), None
    try:
        launches = _launches(reply.get("launches", []))
        unwatched = _launches(reply.get("unwatched", []))
        outside = tuple(str(op) for op, _calls in reply.get("aten_outside", []))
        inside = [(str(label), str(op), int(n)) for label, op, _calls, n in reply.get("aten_in_launches", [])]
    except (TypeError, ValueError):
        worker.kill()
        raise WorkerDied("crash", "the candidate's worker sent a malformed profile reply") from None
    wrappers = aten_launches(inside, reference, input_elements(ctx) // EPILOGUE_INPUT_FRACTION)
    if identity.aten_imports:  # its binary calls ATen's kernels where the profiler cannot see them
        wrappers |= {name for name, _returned in launches if name.startswith("extension:")}
    in_launches = [op for label, op, _n in inside if label in wrappers or op in (reference or ())]
    aten = tuple(dict.fromkeys((*outside, *in_launches)))

    def is_mine(name: str) -> bool:
        return launch_is_own(name, identity) and name not in wrappers

    mine = [name for name, returned in launches if returned and is_mine(name)]
    mine_unwatched = [name for name, returned in unwatched if returned and is_mine(name)]
    ran_aten = sum(1 for name, returned in launches if returned and name in wrappers)
    cov = Coverage(
        None,
        (),
        policy,
        cpu_note(launches, mine, aten, sorted(wrappers), sorted(identity.aten_imports)),
        custom_launches=min(len(mine), len(mine_unwatched)),
        aten_outside=aten,
        interpreted_launches=sum(1 for name, returned in launches if returned and name.startswith("triton:")),
        aten_launches=ran_aten,
    )
    if not mine and ran_aten:
        return cov, None  # ATen work behind a launch: judged as plain PyTorch is (evaluate/timing.py)
    return cov, cpu_reason(launches, mine, mine_unwatched, aten)


# ATen ops that only allocate, fill or copy: an extension's bookkeeping around its own loops
# (``x.contiguous()``, an output filled first), never its computation, unless the reference's own
# ops are these (a copy task: then they are listed as the reference's). The ops that do no work at
# all (views, empty) are never reported (kernelproof/worker/profiling.py, NO_WORK_OPS).
BOOKKEEPING_OPS = frozenset(
    {
        "aten::clone",
        "aten::copy_",
        "aten::_copy_from",
        "aten::_copy_from_and_resize",
        "aten::_to_copy",
        "aten::resize_as_",
        "aten::empty_permuted",
        "aten::scalar_tensor",
        "aten::zero_",
        "aten::fill_",
        "aten::zeros",
        "aten::zeros_like",
        "aten::new_zeros",
        "aten::ones",
        "aten::ones_like",
        "aten::new_ones",
        "aten::full",
        "aten::full_like",
        "aten::new_full",
        "aten::cat",
        "aten::stack",
        "aten::repeat",
        "aten::constant_pad_nd",
        "aten::pad",
    }
)


def aten_launches(
    inside: list[tuple[str, str, int]], reference: frozenset[str] | None, small_elements: int
) -> frozenset[str]:
    """The extension launches (``extension:<name>``) of the profiled forward whose work was ATen's:
    one that ran one of the reference's own ops, or another ATen op that computes (all but
    :data:`BOOKKEEPING_OPS`) over the task's data: more than `small_elements` (1/16 of the task's
    inputs' elements, as on the GPU: kernelproof/measure/coverage.py), its calls' inputs summed
    (a wrapper that cuts the input into chunks works over all of it). ``return x * (x >
    0);`` in a wrapper is ATen's relu all the same; a kernel of its own that sums its partial
    results with ``aten::sum`` stays the solution's. A Triton launch's ATen ops are its
    interpreter's argument copies, never listed (kernelproof/worker/profiling.py)."""
    ops = reference or frozenset()
    return frozenset(
        label
        for label, op, largest in inside
        if label.startswith("extension:")
        and (op in ops or (op not in BOOKKEEPING_OPS and largest > small_elements))
    )


def _launches(rows: list) -> list[tuple[str, bool]]:
    """The worker's launch list, [kind:name, returned] per launch, as typed pairs."""
    return [(str(name), bool(returned)) for name, returned in rows]


def cpu_reason(
    launches: list[tuple[str, bool]], mine: list[str], mine_unwatched: list[str], aten: tuple[str, ...]
) -> Reason | None:
    """``no_custom_kernel`` for a forward that launched none of the solution's kernels, naming what
    it ran instead; None when both did."""
    if not mine:
        ran = ", ".join(aten[:8]) or "no ATen op that computes"
        failed = sorted({n for n, returned in launches if not returned})
        tried = f" (launched and raised: {', '.join(failed)})" if failed else ""
        return Reason(
            ReasonCode.NO_CUSTOM_KERNEL,
            "the profiled forward launched no kernel the solution defines (on the CPU only the presence of a "
            f"launch is judged); it ran {ran}{tried}: a fallback to PyTorch, or a launch that failed",
        )
    if not mine_unwatched:
        return Reason(
            ReasonCode.NO_CUSTOM_KERNEL,
            "a forward run without the profiler launched no kernel the solution defines, while the profiled "
            f"one launched {', '.join(sorted(set(mine)))}: the solution's kernels must run on every forward, "
            "not only while a profiler records",
        )
    return None


def launch_is_own(label: str, own: KernelIdentity | Iterable[str]) -> bool:
    """A marked launch ``kind:name`` of the solution's own kernels: a Triton kernel its code defines,
    or a function of an extension the parent built for it (load_inline / load: the worker's report
    of an extension launch counts only where a binary of the solution's own exists)."""
    identity = identity_of(own)
    kind, _, name = label.partition(":")
    if kind == "extension":
        return identity.binaries > 0
    return kind == "triton" and name in identity.jitted and name in identity.own


def cpu_note(
    launches: list[tuple[str, bool]],
    mine: list[str],
    aten: tuple[str, ...],
    wrappers: list[str] = (),
    imports: list[str] = (),
) -> str:
    """What the CPU profile saw, in one line of the coverage note."""
    counted: dict[str, int] = {}
    for name in mine:
        counted[name] = counted.get(name, 0) + 1
    seen = ", ".join(f"{n} x{k}" if k > 1 else n for n, k in counted.items()) or "none"
    parts = [f"{CPU_NOTE}; launches of the solution's kernels: {seen}"]
    others = sorted({n for n, returned in launches if not returned or n not in counted})
    if others:
        parts.append(f"other launches (raised, or not the solution's): {', '.join(others)}")
    if wrappers:
        parts.append(f"launches that ran ATen's work (ATen ops inside them): {', '.join(wrappers)}")
    if imports:
        parts.append(
            "its binary calls ATen's kernels without the dispatcher, where no profiler sees them, or "
            f"looks functions up at run time: {', '.join(imports[:6])}"
        )
    parts.append(f"ATen ops outside them: {', '.join(aten) if aten else 'none'}")
    return "; ".join(parts)


def _profile(
    worker: WorkerProcess, ctx: VariantContext, seed: int, timeout_s: float
) -> tuple[dict, Reason | None]:
    """One hidden call under the profiler: the worker's reply, and why it failed (None when it ran).
    A failure code kernelproof does not know means the worker is broken: it is killed."""
    spec, fixed_tensors = ctx.input_spec()
    reply, _ = worker.request({"op": "profile", **spec, "seed": seed}, fixed_tensors, timeout_s)
    if reply.get("ok"):
        return reply, None
    try:
        return reply, reason_of(reply)
    except ProtocolError as exc:
        worker.kill()
        raise WorkerDied("crash", f"the candidate: {exc}") from None
