"""The correctness phase: every case run twice in the candidate's worker, judged in the parent against the oracle."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from kernelproof.errors import WorkerError
from kernelproof.inputs import FINGERPRINT_SIGMAS, checksum, fingerprint
from kernelproof.options import EvalOptions
from kernelproof.phases.common import State, encode_args, load_program, reason_from_reply
from kernelproof.sandbox.process import WorkerProcess
from kernelproof.task import Task
from kernelproof.verdict import (
    CaseResult,
    Reason,
    ReasonCode,
)
from kernelproof.verify.cases import (
    LOWER_PRECISIONS,
    drawable,
    lower_precision_outputs,
    make_inputs,
    reference_and_oracle,
)
from kernelproof.verify.compare import (
    DOWNGRADE_FACTOR,
    compare,
    kernelbench_accepts,
    rel_norm_error,
    tolerance_for,
)
from kernelproof.worker.expected import OUTPUT_REUSED, REUSED_NOTE, Expected


def run_correctness(
    task: Task, contexts, cases, cand: WorkerProcess, staged: str, options: EvalOptions, st: State
) -> None:
    loaded = None
    for case in cases:
        ctx = contexts[case.variant]
        if loaded != case.variant:
            reply = load_program(
                cand, ctx, staged, "candidate", options, {"deny_read": [os.path.realpath(task.path)]}
            )
            if isinstance(reply.get("build"), dict):
                st.worker_build = reply["build"]
            if not reply.get("ok"):
                st.reasons.append(reason_from_reply(reply))
                return
            if reply.get("weights") == "not_copied":
                st.flags.append(
                    "weights_not_copied: ModelNew's parameters match the reference's by neither name nor order"
                )
            loaded = case.variant
        args = None
        ref = orc = None
        for attempt in range(3):
            seed = case.seed + attempt
            args = make_inputs(ctx, case.distribution, seed)
            ref, orc = reference_and_oracle(ctx, args)
            if all(torch.isfinite(t).all() for t in ref if t.is_floating_point()):
                break
        else:
            st.flags.append(
                f"case {case.case_id} skipped: the reference output is not finite on this distribution"
            )
            continue
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
        if projection is None:  # both runs' outputs come back, checked against ref's before any is read
            reply, outs = cand.request(header, tensors, options.timeout_s, Expected.like(ref, runs=2))
        else:  # large outputs: run 1's come back on the device where the worker can hand them over
            reply, outs = cand.request_outputs(header, tensors, ref, options.timeout_s, lend=bool(tensors))
        if not reply.get("ok"):
            st.reasons.append(reason_from_reply(reply, case.case_id))
            return
        if reply.get("output_reused") and not any(f.startswith(OUTPUT_REUSED) for f in st.flags):
            st.flags.append(f"{OUTPUT_REUSED}: the two runs of a case {REUSED_NOTE}")
        if header.get("draw") and not _same_checksums(reply.get("checksums", []), checksum(args)):
            raise WorkerError(f"case {case.case_id}: the worker drew different inputs from the same seed")
        per_run = len(ref)
        if projection is not None:
            fps = reply.get("second_run_fingerprints") or []
            if len(outs) != per_run or len(fps) != per_run:
                st.reasons.append(
                    Reason(
                        ReasonCode.WRONG_SHAPE,
                        f"case {case.case_id}: forward returned "
                        f"{len(outs)} outputs, the reference returns {per_run}",
                    )
                )
                return
            result = judge_case(ctx, case, args, ref, orc, outs, None, options, st, (projection, fps))
            st.cases.append(result)
            if not result.passed:
                return
            continue
        if len(outs) != 2 * per_run:
            st.reasons.append(
                Reason(
                    ReasonCode.WRONG_SHAPE,
                    f"case {case.case_id}: forward returned {len(outs) // 2} "
                    f"outputs, the reference returns {per_run}",
                )
            )
            return
        result = judge_case(ctx, case, args, ref, orc, outs[:per_run], outs[per_run:], options, st)
        st.cases.append(result)
        if not result.passed:
            return


def run_sanitizer(
    task: Task,
    contexts,
    cases,
    options: EvalOptions,
    st: State,
    device: str,
    solution_path: str,
    prepare: Callable[[WorkerProcess], None] | None = None,
) -> None:
    from kernelproof.verify.sanitize import sanitize

    case = cases[-1]  # the last planned case: a small variant
    ctx = contexts[case.variant]

    def run_first_case(worker: WorkerProcess, timeout_s: float) -> None:
        worker.wait_ready(timeout_s)
        if prepare is not None:
            prepare(worker)  # the build's artifacts, as the evaluation's own worker got them
        staged = worker.stage_solution(solution_path)
        reply = load_program(
            worker, ctx, staged, "candidate", options, {"deny_read": [os.path.realpath(task.path)]}
        )
        if not reply.get("ok"):
            return
        spec, tensors = encode_args(make_inputs(ctx, case.distribution, case.seed))
        worker.request(
            {"op": "run", "args": spec, "repeats": 1, "poison_bytes": ctx.output_nbytes},
            tensors,
            timeout_s,
        )

    reasons, notes = sanitize(run_first_case, device)
    st.reasons += reasons
    st.flags += notes


LARGE_CASE_BYTES = 64 * 2**20  # above this, inputs are drawn in the worker and run 2 answers by fingerprint


def _same_checksums(theirs: list, ours: float) -> bool:
    return bool(theirs) and all(abs(float(t) - ours) <= 1e-9 * max(1.0, abs(ours)) for t in theirs)


def _which(ctx, k: int, results: int) -> str:
    """Name the result that failed when it is not simply the only output."""
    updated = len(ctx.inplace)
    if k >= results - updated:
        return f", argument {ctx.inplace[k - (results - updated)]} (updated in place)"
    return f", output {k}" if results - updated > 1 else ""


def judge_case(ctx, case, args, ref, orc, run1, run2, options, st: State, second=None) -> CaseResult:
    """Every element of run 1 (and of run 2 when it was sent), and the spread between the runs.

    For large outputs run 2 comes back as a fingerprint (``second`` = (projection seed, per-output
    [<w, out>, ||out||])) compared with the same projection of run 1.
    """
    worst = None
    run2 = run2 if run2 is not None else [None] * len(run1)
    for k, (r, o, c1, c2) in enumerate(zip(ref, orc, run1, run2)):
        tol = tolerance_for(r, o, ctx.dtype)
        prev = st.tol_by_variant.get(ctx.variant)
        if prev is None or tol.rel_norm > prev.rel_norm:
            st.tol_by_variant[ctx.variant] = tol
        for run_index, c in ((1, c1), (2, c2)) if c2 is not None else ((1, c1),):
            cmp = compare(c.to(r.device), o, r, tol)
            if options.kernelbench_compat and run_index == 1:
                st.kb_ok = st.kb_ok and kernelbench_accepts(c.to(r.device), r)
            if not cmp.passed:
                code = cmp.code
                message = cmp.message
                if code == "mismatch":
                    code, message = classify_downgrade(ctx, args, c, o, cmp.rel_norm_err, message)
                st.reasons.append(
                    Reason(
                        ReasonCode(code),
                        f"case {case.case_id} (run {run_index}){_which(ctx, k, len(ref))}: {message}",
                    )
                )
                return CaseResult(
                    case.case_id,
                    case.variant,
                    case.distribution,
                    False,
                    cmp.max_abs_err,
                    cmp.rel_norm_err,
                    tol.rel_norm,
                    tol.ref_rel_norm_err,
                    code,
                )
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
                spread = rel_norm_error(c1.to(torch.float64), c2.to(torch.float64))
            if not spread <= tol.rel_norm:
                msg = (
                    f"case {case.case_id}: two runs on the same inputs differ by {spread:.3g} (tolerance "
                    f"{tol.rel_norm:.3g}): uninitialised reads or a race"
                )
                st.reasons.append(Reason(ReasonCode.NONDETERMINISTIC, msg))
                return CaseResult(
                    case.case_id,
                    case.variant,
                    case.distribution,
                    False,
                    0.0,
                    spread,
                    tol.rel_norm,
                    tol.ref_rel_norm_err,
                    "nondeterministic",
                )
        elif not torch.equal(c1, c2):
            st.reasons.append(Reason(ReasonCode.NONDETERMINISTIC, f"case {case.case_id}: two runs differ"))
            return CaseResult(
                case.case_id, case.variant, case.distribution, False, 0.0, 0.0, 0.0, 0.0, "nondeterministic"
            )
    tol = st.tol_by_variant[ctx.variant]
    return CaseResult(
        case.case_id,
        case.variant,
        case.distribution,
        True,
        worst.max_abs_err if worst else 0.0,
        worst.rel_norm_err if worst else 0.0,
        tol.rel_norm,
        tol.ref_rel_norm_err,
    )


def classify_downgrade(ctx, args, cand, oracle, err: float, message: str) -> tuple[str, str]:
    """Is a too-large error the error of a lower precision? Then say so (A9)."""
    for low in LOWER_PRECISIONS.get(ctx.precision, ()):
        try:
            outs = lower_precision_outputs(ctx, args, low)
        except Exception:  # noqa: BLE001 - a lower-precision reference that does not run explains nothing
            continue
        if not outs:
            continue
        low_err = rel_norm_error(outs[0].to(torch.float64), oracle)
        if low_err > 0 and err <= DOWNGRADE_FACTOR * low_err:
            return "precision_downgrade", (
                f"{message}. The error matches {low} arithmetic ({low} reference error {low_err:.3g}), "
                f"below the task's {ctx.precision} contract"
            )
    return "mismatch", message
