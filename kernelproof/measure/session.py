"""One timed shape: interleaved rounds of candidate and baselines, every timed output checked.

The parent drives; the programs run in their own workers (the candidate's, and one clean worker
per baseline), so a candidate can neither read the reference's outputs nor slow the baseline
(timing-and-baselines.md; ARCHITECTURE "Baselines never share the candidate's process"). Each
round visits every program in a rotating order; each program makes ``calls_per_round`` cold calls
(fewer where their fresh inputs together are large: :func:`calls_per_batch`)
with fresh inputs from seeds sent at call time (I4). After every candidate batch the parent
recomputes the reference on the same inputs and compares output fingerprints (``stale_output``),
fetches one hidden call's full output now and then, and checks its own wall clock against the
reported times (``timing_tamper``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.inputs import (
    STEADY_WARMUP_CALLS,
    fingerprint,
    fingerprint_allowance,
    slot_bytes,
    timed_input_batch,
    timed_inputs,
)
from kernelproof.measure import parent_clock, stats, steady_batch
from kernelproof.measure.batch import Batch, run_batch
from kernelproof.measure.steady_batch import SteadyBatch
from kernelproof.options import TimingPolicy
from kernelproof.verdict import Reason, ReasonCode, ShapeTiming, Speedup
from kernelproof.verify import steps
from kernelproof.verify.case_plan import VariantContext, oracle_of, run_model
from kernelproof.verify.oracle_compare import Tolerance, compare, tolerance_for
from kernelproof.verify.precision import FailedFingerprint, rechecked_reason, timed_output_reason
from kernelproof.wire.expected import OUTPUT_REUSED, REUSED_NOTE
from kernelproof.wire.protocol import ProtocolError
from kernelproof.wire.replies import reason_of

HIDDEN_FETCH_PROBABILITY = 0.2  # chance per candidate batch that one call's full output is re-checked
WARMUP_CALLS = 2  # warm-up batch per program (JIT, autotuning, caches), discarded
# The fresh inputs a worker holds for one timed batch (every call's own, kept until the batch is
# checked): up to this, a batch makes the policy's calls; past it, fewer, but never fewer than two.
# On an H100, KernelBench level1/47_Sum_reduction_over_a_dimension (8 GiB a call): five calls held
# 40.7 GiB in the candidate's worker beside the baseline's and the parent's, and a timed call ran
# out of memory where every correctness case had passed.
TIMED_BATCH_BYTES = 2 * 2**30


def calls_per_batch(ctx: VariantContext, policy: TimingPolicy) -> int:
    """Timed calls per program per round for this shape: the policy's, fewer where their fresh
    inputs together pass :data:`TIMED_BATCH_BYTES` (at least two, or the policy's if fewer). Every
    call still has inputs of its own; the rounds, not the calls in each, make the sample."""
    return calls_for(timed_call_bytes(ctx), policy)


def calls_for(per_call: int, policy: TimingPolicy) -> int:
    """:func:`calls_per_batch` for calls of `per_call` bytes of inputs each."""
    if per_call <= 0:
        return policy.calls_per_round
    room = max(2 * per_call, TIMED_BATCH_BYTES)
    return max(1, min(policy.calls_per_round, room // per_call))


def timed_call_bytes(ctx: VariantContext) -> int:
    """Bytes of one timed call's inputs as a worker holds them: every tensor slot, the drawn ones
    and the fixed ones it clones for each call (``inputs.input_bytes`` counts the drawn ones only)."""
    return sum(slot_bytes(s) for s in ctx.slots)


Fetch = Callable[[int, list[torch.Tensor]], "list[torch.Tensor] | None"]  # (call, like) -> its full outputs


@dataclass
class Program:
    name: str  # "candidate" or a baseline name
    worker: WorkerProcess
    round_ms: list[float] = field(default_factory=list)  # per-round mean of the calls (stats.round_figure)
    samples_ms: list[float] = field(default_factory=list)
    overhead_ms: list[float] = field(default_factory=list)  # batch wall minus reported, per call
    # per call, the parent's cycle (seed sent to fingerprint back) minus the reported window
    gap_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)  # per call: seed sent to fingerprint back
    host_ms: list[float] = field(default_factory=list)  # host time inside each call, as the worker reports it
    # per batch: the worker's account of its harness time per call, by part
    harness_ms: list[dict[str, float]] = field(default_factory=list)
    event_ms: list[float] = field(default_factory=list)
    clock: str = ""  # how the worker took the time
    outputs_copied: bool = False  # a batch reported reused outputs: the worker copied each call's (B4)


@dataclass
class _Shape:
    """What every batch of one shape's timing shares: its inputs, the oracle, the candidate's pause."""

    ctx: VariantContext
    rng: random.Random
    tol: Tolerance
    timeout_s: float
    base: dict[str, Any]
    fixed_tensors: list[torch.Tensor]
    stopped_how: set[str]  # how the candidate stood still in each baseline batch
    pause: Callable[[], AbstractContextManager[Any]] | None
    calls: int  # timed calls per batch (calls_per_batch)
    lost: dict[str, str] = field(default_factory=dict)  # baseline -> the code of the batch that dropped it

    def draw(self) -> int:
        return self.rng.getrandbits(62)

    def attempt(self, prog: Program, n: int) -> Batch:
        """A batch, its seeds sent call by call; a baseline whose worker died answers like a
        failed reply (and is dropped)."""
        try:
            if prog.name != "candidate" and self.pause is not None:
                with self.pause():  # the candidate's processes stand still while a baseline is timed
                    return run_batch(prog.worker, self.base, self.fixed_tensors, n, self.draw, self.timeout_s)
            return run_batch(prog.worker, self.base, self.fixed_tensors, n, self.draw, self.timeout_s)
        except WorkerDied as died:
            if prog.name == "candidate":
                raise
            return Batch({"ok": False, "message": died.message})

    def checked(self, prog: Program, got: Batch) -> Reason | None:
        """The candidate's batch against the oracle: every call's fingerprint, lost outputs fetched."""
        fetch = _fetcher(prog.worker, got.reply.get("lost") or [], self.timeout_s)
        return _check_fingerprints(self.ctx, got.seeds, got.projections, got.fingerprints, self.tol, fetch)


@dataclass
class _Rounds:
    """How the timed rounds ended: how many ran, what stopped them, the clocks sampled after each."""

    rounds: int = 0
    stopped_by: str = "max_rounds"
    clocks: list[Any] = field(default_factory=list)


def time_variant(
    ctx: VariantContext,
    programs: list[Program],
    policy: TimingPolicy,
    rng: random.Random,
    tol: Tolerance,
    timeout_s: float,
    notes: list[str] | None = None,
    telemetry: Any = None,
    speed_claimed: bool = True,
) -> tuple[ShapeTiming | None, list[Reason]]:
    """Time one shape; baselines that fail are dropped with a note, a failing candidate is rejected.
    ``speed_claimed`` False: no figure of it is a claim, so a busy machine is no error (parent_clock.judge).

    In steps: warm up every program, the timed rounds, the parent's own judgement of them (with
    one confirming round), the shape's timing record."""
    notes = notes if notes is not None else []
    spec, fixed_tensors = ctx.input_spec()
    stopped_how: set[str] = set()
    pause = parent_clock.freeze_recorder(programs[0].worker, stopped_how)
    calls = calls_per_batch(ctx, policy)
    if calls < policy.calls_per_round:
        notes.append(
            f"{calls} timed calls a batch, not {policy.calls_per_round}: each call's fresh inputs are "
            f"{timed_call_bytes(ctx) / 2**30:.1f} GiB, and a worker holds a batch's together"
        )
    shape = _Shape(ctx, rng, tol, timeout_s, {"op": "time", **spec}, fixed_tensors, stopped_how, pause, calls)
    try:
        with steps.step("warm_up"):
            bad = _warm_up(shape, programs, notes)
        if bad:
            return None, [bad]
        with steps.step("rounds"):
            ran = _timed_rounds(shape, programs, policy, notes, telemetry)
        if isinstance(ran, Reason):
            return None, [ran]
    except WorkerDied as died:
        return None, [Reason(ReasonCode(died.code), died.message, died.detail)]
    with steps.step("parent_checks"):  # the batches' outputs, the parent's clock, a confirming round
        found = _judged(shape, programs, policy, notes, speed_claimed)
    if any(r.code is ReasonCode.MACHINE_BUSY for r in found):
        return None, found
    timing = _shape_timing(ctx, programs, policy, ran, shape.lost)
    if ran.clocks:
        notes.append(_clocks_note(ctx, ran.clocks))
    return timing, list(found)


