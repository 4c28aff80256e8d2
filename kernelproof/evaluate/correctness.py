"""Step 3, correctness: every planned case run twice in the candidate's worker, judged in the parent.

The worker runs each case twice on fresh allocations over poisoned memory and sends its outputs
back; the parent compares every element of run 1 with the float64 oracle at the tolerance the
precision contract sets from the reference's own error, and checks that run 2 agrees with run 1
(uninitialised reads and races show there). Inputs never change (I3); outputs are plain tensors
(I6, checked in the worker, then here by shape and dtype). The first failing case ends the run.
One case at a time: its inputs, reference and oracle are freed before the next case is drawn (at
KernelBench's published sizes each is several GB).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from kernelproof import numeric_flags
from kernelproof.evaluate import case_budget, phase_progress
from kernelproof.evaluate.step_records import Checked, Setup
from kernelproof.evaluate.worker_requests import encode_args, load_candidate, named_timeout
from kernelproof.host.process import WorkerProcess
from kernelproof.inputs import FINGERPRINT_SIGMAS, checksum, fingerprint, fingerprint_allowance
from kernelproof.options import EvalOptions
from kernelproof.verdict import CaseResult, Reason, ReasonCode
from kernelproof.verify import steps
from kernelproof.verify.case_plan import (
    Case,
    VariantContext,
    drawable,
    make_inputs,
    reference_and_oracle,
)
from kernelproof.verify.oracle_compare import (
    Tolerance,
    compare,
    kernelbench_accepts,
    rel_norm_error,
    tolerance_for,
)
from kernelproof.verify.precision import Label, classify_downgrade
from kernelproof.wire.expected import OUTPUT_REUSED, REUSED_NOTE, Expected
from kernelproof.wire.replies import reason_of

# the laps a case's request reports (kernelproof/worker/case_runs.py), kept in the cost table
CASE_LAPS = frozenset({"inputs", "poison", "call", "checks", "fingerprint", "handoff", "to host"})
LARGE_CASE_BYTES = 64 * 2**20  # above this, inputs are drawn in the worker and run 2 answers by fingerprint


@dataclass(frozen=True)
class Judged:
    """One case judged: its result, why it failed (if it did), and what the judging learned."""

    result: CaseResult
    reason: Reason | None  # None: the case passed
    tolerance: Tolerance  # the widest tolerance this variant has used so far (this case included)
    kernelbench_ok: bool  # KernelBench's allclose rule accepted run 1 (True when not asked)
    notes: tuple[str, ...] = ()  # flags: what the judging could not do (a classification skipped)


def check_correctness(setup: Setup, worker: WorkerProcess, staged: str, options: EvalOptions) -> Checked:
    """Run the case plan in the candidate's worker; the first failure (or a case not run) ends it.

    A failure on a probed shape that is part of the contract (``--shape-variants auto``) is
    ``shape_specialized``: every case of the task's own shapes ran before it and passed."""
    checked = run_cases(setup, setup.cases, worker, staged, options, reduce_if_slow=True)
    if checked.reasons and setup.shapes_in_contract:
        variant = checked.failed_case.split("/", 1)[0]
        if variant in setup.shapes_probed:
            return replace(
                checked, reasons=(specialized(setup, variant, checked.reasons[0]),) + checked.reasons[1:]
            )
    return checked


def specialized(setup: Setup, variant: str, first: Reason) -> Reason:
    """A failure on a probed shape, said as shape specialisation, with the sizes and the failure."""
    sizes = setup.task.meta.variants.get(variant, {})
    shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return Reason(
        ReasonCode.SHAPE_SPECIALIZED,
        f"the solution passes the task's own shapes but fails shape variant {variant!r} ({shown}): "
        f"{first.code.value}: {first.message}",
        first.detail,
    )


