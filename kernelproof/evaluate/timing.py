"""Step 4, timing: interleaved cold (and steady) rounds against baseline workers, physics, accounting.

Runs only after every case passed. Each timed shape loads the candidate and each baseline (a clean
persistent worker per task and baseline, never the candidate's process) beside the other
evaluations' untimed work, then, with the GPU to this evaluation alone, alternates them in rounds
(kernelproof/measure/session.py). The first timed shape also places the candidate on the roofline
(a time below the physical floor is impossible) and accounts for its kernels' share of GPU time
under the task's kernel policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace

import torch

from kernelproof import numeric_flags
from kernelproof.evaluate.device_turns import DeviceTurns
from kernelproof.evaluate.step_records import Checked, Setup, Timed
from kernelproof.evaluate.worker_requests import device_name, load_candidate, load_program
from kernelproof.evaluate.workers import WorkerSource
from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.measure import roofline as physics
from kernelproof.measure import stats, steady_batch
from kernelproof.measure.accounting import account, account_cpu, baseline_kernels, gpu_ms, reconcile
from kernelproof.measure.attribution import KernelIdentity, built_names
from kernelproof.measure.claims import (
    cpu_claims,
    gpu_claims,
    outside_flag,
    reference_ops,
    unconfirmed,
    withheld,
)
from kernelproof.measure.coverage import COVERAGE_MIN
from kernelproof.measure.floor import for_device as launch_floor
from kernelproof.measure.parent_clock import UNCONFIRMED
from kernelproof.measure.session import Program, check_untimed_calls, time_steady, time_variant
from kernelproof.options import STEADY_ONLY, EvalOptions
from kernelproof.task import variant_source
from kernelproof.verdict import (
    SPEED_WITHHELD_INTERPRETER,
    Claims,
    Coverage,
    Reason,
    ReasonCode,
    Roofline,
    ShapeTiming,
    Speedup,
    Timing,
)
from kernelproof.verify import steps
from kernelproof.verify.case_plan import VariantContext, make_inputs, reference_and_oracle
from kernelproof.verify.oracle_compare import Tolerance
from kernelproof.wire.replies import reason_of

NOT_TIMED_NOTE = (
    "not timed: the candidate's kernels ran in Triton's interpreter, whose speed says nothing about a "
    "kernel (--time-interpreted times it anyway)"
)
NOT_TIMED_FLAG = (
    "not_timed: the counted launches ran in Triton's interpreter, so speed is no claim here and the "
    "candidate was not timed (--time-interpreted times it, withheld all the same)"
)


def time_candidate(
    setup: Setup,
    checked: Checked,
    worker: WorkerProcess,
    staged: str,
    options: EvalOptions,
    device: str,
    workers: WorkerSource,
    turns: DeviceTurns,
    grow: Callable[[int], None],
) -> Timed:
    """Every timed shape of the task, then the speedups over them; the first failure ends it.

    Each shape's loads (the candidate's program, the baselines' workers and programs) take a shared
    turn on the device; what measures takes it alone (evaluate/device_turns.py). `grow` raises the
    memory reservation outside any turn: to the timed rounds' room (``footprint_bytes``) before the
    first load; for a GPU solution with no kernel of its own, first to one call's (``profile_bytes``),
    so the profiled call that refuses it never waits for a batch's room in every timed worker."""
    rng = random.Random(setup.timing_seed)
    shapes: list[ShapeTiming] = []
    reasons: list[Reason] = []
    flags: list[str] = []
    roof = coverage = None
    backend = setup.solution.file.triage.backend
    policy = options.policy or setup.task.meta.policy
    claims = gpu_claims() if device.startswith("cuda") else cpu_claims(backend, None, frozenset())
    identity = kernel_identity(setup, worker)  # builds are over: none is served once timing starts
    screened = device.startswith("cuda") and not identity.own and options.refuse_plain_first  # see options
    grow((setup.profile_bytes if screened else setup.footprint_bytes) + _unforeseen(setup, worker))
    per_shape: list[tuple[str, Coverage]] = []  # (variant, coverage) of each timed shape on a GPU
    telemetry = _gpu_telemetry(device, turns)
    for v in setup.timed:
        ctx = setup.contexts[v]
        tol = checked.tolerances.get(v)
        if tol is None:
            continue
        with _leases(turns) as leases:  # the baselines this shape leases, released after its timing
            limit = options.step_limit("timing")
            with turns.shared(lend=worker), steps.step("timing"), steps.step("load"):
                reply = load_candidate(worker, ctx, staged, setup.task.path, options, let_go=True)
            if not reply.get("ok"):
                return Timed(None, reasons=(reason_of(reply),), flags=tuple(flags))
            follow = _followed_setting(ctx, reply, flags)
            if not device.startswith("cuda") and coverage is None:
                with turns.alone(), steps.step("timing"):
                    coverage, claims, untimed = _cpu_accounting(
                        worker, ctx, rng, identity, policy, limit, tol, backend, options, flags, reasons
                    )
                if untimed is not None:
                    return untimed
            if screened:
                with turns.shared(lend=worker), steps.step("timing"), steps.step("profile_first"):
                    refused = _no_kernel_of_its_own(worker, ctx, rng, identity, policy, limit, device, flags)
                if refused is not None:
                    return refused
            grow(setup.footprint_bytes + _unforeseen(setup, worker))  # (held already, unless screened)
            # the baselines' workers taken (or started) and their programs loaded
            with turns.shared(), steps.step("timing"), steps.step("baselines"):
                baselines = _baselines(setup, ctx, v, options, device, workers, flags, follow, leases)
            programs = [Program("candidate", worker)] + baselines
            with turns.alone(), steps.step("timing"):
                timing, found = time_variant(
                    ctx, programs, options.timing, rng, tol, limit, flags, telemetry, claims.speed
                )
                reasons += [_named(r, limit) for r in found]
                if timing is None:
                    return Timed(None, reasons=tuple(reasons), flags=tuple(flags))
                shapes.append(timing)
                if options.steady:
                    with steps.step("steady"):
                        steady, found = _steady(ctx, v, programs, timing, rng, tol, options, flags)
                    reasons += found
                    shapes += steady
                if roof is None:
                    roof, floor_reason = _place(setup, ctx, timing, device)
                    reasons += [floor_reason] if floor_reason else []
                if device.startswith("cuda"):  # every timed shape profiled; the largest decides (below)
                    with steps.step("profile"):
                        identity, cov, tamper = _gpu_coverage(
                            worker, ctx, v, baselines, timing, rng, identity, policy, limit, device, flags
                        )
                    reasons += [tamper] if tamper else []
                    per_shape.append((v, cov))
    flags = [with_floor(f, roof) for f in flags]
    if per_shape:
        coverage, reason = _deciding_coverage(per_shape)
        reasons += [reason] if reason else []
    speedup = _headline_speedups(shapes, options)
    clock_unconfirmed = any(f.startswith(f"{UNCONFIRMED}:") for f in flags)
    if claims.speed and clock_unconfirmed:  # (an interpreter's reason, already withholding, stays)
        claims = unconfirmed(claims)
    return Timed(
        Timing("cold", device, tuple(shapes)),
        speedup if claims.speed else withheld(speedup, claims.speed_withheld),
        roof,
        coverage,
        tuple(reasons),
        tuple(flags),
        claims,
    )