def _judged(
    shape: _Shape, programs: list[Program], policy: TimingPolicy, notes: list[str], speed_claimed: bool
) -> list[Reason]:
    """The parent's own judgement of the rounds (kernelproof/measure/parent_clock.py)."""
    ctx, tol, rng = shape.ctx, shape.tol, shape.rng
    return parent_clock.judge(
        ctx,
        programs,
        policy,
        rng,
        shape.timeout_s,
        shape.stopped_how,
        lambda batch, fps: check_batch(ctx, batch, fps, tol, rng),
        notes,
        lambda: _confirm(shape, programs, policy),
        speed_claimed,
    )


def _warm_up(shape: _Shape, programs: list[Program], notes: list[str]) -> Reason | None:
    """One discarded batch per program; a baseline that fails it is dropped, a failing candidate rejected."""
    for prog in list(programs):
        reply = shape.attempt(prog, WARMUP_CALLS).reply
        if not reply.get("ok"):
            if prog.name == "candidate":
                return _reason_from(reply, prog)
            notes.append(f"baseline {prog.name} was dropped: {_dropped(reply, prog)}")
            shape.lost[prog.name] = str(reply.get("code") or ReasonCode.CRASH.value)
            programs.remove(prog)
        elif prog.name == "candidate":
            _note_reuse(reply, shape.ctx, notes)
    return None


