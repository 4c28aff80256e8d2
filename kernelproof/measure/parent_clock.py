"""After a shape's rounds: what the parent decides from its own facts before any figure is reported.

In order: was the machine quiet enough to time (kernelproof.measure.busy, read while the
candidate stands still), were candidate and baselines on separate cores or the candidate stopped
while baselines ran (kernelproof.host.cpus), and do the worker's reported times agree with the
parent's own clock (kernelproof.measure.bounds: the calibrated gap and the differential batch)?
A busy machine is ``machine_busy`` (an error, never stored) and the clock checks are not applied
to it: an honest solution on a busy machine gets ``machine_busy`` or a pass, never
``timing_tamper``. With ``--time-when-busy`` the timing goes on, flagged, and only the gap check
applies (it is calibrated on the baselines in the same conditions); the differential is left out,
since on the loaded development machine an honest call's two walls differed by twice the call.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kernelproof.host import cpus
from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.measure import bounds, busy, copy_cost, steady_batch
from kernelproof.measure.bounds import Differential
from kernelproof.measure.steady_batch import SteadyBatch
from kernelproof.options import TimingPolicy
from kernelproof.verdict import Reason, ReasonCode
from kernelproof.verify.case_plan import VariantContext
from kernelproof.wire.protocol import ProtocolError
from kernelproof.wire.replies import reason_of

# Tests only: skip the clock checks, to show what a forged report gets past without them.
CHECKS_OFF = False
# Tests only (tests/conftest.py): False times a busy machine as --time-when-busy does, so that a
# test's verdict does not depend on its neighbours' load; never reachable from the CLI.
BUSY_IS_ERROR = True


class Timed(Protocol):  # what session.Program offers here
    name: str
    worker: WorkerProcess
    round_ms: list[float]
    samples_ms: list[float]
    gap_ms: list[float]
    cycle_ms: list[float]
    host_ms: list[float]
    outputs_copied: bool


NO_CLAIM_ANYWAY = "its speed is no claim here: the kernels ran in Triton's interpreter"
FingerprintCheck = Callable[[SteadyBatch, Any], Reason | None]  # (the batch asked for, its fingerprints)


@dataclass(frozen=True)
class Gaps:
    """One more round of every program, for the gap check's confirmation (its figures only)."""

    cand_gap_ms: list[float]
    base_gaps_ms: list[list[float]]
    cand_mean_ms: float
    # per call, how long the candidate's worker and the parent waited, runnable, for a core in the
    # candidate's batch (busy.waited_ms); None where the kernel does not say
    cand_waited_ms: float | None = None
    base_waited_ms: list[float] = field(default_factory=list)  # the same, each baseline's batch


Confirm = Callable[[], "Gaps | Reason"]  # a Reason: the candidate failed that round (its verdict)