def _unforeseen(setup: Setup, worker: WorkerProcess) -> int:
    """The parent's handoff buffers beyond what setup counted (``handoff_bytes``): held until the
    worker exits, beside the timed rounds, where no measure of torch's allocator sees them."""
    return max(0, worker.handoff_bytes() - setup.handoff_bytes)


@contextmanager
def _leases(turns: DeviceTurns) -> Iterator[ExitStack]:
    """The baseline workers a shape leases, given back after its timing in a shared turn: a
    baseline that rests (lets go of its batch and its allocator's cache) or closes frees GPU
    memory, which must not happen inside another evaluation's timed window."""
    stack = ExitStack()
    try:
        yield stack
    finally:
        with turns.shared():
            stack.close()


def _gpu_telemetry(device: str, turns: DeviceTurns):
    """The GPU's clocks over the rounds (None on the CPU), and the device's launch floor measured.

    The floor is measured once per process, in one of its own (seconds: torch's import, a context,
    the profiler): in a shared turn, beside the others' untimed work, not in the stretch they all
    wait on. A neighbour's work can only lengthen some of its 200 one-block kernels, and their
    minimum is the floor."""
    if not device.startswith("cuda"):
        return None
    from kernelproof.measure.telemetry import Telemetry

    with turns.shared(), steps.step("timing"), steps.step("launch_floor"):
        launch_floor(device)
    return Telemetry(torch.device(device).index or 0)