def run_cases(
    setup: Setup,
    cases,
    worker: WorkerProcess,
    staged: str,
    options: EvalOptions,
    *,
    reduce_if_slow: bool = False,
    what: str = "case",
) -> Checked:
    """Run `cases` in the candidate's worker, judged against the oracle; the first failure ends it.

    With `reduce_if_slow`, the cases after the first keep one seed per (shape, distribution) where
    the parent's clock says the interpreter makes the plan slow (kernelproof/evaluate/case_budget.py).
    `what` names the cases in the progress lines ("case", "probed-shape case")."""
    results: list[CaseResult] = []
    flags: list[str] = []
    tolerances: dict[str, Tolerance] = {}
    kb_ok = True
    worker_build = None
    loaded = None
    unmatched: list[str] = []  # the candidate's own floating-point state the reference gives no value for

    def checked(*reasons: Reason, at: Case | None = None) -> Checked:
        failed = at.case_id if at is not None else ""
        fell_back = worker.handoff_note()
        noted = tuple(flags) + ((fell_back,) if fell_back and fell_back not in flags else ())
        return Checked(tuple(results), reasons, noted, dict(tolerances), kb_ok, worker_build, failed)

    cases = tuple(cases)
    done = 0
    while done < len(cases):
        case = cases[done]
        if done:
            phase_progress.case_done(done, len(cases), what)
        started = time.monotonic()
        ctx = setup.contexts[case.variant]
        if loaded != case.variant:
            with steps.step("load"):
                reply = load_candidate(worker, ctx, staged, setup.task.path, options)
            if isinstance(reply.get("build"), dict):
                worker_build = reply["build"]
            if not reply.get("ok"):
                return checked(reason_of(reply), at=case)
            neutral = numeric_flags.neutral_flag(
                numeric_flags.neutral_settings(ctx.precision, dict(reply.get("flags") or {}))
            )
            if neutral and neutral not in flags:
                flags.append(neutral)
            unmatched = _names(reply.get("unmatched_state"))
            if reply.get("weights") == "not_copied":
                flags.append(
                    "weights_not_copied: ModelNew's parameters match the reference's by neither name nor order"
                )
            loaded = case.variant
        with steps.step("case_draw"):  # inputs, reference and oracle in the parent
            drawn = _finite_case(ctx, case)
        if drawn is None:
            flags.append(
                f"case {case.case_id} skipped: the reference output is not finite on this distribution"
            )
            done += 1
            continue
        seed, args, ref, orc = drawn
        del drawn
        judged = _run_case(ctx, case, seed, args, ref, orc, worker, options, tolerances.get(case.variant))
        del args, ref, orc  # this case's inputs, reference and oracle are freed before the next is drawn
        if isinstance(judged, Reason):
            return checked(judged, at=case)
        tolerances[case.variant] = judged.tolerance
        kb_ok = kb_ok and judged.kernelbench_ok
        results.append(judged.result)
        flags += [n for n in judged.notes if n not in flags]
        if judged.reason is not None:
            reason = _with_weights_hint(judged.reason, unmatched)
            return checked(_with_dropout_hint(reason) if setup.random_reference else reason, at=case)
        done += 1
        if done == 1 and reduce_if_slow:
            backend = setup.solution.file.triage.backend
            reduced = case_budget.reduce_if_slow(
                cases, time.monotonic() - started, setup.device.type, backend
            )
            cases = cases[:1] + reduced.rest
            flags += [reduced.flag] if reduced.flag else []
    return checked()


def _names(value: object) -> list[str]:
    """A list of short names from a reply (the worker's word: only a message depends on it)."""
    if not isinstance(value, list):
        return []
    return [v[:200] for v in value[:16] if isinstance(v, str)]


def _with_weights_hint(reason: Reason, unmatched: list[str]) -> Reason:
    """A mismatch from a ModelNew that holds state the reference lacks: name the harness's weights."""
    if reason.code is not ReasonCode.MISMATCH or not unmatched:
        return reason
    hint = (
        ". Note: the harness gives ModelNew the reference's weights after construction (parameters "
        "initialised to a constant are perturbed), through load_state_dict(strict=False); ModelNew "
        f"holds state the reference has no value for ({', '.join(unmatched)}): if it is derived from "
        "the parameters in __init__ (a folded BatchNorm), it is stale. Recompute it in a "
        "load_state_dict post-hook (docs/tasks.md, weights derived from parameters)"
    )
    return replace(reason, message=reason.message + hint)


def _with_dropout_hint(reason: Reason) -> Reason:
    """Where the reference draws random numbers and was evaluated in eval() mode, a candidate that
    still draws them (dropout with training=True) fails: say so."""
    if reason.code not in (ReasonCode.MISMATCH, ReasonCode.NONDETERMINISTIC, ReasonCode.NONFINITE):
        return reason
    hint = (
        ". The reference uses dropout (its output depends on the random number generator), so it is "
        "evaluated in eval() mode, without dropout: a ModelNew that still drops elements "
        "(F.dropout(training=True), torch.rand in forward) cannot match it"
    )
    return replace(reason, message=reason.message + hint)


def _finite_case(ctx: VariantContext, case: Case):
    """(seed, inputs, reference outputs, oracle outputs) for a case whose reference is finite,
    redrawing the inputs up to three times; None when it never is."""
    for attempt in range(3):
        seed = case.seed + attempt
        # On the device, as a drawn case's are: get_inputs()'s own values (the "task" case) are not
        # copied to the host and up again (3.6-4.2 s a 6.4 GB tensor on an H200); each step copies them
        # on the device, and a large one goes to the worker through the device handoff.
        args = make_inputs(ctx, case.distribution, seed, on_device=True)
        ref, orc = reference_and_oracle(ctx, args)
        if all(torch.isfinite(t).all() for t in ref if t.is_floating_point()):
            return seed, args, ref, orc
        del args, ref, orc  # freed before the redraw
    return None


