"""The timing phase: interleaved cold (and steady) rounds against baseline workers, physics, launch accounting."""

from __future__ import annotations

import os

import torch

from kernelproof.measure import roofline as physics
from kernelproof.measure import stats
from kernelproof.measure.accounting import account
from kernelproof.measure.session import Program, time_steady, time_variant
from kernelproof.phases.common import State, WorkerSource, device_name, load_program, reason_from_reply
from kernelproof.sandbox.process import WorkerDied
from kernelproof.solution import SolutionFile
from kernelproof.task import variant_source
from kernelproof.verdict import (
    Coverage,
    Reason,
    ReasonCode,
    ShapeTiming,
    Speedup,
    Timing,
)
from kernelproof.verify.cases import (
    make_inputs,
    reference_and_oracle,
)


def run_timing(
    task,
    contexts,
    timed,
    cand,
    staged,
    options,
    rng,
    st: State,
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
        reply = load_program(
            cand, ctx, staged, "candidate", options, {"deny_read": [os.path.realpath(task.path)]}
        )
        if not reply.get("ok"):
            st.reasons.append(reason_from_reply(reply))
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
                r = load_program(bw, ctx, task.path, "baseline", options, extra)
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
        if options.steady and ctx.inplace:
            st.flags.append(
                f"steady regime of {v!r} not measured: the task updates its inputs in place, so "
                "back-to-back calls on the same inputs would compound"
            )
        elif options.steady:
            steady, sreasons = time_steady(ctx, programs, timing, rng, tol, options.timeout_s)
            st.reasons += sreasons
            if steady is not None:
                shapes.append(steady)
        if roof is None:
            probe = make_inputs(ctx, "normal", 0)
            ref, _ = reference_and_oracle(ctx, probe)
            roof = physics.place(
                device_name(device),
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
                code = coverage_reason(coverage)
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
            # An interval only when every shape has one (a bound over some shapes is not the geomean's)
            whole = all(s.ci95 for s in per_shape)
            lo = stats.geomean([s.ci95[0] for s in per_shape]) if whole else None
            hi = stats.geomean([s.ci95[1] for s in per_shape]) if whole else None
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


def coverage_reason(cov: Coverage) -> Reason | None:
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