def _followed_setting(ctx: VariantContext, reply: dict, flags: list[str]) -> dict[str, bool]:
    """The cuDNN benchmark mode the solution set, which the baselines then run with (flagged once)."""
    follow = numeric_flags.baseline_setting(
        numeric_flags.neutral_settings(ctx.precision, dict(reply.get("flags") or {}))
    )
    if follow and not any(f.startswith("numeric_neutral_setting: the baselines") for f in flags):
        flags.append(
            "numeric_neutral_setting: the baselines ran with torch.backends.cudnn.benchmark="
            f"{follow['cudnn.benchmark']}, as the solution set it"
        )
    return follow


def _cpu_accounting(
    worker: WorkerProcess,
    ctx: VariantContext,
    rng: random.Random,
    identity: KernelIdentity,
    policy: str,
    limit: float,
    tol: Tolerance,
    backend: str,
    options: EvalOptions,
    flags: list[str],
    reasons: list[Reason],
) -> tuple[Coverage, Claims, Timed | None]:
    """On the CPU, the candidate's launches counted before any timing (measure/accounting.py): the
    count decides whether speed is a claim here, and whether the candidate is timed at all (a
    Timed: it is not). Its flags and reasons are added to `flags` and `reasons`."""
    with steps.step("accounting"):
        reference = reference_ops(ctx, rng.getrandbits(62))
        coverage, reason = account_cpu(worker, ctx, rng.getrandbits(62), identity, policy, limit, reference)
    reason = _cpu_judged(reason, backend)
    claims = cpu_claims(backend, coverage, reference)
    flags += [f for f in (outside_flag(claims), aten_launch_flag(coverage)) if f]
    reasons += [reason] if reason else []
    if reason is None and untimed_on_cpu(claims, options):
        found = check_untimed_calls(ctx, worker, rng, tol, limit)
        reasons += [_named(found, limit)] if found else []
    if reasons or untimed_on_cpu(claims, options):
        return coverage, claims, _untimed(options, coverage, reasons, flags, claims)
    return coverage, claims, None


def _steady(
    ctx: VariantContext,
    v: str,
    programs: list[Program],
    timing: ShapeTiming,
    rng: random.Random,
    tol: Tolerance,
    options: EvalOptions,
    flags: list[str],
) -> tuple[list[ShapeTiming], list[Reason]]:
    """The steady regime of one shape (back-to-back calls), or the flag that says why it was not measured."""
    kinds = {slot.index: slot.kind for slot in ctx.slots}
    if any(kinds.get(i) != "float" for i in ctx.inplace):
        # A back-to-back batch draws each call's float inputs anew; its other inputs are one
        # copy shared by every call, where updates in place would compound.
        flags.append(
            f"steady regime of {v!r} not measured: the task updates in place an input that "
            "back-to-back calls share, so their updates would compound"
        )
        return [], []
    if steady_batch.calls_that_fit(ctx, steady_batch.MIN_CALLS) == 0:
        flags.append(
            f"steady regime of {v!r} not measured: {steady_batch.MIN_CALLS} calls' inputs and outputs, "
            "held at once by a back-to-back batch, would not fit its memory"
        )
        return [], []
    steady, found = time_steady(ctx, programs, timing, rng, tol, options.step_limit("timing"))
    return ([steady] if steady is not None else []), list(found)


def _gpu_coverage(
    worker: WorkerProcess,
    ctx: VariantContext,
    v: str,
    baselines: list[Program],
    timing: ShapeTiming,
    rng: random.Random,
    identity: KernelIdentity,
    policy: str,
    limit: float,
    device: str,
    flags: list[str],
) -> tuple[KernelIdentity, Coverage, Reason | None]:
    """One timed shape's kernels profiled on the GPU: the identity with the baselines' kernels
    (once), the candidate's coverage, and the reason if its profile contradicts its timing."""
    if identity.own:  # what the task's own reference runs is never the solution's
        seed = rng.getrandbits(62)
        for b in baselines:
            identity = identity.with_baseline(baseline_kernels(b.worker, ctx, seed, limit))
    cov = _profiled(worker, ctx, rng, identity, policy, limit, device, flags)
    return identity, cov, reconcile(cov, timing.candidate.max_ms, v)