def _run_case(ctx, case: Case, seed: int, args, ref, orc, worker, options, widest) -> Judged | Reason:
    """One case in the worker, then judged; a Reason when the worker's reply already decides it."""
    header: dict = {"op": "run", "repeats": 2, "poison_bytes": ctx.output_nbytes}
    in_bytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    if in_bytes > LARGE_CASE_BYTES and drawable(ctx, case.distribution):
        header["args"], tensors = [], []
        header["draw"] = {
            "slots": [x.__dict__ for x in ctx.slots],
            "scalars": {str(k): v for k, v in ctx.scalars.items()},
            "distribution": case.distribution,
            "seed": seed,
        }
    else:
        header["args"], tensors = encode_args(args)
    projection = None
    if sum(ctx.output_nbytes) > LARGE_CASE_BYTES:
        projection = case.seed ^ 0x9E3779B97F4A7C15
        header["second_run_projection"] = projection
    limit = options.step_limit("case")
    # Large inputs the parent drew (get_inputs()'s own values) go over on the device whatever the
    # outputs' size: through host memory KernelBench's 94_MSELoss (two 4.3 GB inputs, one number
    # out) spent 11-14 s of its first case copying them on an H200.
    lend = bool(tensors) and in_bytes > LARGE_CASE_BYTES
    with named_timeout(f"case {case.case_id}", limit, "--case-timeout"), steps.step("case_worker"):
        if projection is None and not lend:  # both runs' outputs come back, checked before any is read
            reply, outs = worker.request(header, tensors, limit, Expected.like(ref, runs=2))
        else:  # inputs lent on the device; large outputs: run 1's come back there too, else both runs'
            runs = 2 if projection is None else 1
            reply, outs = worker.request_outputs(header, tensors, ref, limit, lend=bool(tensors), runs=runs)
        steps.said(reply.get("steps_s"), CASE_LAPS)
    if not reply.get("ok"):
        return reason_of(reply, f"case {case.case_id}")
    with steps.step("case_compare"):
        judged = _judge_reply(ctx, case, args, ref, orc, reply, outs, header, projection, options, widest)
    if isinstance(judged, Judged) and reply.get("output_reused"):
        note = f"{OUTPUT_REUSED}: the two runs of a case {REUSED_NOTE}"
        judged = replace(judged, notes=judged.notes + (note,))
    return judged