def judge(
    ctx: VariantContext,
    programs: list[Any],
    policy: TimingPolicy,
    rng: random.Random,
    timeout_s: float,
    stopped_how: set[str],
    check_fp: FingerprintCheck,
    notes: list[str],
    confirm: Confirm | None = None,
    speed_claimed: bool = True,
) -> list[Reason]:
    """The reasons the parent's own facts give about one shape's timing (empty: the figures stand).

    ``speed_claimed`` False (the kernels run in Triton's interpreter on the CPU: their speed is never
    a claim, kernelproof/measure/claims.py): a busy machine is no error, since nothing it could
    distort is claimed; the timing goes on, flagged, as with ``--time-when-busy``."""
    cand, baselines = programs[0], programs[1:]
    cuda = ctx.device.type == "cuda"
    plan = cpus.plan(policy.cpu_threads)
    how = _stopped(stopped_how)
    with cand.worker.frozen():
        others = busy.others_runnable()
    quiet = busy.judge(others, plan.threads, [p.round_ms for p in baselines], cuda)
    notes.append(
        f"cpu: {plan.describe(cand.worker.cores or None)}; {_held(cand.worker)}; the candidate's worker "
        + (
            f"stood still while baselines were timed ({how})"
            if how
            else "was not stopped while baselines ran"
        )
        + f"; {others:.1f} other tasks runnable while it stood still"
        + (f", baselines' A/A scatter x{quiet.aa_factor:.3f}" if quiet.aa_factor is not None else "")
    )
    why = quiet.why
    if not (plan.separated and cand.worker.pinned) and baselines and not how:
        why = "; ".join(
            w
            for w in (
                why,
                f"candidate and baselines share cores ({plan.describe(cand.worker.cores or None)}) and the "
                "candidate's worker could not be "
                "stopped while the baselines were timed",
            )
            if w
        )
    if why:
        detail = json.dumps({**quiet.to_json(), "why": why})
        reason = Reason(
            ReasonCode.MACHINE_BUSY,
            busy.Quiet(True, others, quiet.cores, quiet.aa_factor, why).message(),
            detail,
        )
        if BUSY_IS_ERROR and not policy.time_when_busy and speed_claimed:
            return [reason]
        anyway = "--time-when-busy" if policy.time_when_busy or speed_claimed else NO_CLAIM_ANYWAY
        notes.append(f"machine_busy: timed anyway ({anyway}): {why}")
    if CHECKS_OFF:
        return []
    cand_mean = float(np.mean(cand.samples_ms)) if cand.samples_ms else float("nan")
    copy = copy_cost.output_copy_ms(ctx.output_nbytes, ctx.device) if cand.outputs_copied else 0.0
    found = bounds.gap_reason(cand.gap_ms, [p.gap_ms for p in baselines], cand.host_ms, cand_mean, cuda, copy)
    if found is not None:
        confirmed = _confirmed_gap(found, why, cand, baselines, plan.threads, confirm, cuda, notes, copy)
        if confirmed is not None:
            return [confirmed]
        # unconfirmed: the speedups are withheld, and the differential still looks for a forged window
    if why:  # timed anyway: two walls of a busy machine differ by its neighbours, not by one call
        notes.append(
            "the parent's back-to-back bound was not applied: the machine was too busy for its two walls "
            "to measure one call (the calibrated gap was)"
        )
        return []
    return _differential_reasons(ctx, cand, baselines, rng, timeout_s, check_fp, notes, cuda)


UNCONFIRMED = "timing_unconfirmed"  # the flag's prefix: the speedups are withheld (evaluate/timing.py)


def _confirmed_gap(
    found: Reason,
    why: str,
    cand: Any,
    baselines: list[Any],
    threads: int,
    confirm: Confirm | None,
    cuda: bool,
    notes: list[str],
    copy_ms: float = 0.0,
) -> Reason | None:
    """timing_tamper from the gap only where nothing else explains it; else None, and a
    ``timing_unconfirmed`` flag that withholds the speedups (no speed claim, no speed reward).

    On a machine found busy (timed anyway) the candidate's harness work, pure Python and larger
    than a baseline's, stretches with the load more than the baselines' calibration does: the gap
    cannot tell load from deferred work. On a quiet one, one more round of every program is timed
    and the load read again with the candidate standing still: only an excess seen again on a
    machine still quiet is ``timing_tamper``. Deferred work is there in every round; a neighbour's
    burst (in CI, a 12.7 ms gap against an allowance of 6.4 ms, for an honest interpreted kernel
    beside the other test process) is not. Either way no figure from such a timing is a claim."""
    if why:
        notes.append(
            f"{UNCONFIRMED}: the machine was busy ({why}) and the candidate's per-call gap was beyond the "
            f"baselines' calibration ({found.detail}): load cannot be told from work outside the window here, "
            "so the speedups are withheld"
        )
        return None
    if confirm is None:
        return found
    again = confirm()
    if isinstance(again, Reason):
        return again
    with cand.worker.frozen():
        others = busy.others_runnable()
    now = busy.judge(others, threads, [p.round_ms for p in baselines], cuda)
    second = bounds.gap_reason(
        again.cand_gap_ms, again.base_gaps_ms, cand.host_ms, again.cand_mean_ms, cuda, copy_ms
    )
    waited = _waited_for_a_core(second, again, cand.host_ms, cuda, copy_ms)
    if second is None or now.busy or waited is not None:
        seen = (
            f"the machine was busy when read again ({now.why})"
            if now.busy
            else f"in a confirmation round the candidate's worker and the parent waited {waited:.3f} ms a call "
            "longer for a core than any baseline's (the kernel's run_delay), which explains the excess"
            if waited is not None
            else "not in a confirmation round"
        )
        notes.append(
            f"{UNCONFIRMED}: the candidate's per-call gap was beyond the baselines' calibration once "
            f"({found.detail}), {seen}: the speedups are withheld"
        )
        return None
    return found