def _profiled(
    worker: WorkerProcess,
    ctx: VariantContext,
    rng: random.Random,
    identity: KernelIdentity,
    policy: str,
    limit: float,
    device: str,
    flags: list[str],
) -> Coverage:
    """One call of the candidate profiled on the GPU, its kernels' durations above the device's
    launch floor (flagged once where the floor is not known: kernels counted whole)."""
    floor = launch_floor(device)
    cov = account(worker, ctx, rng.getrandbits(62), identity, policy, limit, floor.us)
    if floor.us is None and not any(f.startswith("coverage_floor") for f in flags):
        flags.append(f"coverage_floor: {floor.how}; kernels counted whole")
    return cov


def _no_kernel_of_its_own(
    worker: WorkerProcess,
    ctx: VariantContext,
    rng: random.Random,
    identity: KernelIdentity,
    policy: str,
    limit: float,
    device: str,
    flags: list[str],
) -> Timed | None:
    """A solution that defines no kernel of its own (no binary built for it, no Triton kernel in its
    code) can never earn a speed claim on a GPU: none of its GPU time can be its own, at any shape.
    One call is profiled before any timing, in a shared turn (the share it measures is zero
    whatever a neighbour's kernels add to the durations), and where it shows GPU work the
    solution is refused ``no_custom_kernel`` there: no baseline is loaded for it and it never holds
    the device alone. A call that shows no GPU work at all decides nothing, and timing goes on."""
    cov = _profiled(worker, ctx, rng, identity, policy, limit, device, flags)
    reason = coverage_reason(cov) if cov.custom_fraction is not None else None
    if reason is None or reason.code is not ReasonCode.NO_CUSTOM_KERNEL:
        return None
    note = (
        "the solution defines no kernel of its own; one call profiled before timing, beside other "
        "evaluations' work (durations not its alone), and the candidate not timed"
    )
    cov = replace(cov, note=f"{cov.note}; {note}" if cov.note else note)
    return Timed(None, {}, None, cov, (reason,), tuple(flags), None)


def kernel_identity(setup: Setup, worker: WorkerProcess) -> KernelIdentity:
    """What names the solution's kernels, from the parent's own facts: the functions of the binaries
    it built and copied into the candidate's read-only folder, and the Triton kernels the solution's
    code defines (kernelproof/measure/attribution.py)."""
    built = built_names(getattr(worker, "private", None))
    jitted = frozenset(setup.solution.file.triage.kernel_names)
    return KernelIdentity(built.built, jitted, frozenset(), built.binaries, built.aten_imports)


def aten_launch_flag(coverage: Coverage | None) -> str | None:
    """``plain_torch`` for a CPU forward whose only launches ran ATen's work (a wrapper around torch
    ops, or a binary that calls ATen's kernels directly): judged as plain PyTorch is, with no speed
    claim (claims.py)."""
    if coverage is None or not coverage.aten_launches or coverage.custom_launches:
        return None
    return (
        "plain_torch: the solution's launches ran ATen's work "
        f"({', '.join(coverage.aten_outside[:8]) or 'none listed'}) and no kernel of its own: ATen work behind a "
        "wrapper is judged as plain PyTorch"
    )


def untimed_on_cpu(claims: Claims, options: EvalOptions) -> bool:
    """Is a CPU candidate left untimed? Where its counted launches ran in Triton's interpreter its
    speed is no claim (measure/claims.py), and minutes of interpreted calls would buy nothing the
    verdict says; ``--time-interpreted`` times it all the same."""
    return claims.speed_withheld == SPEED_WITHHELD_INTERPRETER and not options.time_interpreted


def _untimed(
    options: EvalOptions, coverage: Coverage | None, reasons: list[Reason], flags: list[str], claims: Claims
) -> Timed:
    """The record of a CPU candidate judged without timing: its launch count and claims, every
    headline speedup null with the note that says why (none when a reason already fails it)."""
    if reasons:
        return Timed(None, {}, None, coverage, tuple(reasons), tuple(flags), claims)
    speedup = {
        n: Speedup(n, None, None, None, NOT_TIMED_NOTE) for n in options.baselines if n not in STEADY_ONLY
    }
    flags = [*flags, NOT_TIMED_FLAG]
    note = "; ".join(x for x in (claims.note, "not timed (--time-interpreted times it)") if x)
    return Timed(None, speedup, None, coverage, (), tuple(flags), replace(claims, note=note))


