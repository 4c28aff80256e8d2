"""One evaluation, end to end: task and solution in, one verdict out.

task -> variants -> cases -> candidate worker (run) -> compare in the parent -> timing rounds
against baseline workers -> physics and launch accounting -> verdict. Pass only by positive
confirmation of every case (I9); any missing result is a failure (I1). Everything the candidate
can do wrong becomes a Reason; only the user's own mistakes and kernelproof's bugs raise.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import random
import secrets
import time
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof import __version__
from kernelproof.errors import TaskError
from kernelproof.measure.session import Program, time_variant
from kernelproof.options import EvalOptions
from kernelproof.phases import build as build_phase
from kernelproof.phases.common import (
    State,
    WorkerSource,
    device_name,
    load_program,
)
from kernelproof.phases.correctness import run_correctness, run_sanitizer
from kernelproof.phases.timed import run_timing
from kernelproof.sandbox.process import WorkerDied
from kernelproof.solution import read_solution
from kernelproof.source import this_source
from kernelproof.task import load_task, variants_for, with_auto_variants
from kernelproof.verdict import (
    BuildRecord,
    Correctness,
    Coverage,
    FileRef,
    Outcome,
    Reason,
    ReasonCode,
    Roofline,
    Speedup,
    Timing,
    Verdict,
    compute_reward,
)
from kernelproof.verify import audit as task_audit
from kernelproof.verify.cases import (
    allowed_distributions,
    build_variant,
    inplace_findings,
    make_inputs,
    plan_cases,
    reference_and_oracle,
    reference_is_random,
)
from kernelproof.verify.compare import tolerance_for


def evaluate_pair(
    task_path: str, solution_path: str, options: EvalOptions, device: str, workers: WorkerSource
) -> Verdict:
    started = time.monotonic()
    seed = options.seed if options.seed is not None else secrets.randbits(62)
    sol = read_solution(solution_path)
    sol_ref = FileRef(str(solution_path), sol.sha256, sol.triage.backend)
    env: dict[str, Any] = _environment(device)
    settings = {**options.cache_key_fields(), "seed": seed, "device": device}
    st = State()
    build_rec: BuildRecord | None = None

    def stop(outcome: Outcome, reason: Reason, task_ref: FileRef) -> Verdict:
        """A verdict decided before the candidate's worker ran (a broken task, a solution that does
        not parse or build)."""
        return _finish(
            outcome,
            [reason],
            task_ref,
            sol_ref,
            None,
            None,
            {},
            None,
            None,
            env,
            st.flags,
            settings,
            started,
            build_rec,
        )

    try:
        task = load_task(task_path)
    except TaskError as exc:
        return stop(Outcome.ERROR, Reason(ReasonCode.TASK_ERROR, str(exc)), FileRef(str(task_path), ""))
    task_ref = FileRef(str(task_path), task.sha256, "")
    st.flags += [f"triage {f.render()}" for f in sol.triage.findings]
    if sol.triage.backend == "torch":
        st.flags.append("plain_torch: the solution defines no Triton or CUDA kernel")
    if sol.triage.syntax_error:
        reason = Reason(ReasonCode.COMPILE_ERROR, f"the solution does not parse: {sol.triage.syntax_error}")
        return stop(Outcome.FAIL, reason, task_ref)
    pending = None
    if build_phase.needs_build(sol.triage.backend):
        # Submitted now (or already, by evaluate_many): it builds while the task is set up.
        pending = workers.build(str(solution_path), sol.sha256, device, options)

    rng = random.Random(seed)
    init_seed = rng.getrandbits(31)
    dev = torch.device(device)
    mode = "eval" if options.eval_mode else task.meta.mode
    env["precision"] = task.meta.precision
    env["policy"] = task.meta.policy
    env["mode"] = mode
    variants = variants_for(task, dev.type)
    gate = workers.gate(device)
    # Untimed GPU work (shapes, references, the audit, inputs) is shared with other evaluations
    # on this device; timing, further down, has the GPU to itself (sandbox/gate.py).
    with gate.shared():
        if options.shape_variants == "auto":
            task, extra = with_auto_variants(task, variants[0])
            kept = []
            for v in extra:
                try:
                    ctx = build_variant(task, v, dev, mode, init_seed)
                    reference_and_oracle(ctx, make_inputs(ctx, "normal", 1))
                    kept.append(v)
                except TaskError as exc:
                    st.flags.append(f"auto shape variant {v!r} dropped: the reference rejects it ({exc})")
            variants = tuple(variants) + tuple(kept)
        timed = [
            v
            for v in (task.meta.timed if dev.type == "cuda" else task.meta.cpu[:1])
            if v in task.meta.variants
        ]
        try:
            contexts = {v: build_variant(task, v, dev, mode, init_seed) for v in variants}
            first = contexts[probe_variant(task, variants)]
            probe = make_inputs(first, "task", rng.getrandbits(62))
            st.flags += inplace_findings(first, probe)
            if reference_is_random(first, probe):
                st.flags.append(
                    "random_reference: the reference's output depends on RNG state (dropout in train mode)"
                )
                reason = Reason(
                    ReasonCode.TASK_ERROR,
                    "the reference is random (dropout in training mode?): outputs cannot be "
                    "compared element by element; evaluate with --eval-mode",
                )
                return stop(Outcome.ERROR, reason, task_ref)
            for v in variants:
                report = task_audit.audit_variant(task, contexts[v], rng.getrandbits(62))
                if report.degenerate:
                    reason = Reason(
                        ReasonCode.DEGENERATE_TASK, f"shape variant {v!r} fails its audit: {report.summary()}"
                    )
                    return stop(Outcome.ERROR, reason, task_ref)
            dists = allowed_distributions(task, len(probe), options.distributions)
            light = set(timed) if dev.type == "cuda" else set()
            cases = plan_cases(variants, light, dists, options.seeds_per_case, rng)
        except TaskError as exc:
            return stop(Outcome.ERROR, Reason(ReasonCode.TASK_ERROR, str(exc)), task_ref)

    phases: dict[str, float] = {"setup_s": time.monotonic() - started}
    env["phases"] = phases
    env["per_device"] = options.per_device  # evaluations in flight on this device (timing alone)
    built = None
    if pending is not None:
        built, build_rec = build_phase.wait(pending, sol.triage.backend)
        phases["build_done_s"] = time.monotonic() - started
        failed = build_phase.failure(built, sol.source)
        if failed is not None:
            return stop(Outcome.FAIL, failed, task_ref)
    cand = None
    timing: Timing | None = None
    speedup: dict[str, Speedup] = {}
    roof: Roofline | None = None
    coverage: Coverage | None = None
    try:
        with gate.shared():  # waiting here (a timing inside) counts towards "worker"
            cand = workers.candidate(device, timed=not options.correctness_only)
            gate.lendable(cand)  # a reply long awaited (a hang) does not hold up another's timing
            env["worker"] = cand.wait_ready()
            env["limits"] = cand.limits_applied
            env["sandbox"] = cand.sandbox_record()  # which containment layers held (kernelproof.sandbox)
            if options.require_sandbox:
                cand.require_layers()
            phases["worker_ready_s"] = time.monotonic() - started
            if pending is not None and built is not None and build_rec is not None:
                t0 = time.monotonic()
                built, rebuilt, failed = build_phase.provide(pending, built, cand, options.timeout_s)
                if rebuilt:
                    build_rec = build_phase.record_of(
                        built, sol.triage.backend, build_rec.wait_s + time.monotonic() - t0, rebuilt=True
                    )
                    st.flags.append(
                        "build_cache: an entry failed its hash check and was evicted; built again"
                    )
                if failed is not None:
                    st.reasons.append(failed)
            staged = cand.stage_solution(solution_path)
            if not st.reasons:
                run_correctness(task, contexts, cases, cand, staged, options, st)
            phases["correctness_done_s"] = time.monotonic() - started
            if options.sanitize and not st.reasons and dev.type == "cuda":
                prepare = (
                    build_phase.preparer(pending, built, options.timeout_s) if pending and built else None
                )
                run_sanitizer(task, contexts, cases, options, st, device, solution_path, prepare)
        if not st.reasons and not options.correctness_only:
            # The GPU to this evaluation alone: other evaluations' stretches end first, and no
            # worker of ours is still starting (waiting for either counts towards "settle").
            with gate.exclusive():
                workers.settle(device)
                phases["settled_s"] = time.monotonic() - started
                try:
                    timing, speedup, roof, coverage = run_timing(
                        task, contexts, timed, cand, staged, options, rng, st, device, workers, sol
                    )
                finally:
                    workers.resume(device)
            phases["timing_done_s"] = time.monotonic() - started
    except WorkerDied as died:
        st.reasons.append(Reason(ReasonCode(died.code), died.message, died.detail))
    finally:
        with gate.shared():  # a worker's exit and the parent's frees touch the GPU too
            if cand is not None:
                cand.close()
            if dev.type == "cuda":
                contexts.clear()
                torch.cuda.empty_cache()  # the parent's references and oracles: give the memory back
    correctness = Correctness(
        cases_run=len(st.cases),
        cases_passed=sum(c.passed for c in st.cases),
        worst_rel_norm_err=max((c.rel_norm_err for c in st.cases), default=0.0),
        worst_max_abs_err=max((c.max_abs_err for c in st.cases), default=0.0),
        tolerance=f"rel-norm <= max({16:g} x reference error, {16:g} x eps) against the float64 oracle; "
        f"contract {task.meta.precision}",
        precision=task.meta.precision,
        kernelbench_compatible=(st.kb_ok if options.kernelbench_compat else None),
        cases=tuple(st.cases),
    )
    passed = not st.reasons and len(st.cases) > 0 and all(c.passed for c in st.cases)
    outcome = Outcome.PASS if passed else Outcome.FAIL
    if not st.cases and not st.reasons:
        st.reasons.append(Reason(ReasonCode.MISSING_RESULT, "no case was run"))
    settings["cases"] = [c.case_id for c in cases]
    if build_rec is not None:
        build_rec = build_phase.with_worker_report(build_rec, st.worker_build)
    return _finish(
        outcome,
        st.reasons,
        task_ref,
        sol_ref,
        correctness,
        timing,
        speedup,
        roof,
        coverage,
        env,
        st.flags,
        settings,
        started,
        build_rec,
    )


def probe_variant(task, variants: tuple[str, ...]) -> str:
    """The shape on which the task's own questions are asked (does its reference update inputs in
    place, is it random, how many inputs): its first CPU variant where one is checked here, the
    task's small shapes; else the first. get_inputs() runs on the CPU, and at a GPU task's timed
    shape it took 1.8 s on the H200 host, a cost the correctness phase pays once anyway."""
    return next((v for v in task.meta.cpu if v in variants), variants[0])


def _environment(device: str) -> dict[str, Any]:
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


def _finish(
    outcome,
    reasons,
    task_ref,
    sol_ref,
    correctness,
    timing,
    speedup,
    roof,
    coverage,
    env,
    flags,
    settings,
    started,
    build=None,
) -> Verdict:
    best = speedup.get("best") or speedup.get("eager")
    if outcome is Outcome.PASS and reasons:
        outcome = Outcome.FAIL
    return Verdict(
        verdict=outcome,
        reasons=tuple(reasons),
        task=task_ref,
        solution=sol_ref,
        correctness=correctness,
        timing=timing,
        speedup=speedup,
        roofline=roof,
        coverage=coverage,
        environment=env,
        reward=compute_reward(outcome, best),
        flags=tuple(flags),
        settings=settings,
        elapsed_s=time.monotonic() - started,
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        build=build,
    )


@dataclass(frozen=True)
class ComparePair:
    ok: bool  # both verified and timed
    message: str  # why not, when not ok
    speedup: Speedup | None  # B over A: median per-round ratio time(A)/time(B)
    a_ms: float | None  # A's median per-call time
    b_ms: float | None  # B's median per-call time
    shape: str = ""

    def summary(self) -> str:
        if not self.ok or self.speedup is None or self.speedup.median is None:
            return f"not compared: {self.message}"
        lo, hi = self.speedup.ci95 or (float("nan"), float("nan"))
        return (
            f"B over A on shape {self.shape!r}: {self.speedup.median:.3f}x [95% CI {lo:.3f}, {hi:.3f}] "
            f"(A {self.a_ms:.4g} ms, B {self.b_ms:.4g} ms median, paired interleaved rounds)"
        )


def compare_pair(
    task_path: str, a: str, b: str, options: EvalOptions, device: str, workers: WorkerSource
) -> ComparePair:
    """Paired timing of two verified candidates, interleaved in one session (`kernelproof compare`)."""
    for path in (a, b):
        v = evaluate_pair(task_path, path, options.replace(correctness_only=True), device, workers)
        if not v.passed:
            return ComparePair(
                False, f"{path} does not pass: {'; '.join(r.message for r in v.reasons)}", None, None, None
            )
    with workers.gate(device).exclusive():  # set up and timed with the GPU to this comparison alone
        return _paired_timing(task_path, a, b, options, device, workers)


def _paired_timing(
    task_path: str, a: str, b: str, options: EvalOptions, device: str, workers: WorkerSource
) -> ComparePair:
    task = load_task(task_path)
    seed = options.seed if options.seed is not None else secrets.randbits(62)
    rng = random.Random(seed)
    dev = torch.device(device)
    variant = (task.meta.timed if dev.type == "cuda" else task.meta.cpu)[0]
    ctx = build_variant(
        task, variant, dev, "eval" if options.eval_mode else task.meta.mode, rng.getrandbits(31)
    )
    args = make_inputs(ctx, "normal", rng.getrandbits(62))
    ref, orc = reference_and_oracle(ctx, args)
    tol = tolerance_for(ref[0], orc[0], ctx.dtype)
    wa, wb = workers.candidate(device, timed=False), workers.candidate(device, timed=False)  # no baseline
    try:
        programs = []
        for name, w, path in (("candidate", wb, b), ("A", wa, a)):
            failed = _provide_build(path, w, device, options, workers)
            if failed is not None:
                return ComparePair(False, f"{path}: {failed.message}", None, None, None)
            staged = w.stage_solution(path)
            reply = load_program(
                w, ctx, staged, "candidate", options, {"deny_read": [os.path.realpath(task.path)]}
            )
            if not reply.get("ok"):
                return ComparePair(False, f"{path}: {reply.get('message')}", None, None, None)
            programs.append(Program(name, w))
        timing, reasons = time_variant(ctx, programs, options, rng, tol, options.timeout_s)
    except WorkerDied as died:
        return ComparePair(False, died.message, None, None, None)
    finally:
        wa.close()
        wb.close()
    if timing is None or reasons:
        return ComparePair(False, "; ".join(r.message for r in reasons), None, None, None)
    sp = next(s for s in timing.speedups if s.baseline == "A")
    return ComparePair(True, "", sp, timing.baselines["A"].median_ms, timing.candidate.median_ms, variant)


def _provide_build(
    path: str, worker, device: str, options: EvalOptions, workers: WorkerSource
) -> Reason | None:
    """A CUDA or native solution's build, into a worker that has not loaded it yet (a cache hit
    after its evaluation); the reason when it cannot be provided."""
    sol = read_solution(path)
    if not build_phase.needs_build(sol.triage.backend):
        return None
    pending = workers.build(str(path), sol.sha256, device, options)
    if pending is None:
        return None
    result = pending.future.result()
    failed = build_phase.failure(result, sol.source)
    if failed is not None:
        return failed
    _result, _rebuilt, failed = build_phase.provide(pending, result, worker, options.timeout_s)
    return failed