def _waited_for_a_core(
    second: Reason | None, again: Gaps, host_ms: list[float], cuda: bool, copy_ms: float
) -> float | None:
    """The confirming round's wait for a core a call beyond the baselines', where that alone
    explains the excess it found.

    On a machine that reads quiet (few runnable tasks) a neighbour pinned to the candidate's core
    still takes turns with it: each call's round trip wakes the worker and the parent, and each
    wake may wait a time slice. The kernel counts that wait. Waking an idle core costs every
    program alike (on this VM about 0.8 ms a call) and is already in the baselines' gaps, so only
    the candidate's wait beyond the most any baseline waited is taken off.

    The wait is the batch's total, so it is taken off the batch's mean gap (its whole time outside
    the windows, a call's share), never off each call's: a burst in a few calls would otherwise
    excuse the median call, which it never touched."""
    if second is None or again.cand_waited_ms is None or not again.cand_gap_ms:
        return None
    beyond = again.cand_waited_ms - max(again.base_waited_ms, default=0.0)
    if beyond <= 0:
        return None
    less = [float(np.mean(again.cand_gap_ms)) - beyond]
    found = bounds.gap_reason(less, again.base_gaps_ms, host_ms, again.cand_mean_ms, cuda, copy_ms)
    return beyond if found is None else None


def wait_count(prog: Any) -> float | None:
    """The running count of the waits for a core a program's batch suffers from others (busy.waited_ms)."""
    return busy.waited_ms([prog.worker.proc.pid])


# one back-to-back batch: (the candidate's?, calls, the parent's wall ms, its wait for a core ms or None)
_Batch = tuple[bool, int, float, "float | None"]


def _waited_back_to_back(
    batches: list[_Batch], n: int, cand_mean: float, theirs: list[bounds.Baseline], cand: Any, cuda: bool
) -> float | None:
    """The candidate's wait for a core a call in its back-to-back batches beyond the most any
    baseline's batch waited (their median, for the note), where the differential of its walls less
    each batch's own wait beyond that is within the bound; else None.

    Each wall is paired with its own batch's wait, and the figure is then made as the differential
    makes it (the smallest wall of each size, the smaller of the measurements): a wait taken off a
    wall it was not part of (a median wait off the quietest batch's wall) would excuse a forged
    window on a machine whose load comes and goes. As for the gap (_waited_for_a_core), the reading
    only ever withholds: a candidate can add to its own wait, never take from it."""
    base = [w / k for mine, k, _, w in batches if not mine and w is not None]
    own = [(k, wall, w) for mine, k, wall, w in batches if mine]
    if not own or any(w is None for _, _, w in own):
        return None
    floor = max(base, default=0.0)
    per = 2 * bounds.DIFF_REPEATS  # one measurement's batches, in the order bounds.differential asks
    figure = None
    for i in range(0, len(own) - per + 1, per):
        walls = iter([wall - max(0.0, float(w or 0.0) - k * floor) for k, wall, w in own[i : i + per]])
        figure = bounds.smaller(figure, bounds.differential(lambda k, walls=walls: next(walls), n))
    if (
        figure is None
        or bounds.differential_reason(cand_mean, figure, theirs, cand.host_ms, cuda) is not None
    ):
        return None
    return float(np.median([max(0.0, float(w or 0.0) / k - floor) for k, _, w in own]))