def _timed_rounds(
    shape: _Shape, programs: list[Program], policy: TimingPolicy, notes: list[str], telemetry: Any
) -> _Rounds | Reason:
    """Interleaved rounds in a rotating order until the speedups' intervals are narrow enough, the
    rounds or the time run out; the candidate's every batch checked. A Reason: the candidate failed."""
    ran = _Rounds()
    started = time.monotonic()
    for r in range(policy.max_rounds):
        order = programs[r % len(programs) :] + programs[: r % len(programs)]
        for prog in order:
            if prog not in programs:
                continue
            got = shape.attempt(prog, shape.calls)
            if not got.reply.get("ok"):
                if prog.name == "candidate":
                    return _reason_from(got.reply, prog)
                notes.append(f"baseline {prog.name} was dropped mid-run: {_dropped(got.reply, prog)}")
                shape.lost[prog.name] = str(got.reply.get("code") or ReasonCode.CRASH.value)
                programs.remove(prog)  # the others keep one entry per round: still paired
                continue
            _record_batch(prog, got)
            if prog.name == "candidate":
                bad = _check_candidate_batch(shape, prog, got, notes)
                if bad:
                    return bad
        ran.rounds = r + 1
        sample = telemetry.sample() if telemetry is not None else None
        if sample is not None:
            ran.clocks.append(sample)
        if ran.rounds >= policy.min_rounds:
            speedups = _speedups(programs)
            if not speedups or all(stats.ci_halfwidth_rel(s) <= policy.target_ci_halfwidth for s in speedups):
                ran.stopped_by = "ci_target"
                break
        if ran.rounds >= policy.min_rounds and time.monotonic() - started > policy.time_budget_s:
            ran.stopped_by = "max_time"
            break
    return ran


def _record_batch(prog: Program, got: Batch) -> None:
    """A good batch's figures added to its program's record."""
    reply = got.reply
    spans, gaps = _spans_and_gaps(got)
    prog.samples_ms += spans
    prog.event_ms += [float(x) for x in reply["event_ms"]]
    prog.round_ms.append(stats.round_figure(spans))
    prog.clock = str(reply.get("clock", ""))
    prog.overhead_ms.append(max(0.0, got.wall_ms - sum(spans)) / len(spans))
    prog.gap_ms += gaps
    prog.cycle_ms += got.cycle_ms
    prog.host_ms += [float(x) for x in reply.get("host_ms", [])]
    prog.outputs_copied = prog.outputs_copied or bool(reply.get("output_reused"))
    if reply.get("harness_ms"):
        prog.harness_ms.append({str(k): float(v) for k, v in reply["harness_ms"].items()})


