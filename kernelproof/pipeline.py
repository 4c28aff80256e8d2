"""One evaluation, end to end: task and solution in, one verdict out.

task -> variants -> cases -> candidate worker (run) -> compare in the parent -> timing rounds
against baseline workers -> physics and launch accounting -> verdict. Pass only by positive
confirmation of every case (I9); any missing result is a failure (I1). Everything the candidate
can do wrong becomes a Reason; only the user's own mistakes and kernelproof's bugs raise.
"""

from __future__ import annotations

import datetime as _dt
import platform
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelproof import __version__
from kernelproof.errors import TaskError
from kernelproof.executors.process import WorkerDied, WorkerProcess
from kernelproof.measure import roofline as physics
from kernelproof.measure import stats
from kernelproof.measure.accounting import account
from kernelproof.measure.session import Program, time_steady, time_variant
from kernelproof.options import EvalOptions
from kernelproof.solution import SolutionFile, read_solution
from kernelproof.task import Task, load_task, variant_source, variants_for, with_auto_variants
from kernelproof.verdict import (
    CaseResult,
    Correctness,
    Coverage,
    FileRef,
    Outcome,
    Reason,
    ReasonCode,
    Roofline,
    ShapeTiming,
    Speedup,
    Timing,
    Verdict,
    compute_reward,
)
from kernelproof.verify import audit as task_audit
from kernelproof.verify.cases import (
    LOWER_PRECISIONS,
    VariantContext,
    allowed_distributions,
    build_variant,
    lower_precision_outputs,
    make_inputs,
    plan_cases,
    reference_and_oracle,
    reference_is_random,
)
from kernelproof.verify.compare import (
    DOWNGRADE_FACTOR,
    Tolerance,
    compare,
    kernelbench_accepts,
    rel_norm_error,
    tolerance_for,
)


class WorkerSource:
    """Where an evaluation gets its workers (the local pool, or a test double)."""

    def candidate(self, device: str) -> WorkerProcess:  # a fresh process, used once
        raise NotImplementedError

    def baseline(self, key: tuple, device: str) -> WorkerProcess:  # persistent per key
        raise NotImplementedError

    def discard_baseline(self, key: tuple) -> None:
        raise NotImplementedError


@dataclass
class _State:
    reasons: list[Reason] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    kb_ok: bool = True
    tol_by_variant: dict[str, Tolerance] = field(default_factory=dict)