def _differential_reasons(
    ctx: VariantContext,
    cand: Any,
    baselines: list[Any],
    rng: random.Random,
    timeout_s: float,
    check_fp: FingerprintCheck,
    notes: list[str],
    cuda: bool,
) -> list[Reason]:
    cand_mean = float(np.mean(cand.samples_ms)) if cand.samples_ms else float("nan")
    n = _fitting(ctx, bounds.calls_for(cand_mean, _median(cand.cycle_ms)))
    if n == 0:
        notes.append(
            f"the parent's back-to-back bound was not applied to {ctx.variant!r}: two "
            "calls' inputs and outputs, held at once, would not fit a back-to-back batch's memory "
            "(the calibrated gap was)"
        )
        return []
    failed: list[Reason] = []
    batches: list[_Batch] = []  # every batch's wall and wait for a core, in order

    def timed_by(prog: Any, hold: Callable[[], AbstractContextManager[Any]]) -> Callable[[int], float | None]:
        def timed(k: int) -> float | None:
            with hold():
                before = wait_count(prog)
                wall, bad = _back_to_back(ctx, prog, rng, k, timeout_s, check_fp if prog is cand else None)
                after = wait_count(prog)
            if bad is not None:
                failed.append(bad)
            if wall is not None:
                waited = None if before is None or after is None else max(0.0, after - before)
                batches.append((prog is cand, k, wall, waited))
            return wall

        return timed

    try:
        mine = bounds.differential(timed_by(cand, nullcontext), n)
        if failed:
            return _batch_failed(failed[0], ctx, notes)

        figures: dict[int, Differential] = {}  # baseline index -> its larger figure so far

        def measure_baselines() -> list[bounds.Baseline]:
            """Each baseline's (mean, figure, host), the figure the larger of its measurements: its
            harness work calibrates the allowance, and a difference of two walls errs both ways."""
            for i, b in enumerate(baselines):
                if not b.samples_ms:
                    continue
                k = _fitting(ctx, bounds.calls_for(float(np.mean(b.samples_ms)), _median(b.cycle_ms)))
                if k == 0:
                    continue
                d = bounds.differential(timed_by(b, cand.worker.frozen), k)
                got = bounds.larger(figures.get(i), d)
                if got is not None:
                    figures[i] = got
            return [
                (float(np.mean(baselines[i].samples_ms)), d, _median(baselines[i].host_ms or [0.0]))
                for i, d in figures.items()
            ]

        theirs = measure_baselines()
        found = bounds.differential_reason(cand_mean, mine, theirs, cand.host_ms, cuda)
        attempts = 1
        # a neighbour's burst comes and goes; a forged window is there every time. The baselines
        # are measured again too: the allowance never rests on one low figure of theirs.
        while found is not None and attempts < bounds.DIFF_CONFIRMS:
            again = bounds.differential(timed_by(cand, nullcontext), n)
            if failed:
                return _batch_failed(failed[0], ctx, notes)
            attempts += 1
            mine = bounds.smaller(mine, again)
            theirs = measure_baselines()
            found = bounds.differential_reason(cand_mean, mine, theirs, cand.host_ms, cuda)
    except WorkerDied as died:
        return [Reason(ReasonCode(died.code), died.message, died.detail)]
    waited = None
    if found is not None and mine is not None:
        waited = _waited_back_to_back(batches, n, cand_mean, theirs, cand, cuda)
        if waited is not None:
            notes.append(
                f"{UNCONFIRMED}: back to back the candidate's calls took more of the parent's clock than its "
                f"report allows ({found.detail}), and its worker and the parent waited {waited:.3f} ms a call "
                "longer for a core than any baseline's (the kernel's run_delay), which explains the excess: "
                "the speedups are withheld"
            )
            found = None
    if mine is not None:
        _note_figures(
            ctx, cand, cand_mean, mine, theirs, attempts, found is None and waited is None, cuda, notes
        )
    return [found] if found else []


def _batch_failed(reason: Reason, ctx: VariantContext, notes: list[str]) -> list[Reason]:
    """The candidate's back-to-back batch failed. A wrong output or a refusal is its verdict. A
    crash (the form a lack of device memory takes: a batch holds up to a sixteenth of the GPU,
    beside other evaluations) is not judged from the worker's word either way: the bound is not
    applied and the speedups are withheld, so a crash faked to skip the bound gains nothing."""
    if reason.code is not ReasonCode.CRASH:
        return [reason]
    notes.append(
        f"{UNCONFIRMED}: the candidate's back-to-back batch for {ctx.variant!r} failed ({reason.message}): "
        "the parent's bound could not be applied, so the speedups are withheld"
    )
    return []