def _judge_reply(
    ctx, case, args, ref, orc, reply, outs, header, projection, options, widest
) -> Judged | Reason:
    """The outputs of a case's two runs, judged (the reply was a success)."""
    if header.get("draw") and not _same_checksums(reply.get("checksums", []), checksum(args)):
        # The worker's word on the inputs it drew disagrees with the parent's own draw from the same
        # seed: either the reply was forged or the solution disturbed the worker's draw. Both are the
        # solution's doing (it shares the worker's process, I10); nothing else in the reply is used.
        return Reason(
            ReasonCode.PROTOCOL_VIOLATION,
            f"case {case.case_id}: the worker's reply says it drew other inputs than the seed gives "
            "(checksums differ from the parent's own draw)",
        )
    per_run = len(ref)
    if projection is not None:
        fps = reply.get("second_run_fingerprints") or []
        if len(outs) != per_run or len(fps) != per_run:
            return _output_count(case, len(outs), per_run)
        return judge_case(ctx, case, args, ref, orc, outs, None, options, widest, (projection, fps))
    if len(outs) != 2 * per_run:
        return _output_count(case, len(outs) // 2, per_run)
    return judge_case(ctx, case, args, ref, orc, outs[:per_run], outs[per_run:], options, widest)


def _output_count(case: Case, got: int, want: int) -> Reason:
    return Reason(
        ReasonCode.WRONG_SHAPE,
        f"case {case.case_id}: forward returned {got} outputs, the reference returns {want}",
    )


def _same_checksums(theirs: list, ours: float) -> bool:
    return bool(theirs) and all(abs(float(t) - ours) <= 1e-9 * max(1.0, abs(ours)) for t in theirs)


def _which(ctx, k: int, results: int) -> str:
    """Name the result that failed when it is not simply the only output."""
    updated = len(ctx.inplace)
    if k >= results - updated:
        return f", argument {ctx.inplace[k - (results - updated)]} (updated in place)"
    return f", output {k}" if results - updated > 1 else ""


def _second_run_off(
    r: torch.Tensor, proj: int, theirs: list[float], tol: Tolerance
) -> tuple[float, float] | None:
    """(how far, allowed) where run 2's fingerprint is off the reference output's as a timed call's
    would be (kernelproof/measure/session.py); None where it is not.

    Why: a large output's run 2 comes back as a fingerprint, and was compared with run 1's only,
    so a wrong run 2 was ``nondeterministic`` where a small output's is ``mismatch``: on an H200
    the same pointer-cache exploit got one code or the other by the task's size."""
    want = fingerprint(r, proj)
    allowed = fingerprint_allowance(want, tol.rel_norm)
    off = max(abs(theirs[0] - want[0]), abs(theirs[1] - want[1]))
    return None if off <= allowed else (off, allowed)


def judge_case(
    ctx, case, args, ref, orc, run1, run2, options, widest: Tolerance | None, second=None
) -> Judged:
    """Every element of run 1 (and of run 2 when it was sent), and the spread between the runs.

    For large outputs run 2 comes back as a fingerprint (``second`` = (projection seed, per-output
    [<w, out>, ||out||])) compared with the same projection of run 1. `widest`: the widest
    tolerance the variant's earlier cases used (the timed outputs are checked at it).
    """
    worst = None
    kb_ok = True
    run2 = run2 if run2 is not None else [None] * len(run1)

    def failed(
        code: str, message: str, max_abs: float, rel: float, tol: Tolerance, t: Tolerance, notes=()
    ) -> Judged:
        result = CaseResult(
            case.case_id,
            case.variant,
            case.distribution,
            False,
            max_abs,
            rel,
            tol.rel_norm,
            tol.ref_rel_norm_err,
            code,
        )
        return Judged(result, Reason(ReasonCode(code), message), t, kb_ok, tuple(notes))

    for k, (r, o, c1, c2) in enumerate(zip(ref, orc, run1, run2)):
        tol = tolerance_for(r, o, ctx.dtype, ctx.noise)
        if widest is None or tol.rel_norm > widest.rel_norm:
            widest = tol
        for run_index, c in ((1, c1), (2, c2)) if c2 is not None else ((1, c1),):
            cmp = compare(c.to(r.device), o, r, tol)
            if options.kernelbench_compat and run_index == 1:
                kb_ok = kb_ok and kernelbench_accepts(c.to(r.device), r)
            if not cmp.passed:
                label = Label(cmp.code, cmp.message)
                if cmp.code == "mismatch":
                    label = classify_downgrade(ctx, args, o, cmp.rel_norm_err, cmp.message, k)
                text = f"case {case.case_id} (run {run_index}){_which(ctx, k, len(ref))}: {label.message}"
                return failed(label.code, text, cmp.max_abs_err, cmp.rel_norm_err, tol, widest, label.notes)
            worst = cmp if worst is None or cmp.rel_norm_err > worst.rel_norm_err else worst
        if c2 is None:
            proj, fps = second
            mine = fingerprint(c1.to(r.device), proj)
            theirs = fps[k]
            scale = max(abs(mine[1]), 1e-30)
            spread = max(abs(mine[0] - theirs[0]), abs(mine[1] - theirs[1])) / scale
            spread = spread / FINGERPRINT_SIGMAS if spread == spread else float("inf")
        if c2 is None or c1.dtype.is_floating_point:
            if c2 is not None:
                spread = rel_norm_error(c1, c2)  # widened to float64 slice by slice, not whole
            if c2 is None and not spread <= tol.rel_norm:
                off = _second_run_off(r, second[0], fps[k], tol)
                if off is not None:
                    msg = (
                        f"case {case.case_id} (run 2){_which(ctx, k, len(ref))}: its fingerprint is off the "
                        f"reference's by {off[0]:.3g} (allowed {off[1]:.3g}) on the same inputs as run 1, "
                        "which passed, placed in the previous case's buffers: an output served by address "
                        "(B1), uninitialised reads or a race"
                    )
                    return failed("mismatch", msg, 0.0, spread, tol, widest)
            if not spread <= tol.rel_norm:
                msg = (
                    f"case {case.case_id}: two runs on the same inputs differ by {spread:.3g} (tolerance "
                    f"{tol.rel_norm:.3g}): uninitialised reads or a race"
                )
                return failed("nondeterministic", msg, 0.0, spread, tol, widest)
        elif not torch.equal(c1, c2):
            result = CaseResult(
                case.case_id, case.variant, case.distribution, False, 0.0, 0.0, 0.0, 0.0, "nondeterministic"
            )
            reason = Reason(ReasonCode.NONDETERMINISTIC, f"case {case.case_id}: two runs differ")
            return Judged(result, reason, widest, kb_ok)
    result = CaseResult(
        case.case_id,
        case.variant,
        case.distribution,
        True,
        worst.max_abs_err if worst else 0.0,
        worst.rel_norm_err if worst else 0.0,
        widest.rel_norm,
        widest.ref_rel_norm_err,
    )
    return Judged(result, None, widest, kb_ok)