def with_floor(flag: str, roof: Roofline | None) -> str:
    """A ``timing_unbounded`` flag with the bound that does hold for such a call: the parent's own
    roofline floor, below which no report can go (``below_physical_floor``). A call reported near
    its floor leaves a forged window little to claim; one far from it leaves that distance
    (docs/timing.md, the bounds' resolution)."""
    if not flag.startswith("timing_unbounded:") or roof is None or not roof.floor_ms or not roof.sol_fraction:
        return flag
    return (
        f"{flag}; the parent's roofline floor for the call is {roof.floor_ms:.4g} ms (datasheet peaks), "
        f"and the report {1 / roof.sol_fraction:.3g} x that: no report can fall below it"
    )


def _cpu_judged(reason: Reason | None, backend: str) -> Reason | None:
    """On the CPU coverage is not judged: a plain-PyTorch solution (it defines no kernel) passes
    flagged ``plain_torch``; one that defines kernels and launches none stays ``no_custom_kernel``."""
    if reason is not None and reason.code is ReasonCode.NO_CUSTOM_KERNEL and backend == "torch":
        return None
    return reason


def _named(reason: Reason, limit_s: float) -> Reason:
    """A timing request's timeout, said as the phase it cut and the option that sets its limit."""
    if reason.code is not ReasonCode.TIMEOUT:
        return reason
    message = (
        f"timing did not finish within {limit_s:g} s a request (--timing-timeout); the worker was killed"
    )
    return Reason(ReasonCode.TIMEOUT, message, reason.detail)


def _baselines(
    setup: Setup,
    ctx: VariantContext,
    variant: str,
    options: EvalOptions,
    device: str,
    workers: WorkerSource,
    flags: list[str],
    neutral: dict[str, bool],
    leases: ExitStack,
) -> list[Program]:
    """The cold regime's baselines, loaded in their persistent workers; one that fails is dropped with a flag.
    `neutral`: the candidate's cuDNN benchmark mode, which the baselines run with too. Each worker
    is this evaluation's until `leases` closes (after the shape's timing): loaded here, in a shared
    turn, it is timed later, alone, and no other evaluation may load or close it in between. An
    evaluation larger than its share of the device closes them then (WorkerSource.beyond_share);
    any other's rest and wait idle, holding the task's weights and program, memory no reservation
    counts (on an H100, four KernelBench level1/47_Sum evaluations in flight, 8 GiB an input, idle
    baselines that still held their last batch kept 17 and 25 GiB, and a timed call ran out of
    memory)."""
    programs = []
    keep = not workers.beyond_share(setup.footprint_bytes, device, options.per_device)
    for name in options.baselines:
        if name in STEADY_ONLY:
            flags.append(f"baseline {name} is a steady-regime baseline and was not used in the cold regime")
            continue
        key = (setup.task.sha256, variant, name, device, ctx.precision, ctx.mode)
        bw = workers.baseline(key, device)
        leases.callback(workers.release_baseline, bw, keep)
        extra = {
            "source": variant_source(setup.task, variant),
            "compile_mode": name.split(":", 1)[1] if ":" in name else None,
            "neutral_flags": neutral,
        }
        try:
            r = load_program(bw, ctx, setup.task.path, "baseline", options, extra)
        except WorkerDied as died:
            workers.discard_baseline(key, bw)
            flags.append(f"baseline {name} died while loading: {died.message}")
            continue
        if not r.get("ok"):
            flags.append(f"baseline {name} failed to load: {r.get('message')}")
            continue
        programs.append(Program(name, bw))
    return programs