def _check_candidate_batch(shape: _Shape, prog: Program, got: Batch, notes: list[str]) -> Reason | None:
    """The candidate's timed batch: its fingerprints, now and then one hidden call's full output."""
    bad = shape.checked(prog, got)
    if bad:
        return bad
    reply, seeds = got.reply, got.seeds
    _note_reuse(reply, shape.ctx, notes)
    # Only calls whose full output still exists (a reused buffer overwrites the others).
    whole = [i for i in range(len(seeds)) if i not in set(reply.get("lost") or [])]
    if whole and shape.rng.random() < HIDDEN_FETCH_PROBABILITY:
        index = whole[shape.rng.randrange(len(whole))]
        return _hidden_recheck(shape.ctx, prog.worker, index, seeds, shape.tol, shape.timeout_s)
    return None


def _confirm(shape: _Shape, programs: list[Program], policy: TimingPolicy) -> parent_clock.Gaps | Reason:
    """One more round of every program, its candidate's fingerprints checked as in the rounds, and
    each program's wait for a core a call (the parent's and its worker's: busy.waited_ms)."""
    cand_gaps: list[float] = []
    cand_spans: list[float] = []
    base_gaps: list[list[float]] = []
    waits: dict[str, float] = {}
    try:
        for prog in programs:
            before = parent_clock.wait_count(prog)
            got = shape.attempt(prog, shape.calls)
            after = parent_clock.wait_count(prog)
            if not got.reply.get("ok"):
                if prog.name == "candidate":
                    return _reason_from(got.reply, prog)
                continue
            spans, gaps = _spans_and_gaps(got)
            if before is not None and after is not None and gaps:
                waits[prog.name] = max(0.0, after - before) / len(gaps)
            if prog.name != "candidate":
                base_gaps.append(gaps)
                continue
            bad = shape.checked(prog, got)
            if bad:
                return bad
            cand_gaps, cand_spans = gaps, spans
    except WorkerDied as died:
        return Reason(ReasonCode(died.code), died.message, died.detail)
    mean = float(np.mean(cand_spans)) if cand_spans else float("nan")
    cand_waited = waits.pop("candidate", None)
    return parent_clock.Gaps(cand_gaps, base_gaps, mean, cand_waited, list(waits.values()))


def _shape_timing(
    ctx: VariantContext, programs: list[Program], policy: TimingPolicy, ran: _Rounds, lost: dict[str, str]
) -> ShapeTiming:
    """The cold regime's record of one shape, from the programs' figures after the rounds."""
    cand = programs[0]
    speedups = _speedups(programs)
    best = _best(programs, cand)
    return ShapeTiming(
        shape=ctx.variant,
        regime="cold",
        clock=cand.clock,
        candidate=stats.summarize(cand.samples_ms),
        baselines={p.name: stats.summarize(p.samples_ms) for p in programs[1:]},
        speedups=tuple(speedups + ([best] if best else [])),
        rounds=ran.rounds,
        stopped_by=ran.stopped_by,
        samples_ms={p.name: p.samples_ms for p in programs} if policy.keep_samples else {},
        throttled_rounds=sum(1 for c in ran.clocks if c.throttle),
        overhead_ms={p.name: _overhead_record(p) for p in programs if p.overhead_ms},
        baselines_lost=dict(lost),
    )


def _clocks_note(ctx: VariantContext, clocks: list[Any]) -> str:
    """The GPU's clocks, temperature and power over the rounds, in one note."""
    sm = [c.sm_clock_mhz for c in clocks]
    return (
        f"clocks during timing of {ctx.variant!r}: SM {min(sm)}-{max(sm)} MHz, "
        f"{max(c.temperature_c for c in clocks)} C max, {max(c.power_w for c in clocks):.0f} W max, "
        f"{sum(1 for c in clocks if c.throttle)} of {len(clocks)} rounds throttled"
    )