def evaluate_pair(
    task_path: str, solution_path: str, options: EvalOptions, device: str, workers: WorkerSource
) -> Verdict:
    started = time.monotonic()
    seed = options.seed if options.seed is not None else secrets.randbits(62)
    sol = read_solution(solution_path)
    sol_ref = FileRef(str(solution_path), sol.sha256, sol.triage.backend)
    env: dict[str, Any] = _environment(device)
    settings = {**_jsonable(options.cache_key_fields()), "seed": seed, "device": device}
    try:
        task = load_task(task_path)
    except TaskError as exc:
        return _finish(
            Outcome.ERROR,
            [Reason(ReasonCode.TASK_ERROR, str(exc))],
            FileRef(str(task_path), ""),
            sol_ref,
            None,
            None,
            {},
            None,
            None,
            env,
            [],
            settings,
            started,
        )
    task_ref = FileRef(str(task_path), task.sha256, "")
    st = _State()
    st.flags += [f"triage {f.render()}" for f in sol.triage.findings]
    if sol.triage.backend == "torch":
        st.flags.append("plain_torch: the solution defines no Triton or CUDA kernel")
    if sol.triage.syntax_error:
        reason = Reason(ReasonCode.COMPILE_ERROR, f"the solution does not parse: {sol.triage.syntax_error}")
        return _finish(
            Outcome.FAIL,
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
        )

    rng = random.Random(seed)
    init_seed = rng.getrandbits(31)
    dev = torch.device(device)
    mode = "eval" if options.eval_mode else task.meta.mode
    env["precision"] = task.meta.precision
    env["policy"] = task.meta.policy
    env["mode"] = mode
    variants = variants_for(task, dev.type)
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
        v for v in (task.meta.timed if dev.type == "cuda" else task.meta.cpu[:1]) if v in task.meta.variants
    ]
    try:
        contexts = {v: build_variant(task, v, dev, mode, init_seed) for v in variants}
        first = contexts[variants[0]]
        probe = make_inputs(first, "task", rng.getrandbits(62))
        if reference_is_random(first, probe):
            st.flags.append(
                "random_reference: the reference's output depends on RNG state (dropout in train mode)"
            )
            reason = Reason(
                ReasonCode.TASK_ERROR,
                "the reference is random (dropout in training mode?): outputs cannot be "
                "compared element by element; evaluate with --eval-mode",
            )
            return _finish(
                Outcome.ERROR,
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
            )
        for v in variants:
            report = task_audit.audit_variant(task, contexts[v], rng.getrandbits(62))
            if report.degenerate:
                reason = Reason(
                    ReasonCode.DEGENERATE_TASK, f"shape variant {v!r} fails its audit: {report.summary()}"
                )
                return _finish(
                    Outcome.ERROR,
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
                )
        dists = allowed_distributions(task, len(probe), options.distributions)
        light = set(timed) if dev.type == "cuda" else set()
        cases = plan_cases(variants, light, dists, options.seeds_per_case, rng)
    except TaskError as exc:
        return _finish(
            Outcome.ERROR,
            [Reason(ReasonCode.TASK_ERROR, str(exc))],
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
        )

    phases: dict[str, float] = {"setup_s": time.monotonic() - started}
    env["phases"] = phases
    cand = workers.candidate(device)
    timing: Timing | None = None
    speedup: dict[str, Speedup] = {}
    roof: Roofline | None = None
    coverage: Coverage | None = None
    try:
        env["worker"] = cand.wait_ready()
        env["limits"] = cand.limits_applied
        phases["worker_ready_s"] = time.monotonic() - started
        staged = cand.stage_solution(solution_path)
        _correctness(task, contexts, cases, cand, staged, options, st)
        phases["correctness_done_s"] = time.monotonic() - started
        if options.sanitize and not st.reasons and dev.type == "cuda":
            _sanitize(task, contexts, cases, options, st, device, solution_path)
        if not st.reasons and not options.correctness_only:
            timing, speedup, roof, coverage = _timing(
                task, contexts, timed, cand, staged, options, rng, st, device, workers, sol
            )
            phases["timing_done_s"] = time.monotonic() - started
    except WorkerDied as died:
        st.reasons.append(Reason(ReasonCode(died.code), died.message, died.detail))
    finally:
        cand.close()
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
    )


def _load(
    worker: WorkerProcess,
    ctx: VariantContext,
    path: str,
    role: str,
    options: EvalOptions,
    extra: dict[str, Any],
):
    init_spec, init_tensors = _encode_args(ctx.init_args)
    header = {
        "op": "load",
        "path": path,
        "device": "cuda:0" if ctx.device.type == "cuda" else "cpu",
        "dtype": str(ctx.dtype).replace("torch.", ""),
        "precision": ctx.precision,
        "mode": ctx.mode,
        "init_args": init_spec,
        "init_seed": ctx.init_seed,
        "weight_names": ctx.weight_names,
        "weights_offset": len(init_tensors),
        **extra,
    }
    reply, _ = worker.request(header, init_tensors + ctx.weight_tensors, options.timeout_s)
    return reply


def _correctness(
    task: Task, contexts, cases, cand: WorkerProcess, staged: str, options: EvalOptions, st: _State
) -> None:
    loaded = None
    for case in cases:
        ctx = contexts[case.variant]
        if loaded != case.variant:
            reply = _load(cand, ctx, staged, "candidate", options, {"deny_read": [task.path]})
            if not reply.get("ok"):
                st.reasons.append(_reason(reply))
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
        spec, tensors = _encode_args(args)
        header = {"op": "run", "args": spec, "repeats": 2, "poison_bytes": ctx.output_nbytes}
        reply, outs = cand.request(header, tensors, options.timeout_s)
        if not reply.get("ok"):
            st.reasons.append(_reason(reply, case.case_id))
            return
        per_run = len(ref)
        if len(outs) != 2 * per_run:
            st.reasons.append(
                Reason(
                    ReasonCode.WRONG_SHAPE,
                    f"case {case.case_id}: forward returned {len(outs) // 2} "
                    f"outputs, the reference returns {per_run}",
                )
            )
            return
        result = _judge_case(ctx, case, args, ref, orc, outs[:per_run], outs[per_run:], options, st)
        st.cases.append(result)
        if not result.passed:
            return