def _place(setup: Setup, ctx: VariantContext, timing: ShapeTiming, device: str):
    """(the candidate on the roofline, the reason when its time is below the physical floor). The
    bytes come from the sizes correctness recorded; only where none are known is a case drawn and
    its reference and float64 oracle run again for them."""
    min_bytes = ctx.min_bytes_known()
    if min_bytes is None:
        probe = make_inputs(ctx, "normal", 0)
        ref, _ = reference_and_oracle(ctx, probe)
        min_bytes = ctx.min_bytes(probe, ref)
    roof = physics.place(
        device_name(device),
        ctx.flops(),
        min_bytes,
        timing.candidate.median_ms,
        ctx.precision,
        setup.task.meta.split_precision,
    )
    if roof.floor_ms is None or timing.candidate.median_ms >= roof.floor_ms:
        return roof, None
    return roof, Reason(
        ReasonCode.BELOW_PHYSICAL_FLOOR,
        f"median {timing.candidate.median_ms:.4g} ms is below the physical floor {roof.floor_ms:.4g} ms "
        f"({ctx.flops() or 0:.3g} FLOP, {min_bytes:.3g} bytes at datasheet peaks): impossible",
    )


def _headline_speedups(shapes: list[ShapeTiming], options: EvalOptions) -> dict[str, Speedup]:
    """Per baseline: the one timed shape's speedup, or the geometric mean over the timed shapes."""
    speedup = {}
    cold = [sh for sh in shapes if sh.regime == "cold"]
    names = {s.baseline for sh in cold for s in sh.speedups}
    for name in sorted(names):
        per_shape = [s for sh in cold for s in sh.speedups if s.baseline == name]
        if len(per_shape) == 1:
            speedup[name] = per_shape[0]
            continue
        med = stats.geomean([s.median for s in per_shape])
        # An interval only when every shape has one (a bound over some shapes is not the geomean's)
        whole = all(s.ci95 for s in per_shape)
        lo = stats.geomean([s.ci95[0] for s in per_shape]) if whole else None
        hi = stats.geomean([s.ci95[1] for s in per_shape]) if whole else None
        speedup[name] = Speedup(
            name, med, (lo, hi) if lo and hi else None, med, "geometric mean over timed shapes"
        )
    for name in options.baselines:
        if name not in speedup and name not in STEADY_ONLY:
            speedup[name] = Speedup(name, None, None, None, "baseline not measured (see flags)")
    return speedup


def _deciding_coverage(per_shape: list[tuple[str, Coverage]]) -> tuple[Coverage, Reason | None]:
    """The coverage of the largest timed shape (the most GPU time: the furthest from the launch
    floor, where a small epilogue weighs least and a decoy's ATen work most), and its reason.
    The note lists every shape's raw and deciding fractions."""
    variant, cov = max(per_shape, key=lambda p: gpu_ms(p[1]))
    if len(per_shape) > 1:
        each = "; ".join(
            f"{v}: {c.custom_fraction_raw or 0.0:.0%} raw, {c.custom_fraction or 0.0:.0%} deciding"
            for v, c in per_shape
            if c.custom_fraction is not None
        )
        cov = replace(cov, note=f"{cov.note}; decided at shape {variant!r}, the largest timed ({each})")
    return cov, coverage_reason(cov) if cov.custom_fraction is not None else None


def coverage_reason(cov: Coverage) -> Reason | None:
    """no_custom_kernel or low_kernel_coverage under the policy that applied, with the figures;
    when the other policy would accept the same kernels, the message says so."""
    frac = cov.custom_fraction or 0.0
    raw = f", {cov.custom_fraction_raw:.0%} of whole durations" if cov.custom_fraction_raw is not None else ""
    if frac == 0.0:
        return Reason(
            ReasonCode.NO_CUSTOM_KERNEL,
            "no GPU time was spent in kernels the solution defines "
            f"(policy {cov.policy}); the work ran in library or ATen kernels",
        )
    need = COVERAGE_MIN[cov.policy]
    if frac >= need:
        return None
    message = (
        f"only {frac:.0%} of the GPU work is in the solution's own kernels (durations above the launch "
        f"floor{raw}); policy {cov.policy} needs {need:.0%}"
    )
    other = cov.other_policy_fraction
    if cov.policy == "strict" and other is not None and other >= COVERAGE_MIN["library-ok"]:
        message += (
            f". Under --policy library-ok (library GEMMs and convolutions left out) the share is {other:.0%} and "
            "would pass: the usual shape of a fusion around a cuBLAS GEMM"
        )
    return Reason(ReasonCode.LOW_KERNEL_COVERAGE, message)