def _dropped(reply: dict[str, Any], prog: Program) -> str:
    """Why a baseline's batch failed, for the note that drops it."""
    if not reply.get("code"):  # a worker that died (attempt): its message says how
        return str(reply.get("message", ""))
    try:
        return reason_of(reply).message
    except ProtocolError as exc:
        prog.worker.kill()
        return f"its worker was killed: {exc}"


def _note_reuse(reply: dict[str, Any], ctx: VariantContext, notes: list[str]) -> None:
    """The output_reused warning, once per evaluation, when timed calls shared output storage."""
    if reply.get("output_reused") and not any(n.startswith(OUTPUT_REUSED) for n in notes):
        notes.append(f"{OUTPUT_REUSED}: timed calls of {ctx.variant!r} {REUSED_NOTE}")


def _speedups(programs: list[Program]) -> list[Speedup]:
    cand = programs[0]
    return [stats.paired_speedup(p.round_ms, cand.round_ms, p.name) for p in programs[1:]]


def _best(programs: list[Program], cand: Program) -> Speedup | None:
    """Speedup over the fastest baseline per round (the strongest opponent each time)."""
    if len(programs) < 2:
        return None
    per_round = [min(p.round_ms[i] for p in programs[1:]) for i in range(len(cand.round_ms))]
    return stats.paired_speedup(per_round, cand.round_ms, "best")


def check_batch(
    ctx: VariantContext, batch: SteadyBatch, fps: Any, tol: Tolerance, rng: random.Random
) -> Reason | None:
    """A back-to-back batch's calls, picked now, against the reference on the same inputs."""
    if not isinstance(fps, list) or len(fps) != batch.calls:
        return Reason(
            ReasonCode.MISSING_RESULT, "the worker did not return every fingerprint of a back-to-back batch"
        )
    chosen = steady_batch.picks(rng, batch.calls)
    sets = timed_input_batch(
        ctx.slots, ctx.fixed, ctx.scalars, batch.seed, batch.calls + STEADY_WARMUP_CALLS, ctx.device
    )
    return _check_fingerprints(
        ctx,
        [batch.seed] * len(chosen),
        [batch.projection] * len(chosen),
        [fps[i] for i in chosen],
        tol,
        inputs=[sets[i] for i in chosen],
        names=[f"back-to-back call {i} of {batch.calls}" for i in chosen],
    )


# Calls of the timing request run and checked, unmeasured, where a CPU candidate is left untimed
# (evaluate/timing.py): past a warm-up of WARMUP_CALLS, more calls than a phase detector that waits
# out KernelBench's five checked trials (tests/exploits/solutions/b3_phase_replay.py) lets pass.
UNTIMED_CHECK_CALLS = 8


def check_untimed_calls(
    ctx: VariantContext, worker: WorkerProcess, rng: random.Random, tol: Tolerance, timeout_s: float
) -> Reason | None:
    """The timing request's calls on fresh inputs, every output checked, nothing measured.

    Why: a candidate left untimed (Triton's interpreter on the CPU, whose speed is no claim) would
    otherwise be judged on its correctness cases alone, and a solution honest while it is checked
    and replaying once the calls look timed would pass (I4). The same requests the timing sends,
    with the same fingerprint check of each call's outputs, close that without minutes of
    interpreted rounds against the baselines."""
    spec, fixed = ctx.input_spec()
    base = {"op": "time", **spec}
    candidate = Program("candidate", worker)
    for n in (WARMUP_CALLS, UNTIMED_CHECK_CALLS):
        got = run_batch(worker, base, fixed, n, lambda: rng.getrandbits(62), timeout_s)
        if not got.reply.get("ok"):
            return _reason_from(got.reply, candidate)
        fetch = _fetcher(worker, got.reply.get("lost") or [], timeout_s)
        bad = _check_fingerprints(ctx, got.seeds, got.projections, got.fingerprints, tol, fetch)
        if bad is not None:
            return bad
    return None