def _sanitize(
    task: Task, contexts, cases, options: EvalOptions, st: _State, device: str, solution_path: str
) -> None:
    from kernelproof.verify.sanitize import sanitize

    case = cases[-1]  # the last planned case: a small variant
    ctx = contexts[case.variant]

    def run_first_case(worker: WorkerProcess) -> None:
        worker.wait_ready()
        staged = worker.stage_solution(solution_path)
        reply = _load(worker, ctx, staged, "candidate", options, {"deny_read": [task.path]})
        if not reply.get("ok"):
            return
        spec, tensors = _encode_args(make_inputs(ctx, case.distribution, case.seed))
        worker.request(
            {"op": "run", "args": spec, "repeats": 1, "poison_bytes": ctx.output_nbytes},
            tensors,
            options.timeout_s,
        )

    reasons, notes = sanitize(run_first_case, device)
    st.reasons += reasons
    st.flags += notes


def _judge_case(ctx, case, args, ref, orc, run1, run2, options, st: _State) -> CaseResult:
    worst = None
    for r, o, c1, c2 in zip(ref, orc, run1, run2):
        tol = tolerance_for(r, o, ctx.dtype)
        prev = st.tol_by_variant.get(ctx.variant)
        if prev is None or tol.rel_norm > prev.rel_norm:
            st.tol_by_variant[ctx.variant] = tol
        for run_index, c in ((1, c1), (2, c2)):
            cmp = compare(c.to(r.device), o, r, tol)
            if options.kernelbench_compat and run_index == 1:
                st.kb_ok = st.kb_ok and kernelbench_accepts(c.to(r.device), r)
            if not cmp.passed:
                code = cmp.code
                message = cmp.message
                if code == "mismatch":
                    code, message = _classify_downgrade(ctx, args, c, o, cmp.rel_norm_err, message)
                st.reasons.append(
                    Reason(ReasonCode(code), f"case {case.case_id} (run {run_index}): {message}")
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
        if c1.dtype.is_floating_point:
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


def _classify_downgrade(ctx, args, cand, oracle, err: float, message: str) -> tuple[str, str]:
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


def _timing(
    task,
    contexts,
    timed,
    cand,
    staged,
    options,
    rng,
    st: _State,
    device,
    workers: WorkerSource,
    sol: SolutionFile,
):
    shapes: list[ShapeTiming] = []
    roof = None
    coverage = None
    telemetry = None
    if device.startswith("cuda"):
        from kernelproof.measure.telemetry import Telemetry

        telemetry = Telemetry(torch.device(device).index or 0)
    for v in timed:
        ctx = contexts[v]
        tol = st.tol_by_variant.get(v)
        if tol is None:
            continue
        reply = _load(cand, ctx, staged, "candidate", options, {"deny_read": [task.path]})
        if not reply.get("ok"):
            st.reasons.append(_reason(reply))
            return None, {}, None, None
        programs = [Program("candidate", cand)]
        for name in options.baselines:
            if name in ("compile:reduce-overhead", "compile:max-autotune"):
                st.flags.append(
                    f"baseline {name} is a steady-regime baseline and was not used in the cold regime"
                )
                continue
            key = (task.sha256, v, name, device, ctx.precision, ctx.mode)
            bw = workers.baseline(key, device)
            extra = {
                "source": variant_source(task, v),
                "compile_mode": name.split(":", 1)[1] if ":" in name else None,
            }
            try:
                r = _load(bw, ctx, task.path, "baseline", options, extra)
            except WorkerDied as died:
                workers.discard_baseline(key)
                st.flags.append(f"baseline {name} died while loading: {died.message}")
                continue
            if not r.get("ok"):
                st.flags.append(f"baseline {name} failed to load: {r.get('message')}")
                continue
            programs.append(Program(name, bw))
        timing, reasons = time_variant(
            ctx, programs, options, rng, tol, options.timeout_s, st.flags, telemetry
        )
        st.reasons += reasons
        if timing is None:
            return None, {}, None, None
        shapes.append(timing)
        if options.steady:
            steady, sreasons = time_steady(ctx, programs, timing, rng, tol, options.timeout_s)
            st.reasons += sreasons
            if steady is not None:
                shapes.append(steady)
        if roof is None:
            probe = make_inputs(ctx, "normal", 0)
            ref, _ = reference_and_oracle(ctx, probe)
            roof = physics.place(
                _device_name(device),
                ctx.flops(),
                ctx.min_bytes(probe, ref),
                timing.candidate.median_ms,
                ctx.precision,
                task.meta.split_precision,
            )
            if roof.floor_ms is not None and timing.candidate.median_ms < roof.floor_ms:
                st.reasons.append(
                    Reason(
                        ReasonCode.BELOW_PHYSICAL_FLOOR,
                        f"median {timing.candidate.median_ms:.4g} ms is below the physical floor {roof.floor_ms:.4g} ms "
                        f"({ctx.flops() or 0:.3g} FLOP, {ctx.min_bytes(probe, ref):.3g} bytes at datasheet peaks): impossible",
                    )
                )
        if coverage is None:
            coverage = account(
                cand, ctx, rng.getrandbits(62), sol.triage.kernel_names, task.meta.policy, options.timeout_s
            )
            if coverage.custom_fraction is not None:
                code = _coverage_verdict(coverage)
                if code:
                    st.reasons.append(code)
    speedup = {}
    cold = [sh for sh in shapes if sh.regime == "cold"]
    names = {s.baseline for sh in cold for s in sh.speedups}
    for name in sorted(names):
        per_shape = [s for sh in cold for s in sh.speedups if s.baseline == name]
        if len(per_shape) == 1:
            speedup[name] = per_shape[0]
        else:
            med = stats.geomean([s.median for s in per_shape])
            lo = stats.geomean([s.ci95[0] for s in per_shape if s.ci95])
            hi = stats.geomean([s.ci95[1] for s in per_shape if s.ci95])
            speedup[name] = Speedup(
                name, med, (lo, hi) if lo and hi else None, med, "geometric mean over timed shapes"
            )
    for name in options.baselines:
        if name not in speedup and name not in ("compile:reduce-overhead", "compile:max-autotune"):
            speedup[name] = Speedup(name, None, None, None, "baseline not measured (see flags)")
    timing = Timing("cold", device, tuple(shapes))
    return timing, speedup, roof, coverage


COVERAGE_MIN = {
    "strict": 0.8,
    "library-ok": 0.5,
}  # share of (non-library) GPU time in the submission's kernels


def _coverage_verdict(cov: Coverage) -> Reason | None:
    frac = cov.custom_fraction or 0.0
    if frac == 0.0:
        return Reason(
            ReasonCode.NO_CUSTOM_KERNEL,
            "no GPU time was spent in kernels the solution defines "
            f"(policy {cov.policy}); the work ran in library or ATen kernels",
        )
    need = COVERAGE_MIN[cov.policy]
    if frac < need:
        return Reason(
            ReasonCode.LOW_KERNEL_COVERAGE,
            f"only {frac:.0%} of GPU time is in the solution's own kernels "
            f"(policy {cov.policy} needs {need:.0%})",
        )
    return None


def _encode_args(args: list[Any]) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
    spec, tensors = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            spec.append({"t": len(tensors)})
            tensors.append(a)
        else:
            spec.append({"v": a})
    return spec, tensors


def _reason(reply: dict[str, Any], case_id: str = "") -> Reason:
    try:
        code = ReasonCode(reply.get("code", "runtime_error"))
    except ValueError:
        code = ReasonCode.RUNTIME_ERROR
    prefix = f"case {case_id}: " if case_id else ""
    return Reason(code, prefix + str(reply.get("message", "")), str(reply.get("detail", "")))


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or "cpu"


def _environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "kernelproof": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "device_name": _device_name(device),
        "host": platform.node(),
    }
    if device.startswith("cuda"):
        env["cuda"] = torch.version.cuda
    return env


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


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
    wa, wb = workers.candidate(device), workers.candidate(device)
    try:
        programs = []
        for name, w, path in (("candidate", wb, b), ("A", wa, a)):
            staged = w.stage_solution(path)
            reply = _load(w, ctx, staged, "candidate", options, {"deny_read": [task.path]})
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