def _note_figures(
    ctx: VariantContext,
    cand: Any,
    cand_mean: float,
    mine: Differential,
    theirs: list[bounds.Baseline],
    attempts: int,
    bounded_ok: bool,
    cuda: bool,
    notes: list[str],
) -> None:
    """The differential's figures in a note, and where the call is too short to bound (and no
    reason was found: ``bounded_ok``), whether its speedups stand on the report or are withheld."""
    harness = bounds.harness_per_call(theirs, cuda)
    notes.append(
        f"parent's back-to-back figure for {ctx.variant!r}: candidate {mine.per_call_ms:.4g} ms a call "
        f"(n = {mine.calls}, the smallest of {attempts} measurement{'s' if attempts > 1 else ''}), "
        f"reported mean {cand_mean:.4g} ms"
        + "".join(f"; a baseline {d.per_call_ms:.4g} ms against {m:.4g} ms" for m, d, _ in theirs)
        + f"; the baselines' harness work {harness:.4g} ms a call"
    )
    if bounded_ok and bounds.unbounded(mine, theirs, cand.host_ms, cuda):
        short = (
            f"for {ctx.variant!r} the parent's back-to-back figure, {mine.per_call_ms:.4g} ms a call, is within "
            f"{bounds.DIFF_HARNESS_SLACK:g} x the harness's own work per call ({harness:.4g} ms, measured on the "
            "baselines): a call this short cannot be bounded by the parent's clock"
        )
        if bounds.beyond_the_baselines_work(cand_mean, mine, theirs, cand.host_ms, cuda):
            notes.append(
                f"{UNCONFIRMED}: {short}, and beyond the reported {cand_mean:.4g} ms it leaves more than "
                f"{bounds.unbounded_slack(cuda):g} x that harness work: the speedups are withheld (a larger "
                "shape can be timed)"
            )
        else:
            notes.append(
                f"timing_unbounded: {short}; beyond the reported time it leaves no more harness work than "
                f"{bounds.unbounded_slack(cuda):g} x the baselines'. The speedups rest on the worker's report "
                "there (docs/timing.md, the bounds' resolution)"
            )


def _back_to_back(
    ctx: VariantContext,
    prog: Any,
    rng: random.Random,
    calls: int,
    timeout_s: float,
    check_fp: FingerprintCheck | None,
) -> tuple[float | None, Reason | None]:
    """(the parent's wall for ``calls`` back-to-back calls in ms, a reason when a checked output is
    wrong): every call on values of its own, any call checked (kernelproof/measure/steady_batch.py)."""
    spec, fixed = ctx.input_spec()
    batch = steady_batch.new_batch(rng, calls)
    t0 = time.perf_counter()
    reply, _ = prog.worker.request(batch.header(spec), fixed, timeout_s)
    wall = (time.perf_counter() - t0) * 1e3
    if not reply.get("ok"):
        if check_fp is None:
            return None, None  # a baseline that cannot: no calibration from it
        try:  # the candidate's: a batch it cannot run back to back is a failure, never a skipped check
            return None, reason_of(reply, "a back-to-back batch")
        except ProtocolError as exc:
            return None, Reason(ReasonCode.PROTOCOL_VIOLATION, f"the candidate's back-to-back batch: {exc}")
    if check_fp is not None:
        bad = check_fp(batch, reply.get("fingerprints"))
        if bad is not None:
            return None, bad
    return wall, None


def _fitting(ctx: VariantContext, n: int) -> int:
    """``n`` for the smaller batch, fewer where the larger one's (2n calls') inputs and outputs would
    not fit a batch's memory (kernelproof/measure/steady_batch.py), down to one call against two
    (a call that moves that much is long against the walls' noise); 0 where not even two fit."""
    return steady_batch.calls_that_fit(ctx, 2 * n, least=2) // 2


def _median(x: list[float]) -> float:
    return float(np.median(x)) if x else float("nan")


def _held(worker: WorkerProcess) -> str:
    """How the candidate's cores hold: pinned how, and whether it can widen them itself."""
    if not worker.pinned:
        return "the candidate's worker is not pinned (no affinity on this platform)"
    seccomp = any(x.name == "seccomp" and x.active for x in worker.layers)
    widen = "sched_setaffinity denied to it by seccomp" if seccomp else "it could widen them (no seccomp)"
    return f"held by {worker.pinned}, {widen}"


def _stopped(hows: set[str]) -> str:
    """How the candidate stood still in every baseline batch: the weakest way seen ("" if once not)."""
    if not hows or "" in hows:
        return ""
    return "process group" if "process group" in hows else "cgroup"


def freeze_recorder(worker: WorkerProcess, seen: set[str]) -> Callable[[], AbstractContextManager[Any]]:
    """``worker.frozen`` that also records how each stop held."""
    from contextlib import contextmanager

    @contextmanager
    def hold() -> Iterator[None]:
        with worker.frozen() as how:
            seen.add(how)
            yield

    return hold