def _check_fingerprints(
    ctx: VariantContext,
    seeds: list[int],
    proj: list[int],
    fps: list[list[list[float]]],
    tol: Tolerance,
    fetch: Fetch | None = None,
    inputs: list[list[Any]] | None = None,
    names: list[str] | None = None,
) -> Reason | None:
    """Each call's fingerprints against the reference on its inputs (drawn from its seed, or
    ``inputs`` as given); ``names`` name the calls in a failure (default: "timed call i")."""
    if len(fps) != len(seeds):
        return Reason(ReasonCode.MISSING_RESULT, "the worker returned fewer timed outputs than calls")
    for i, (seed, pseed) in enumerate(zip(seeds, proj)):
        args = (
            inputs[i]
            if inputs is not None
            else timed_inputs(ctx.slots, ctx.fixed, ctx.scalars, seed, ctx.device)
        )
        name = names[i] if names is not None else f"timed call {i}"
        ref = run_model(ctx.reference, args, ctx.precision, ctx.inplace)
        if len(fps[i]) != len(ref):
            return Reason(
                ReasonCode.STALE_OUTPUT, f"{name} returned {len(fps[i])} outputs, expected {len(ref)}"
            )
        for k, (got, r) in enumerate(zip(fps[i], ref)):
            want = fingerprint(r.to(ctx.dtype) if r.is_floating_point() else r, pseed)
            allowed = fingerprint_allowance(want, tol.rel_norm)
            if not (abs(got[0] - want[0]) <= allowed and abs(got[1] - want[1]) <= allowed):
                stale = Reason(
                    ReasonCode.STALE_OUTPUT,
                    f"{name}'s output does not match its fresh inputs (projection differs by "
                    f"{abs(got[0] - want[0]):.3g}, allowed {allowed:.3g}): outputs must be computed on every call",
                )
                failed = FailedFingerprint(i, k, (float(got[0]), float(got[1])), pseed, allowed, stale)
                full = fetch(i, ref) if fetch is not None else None
                return timed_output_reason(ctx, args, failed, full[k] if full else None)
    return None


def _fetcher(worker: WorkerProcess, lost: list[int], timeout_s: float) -> Fetch:
    """fetch(call, like) -> that timed call's full outputs, or None (a reused buffer, or a failure):
    evidence for the fingerprint-failure decision (verify/precision.py), never a verdict of its own."""

    def fetch(index: int, like: list[torch.Tensor]) -> list[torch.Tensor] | None:
        if index in set(lost):
            return None
        reply, outs = worker.request_outputs({"op": "fetch", "index": index}, None, like, timeout_s)
        return outs if reply.get("ok") and len(outs) == len(like) else None

    return fetch


def _widened(own: Tolerance, variant: Tolerance) -> Tolerance:
    """This call's elementwise bounds with the normwise bound of the variant's correctness cases,
    when that is wider: the re-check asks no more of a timed output than the cases asked."""
    return Tolerance(variant.rel_norm, own.atol, own.rtol, own.ref_rel_norm_err)


def _hidden_recheck(
    ctx: VariantContext, worker: WorkerProcess, index: int, seeds: list[int], tol: Tolerance, timeout_s: float
) -> Reason | None:
    args = timed_inputs(ctx.slots, ctx.fixed, ctx.scalars, seeds[index], ctx.device)
    ref = run_model(ctx.reference, args, ctx.precision, ctx.inplace)
    reply, outs = worker.request_outputs({"op": "fetch", "index": index}, None, ref, timeout_s)
    if not reply.get("ok"):
        try:
            why = reason_of(reply)
        except ProtocolError as exc:
            worker.kill()
            raise WorkerDied("crash", f"the candidate: {exc}") from None
        return Reason(
            why.code, f"the worker could not return timed call {index}'s output: {why.message}", why.detail
        )
    orc = oracle_of(ctx, args)  # in slices of the batch where the cases' oracle runs so
    for k, (c, r, o) in enumerate(zip(outs, ref, orc)):
        # The bounds of this call's own outputs: the elementwise bound scales with the reference's
        # error on these inputs, never with another case's (an honest gelu failed here on the CPU,
        # 12 of 4096 elements outside a bound taken from the first correctness case).
        own = tolerance_for(r, o, ctx.dtype, ctx.noise)
        cmp = compare(c.to(r.device), o, r, own if own.rel_norm >= tol.rel_norm else _widened(own, tol))
        if not cmp.passed:
            return rechecked_reason(ctx, args, o, cmp, k)
    return None


def _overhead_record(prog: Program) -> dict[str, float]:
    """Per call, medians over batches: time outside the window (parent's clock), host time in the
    call and the worker's harness parts (the verdict's ``overhead_ms`` and the tamper reason)."""
    rec = {"outside": round(float(np.median(prog.overhead_ms)), 4)}
    if prog.gap_ms:  # the parent's cycle minus the window, per call (measure/bounds.py)
        rec["gap"] = round(float(np.median(prog.gap_ms)), 4)
    if prog.host_ms:
        rec["host_in_call"] = round(float(np.median(prog.host_ms)), 4)
    for k in prog.harness_ms[0].keys() if prog.harness_ms else ():
        rec[k] = round(float(np.median([b.get(k, 0.0) for b in prog.harness_ms])), 4)
    return rec


def _spans_and_gaps(got: Batch) -> tuple[list[float], list[float]]:
    """A batch's reported windows, and the parent's cycle less each window (measure/bounds.py's gap)."""
    spans = [float(x) for x in got.reply["span_ms"]]
    return spans, [c - s for c, s in zip(got.cycle_ms, spans)]


def _reason_from(reply: dict[str, Any], prog: Program) -> Reason:
    """The Reason a program's failed reply gives (a baseline's message names it).

    A code kernelproof does not know means the worker is broken or its socket forged: the worker
    is killed and counted as crashed, as a dead worker is (:class:`WorkerDied`).
    """
    prefix = "" if prog.name == "candidate" else f"baseline {prog.name}"
    try:
        return reason_of(reply, prefix)
    except ProtocolError as exc:
        prog.worker.kill()
        raise WorkerDied("crash", f"{prefix or 'the candidate'}: {exc}") from None


STEADY_ROUNDS = 5  # interleaved rounds of the steady regime
STEADY_TARGET_MS = 50.0  # back-to-back calls per batch: enough to fill this much time


def time_steady(
    ctx: VariantContext,
    programs: list[Program],
    cold: ShapeTiming,
    rng: random.Random,
    tol: Tolerance,
    timeout_s: float,
) -> tuple[ShapeTiming | None, list[Reason]]:
    """Back-to-back throughput, every call on values of its own, interleaved like the cold rounds
    (kernelproof/measure/steady_batch.py).

    Reported beside the cold figures, never mixed with them: warm L2 and overlapped launches are
    what a serving loop sees, not what one call costs.
    """
    spec, fixed_tensors = ctx.input_spec()
    per_call = max(cold.candidate.median_ms, 1e-3)
    calls = steady_batch.calls_that_fit(ctx, int(min(10_000, max(20, STEADY_TARGET_MS / per_call))))
    rounds: dict[str, list[float]] = {p.name: [] for p in programs}
    try:
        for r in range(STEADY_ROUNDS):
            order = programs[r % len(programs) :] + programs[: r % len(programs)]
            for prog in order:
                batch = steady_batch.new_batch(rng, calls)
                reply, _ = prog.worker.request(batch.header(spec), fixed_tensors, timeout_s)
                if not reply.get("ok"):
                    if prog.name == "candidate":
                        return None, [_reason_from(reply, prog)]
                    continue
                if prog.name == "candidate":
                    bad = check_batch(ctx, batch, reply["fingerprints"], tol, rng)
                    if bad:
                        return None, [bad]
                rounds[prog.name].append(float(reply["per_call_ms"]))
    except WorkerDied as died:
        return None, [Reason(ReasonCode(died.code), died.message, died.detail)]
    cand = rounds["candidate"]
    others = [p.name for p in programs[1:] if len(rounds[p.name]) == len(cand)]
    speedups = [stats.paired_speedup(rounds[n], cand, n) for n in others]
    if others:
        best = [min(rounds[n][i] for n in others) for i in range(len(cand))]
        speedups.append(stats.paired_speedup(best, cand, "best"))
    return ShapeTiming(
        shape=ctx.variant,
        regime="steady",
        clock="cuda-event-batch" if ctx.device.type == "cuda" else "cpu-perf-counter-batch",
        candidate=stats.summarize(cand),
        baselines={n: stats.summarize(rounds[n]) for n in others},
        speedups=tuple(speedups),
        rounds=len(cand),
        stopped_by="max_rounds",
    ), []
