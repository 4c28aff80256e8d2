"""Two verified candidates timed against each other in one session (`kernelproof compare`).

Both are first evaluated for correctness alone; only two passing candidates are compared. Then
both run in workers of their own, interleaved in rounds on the task's timed shape, and the
speedup of B over A comes from the paired per-round ratios, as a baseline's does.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

import torch

from kernelproof import exits
from kernelproof.evaluate.build import failure, needs_build, provide
from kernelproof.evaluate.chain import evaluate_pair
from kernelproof.evaluate.worker_requests import load_candidate
from kernelproof.evaluate.workers import WorkerSource
from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.measure.session import Program, time_variant
from kernelproof.options import EvalOptions
from kernelproof.solution import SolutionFile, solution_of
from kernelproof.submission import Submitted, read_submitted
from kernelproof.task import load_task
from kernelproof.verdict import Reason, Speedup
from kernelproof.verify.case_plan import build_variant, make_inputs, reference_and_oracle
from kernelproof.verify.contract import judged
from kernelproof.verify.oracle_compare import tolerance_for


@dataclass(frozen=True)
class ComparePair:
    ok: bool  # both verified and timed
    message: str  # why not, when not ok
    speedup: Speedup | None  # B over A: median per-round ratio time(A)/time(B)
    a_ms: float | None  # A's median per-call time
    b_ms: float | None  # B's median per-call time
    shape: str = ""
    # the exit code, as eval's for the same finding: 1 for a candidate's failure, 2 for what the
    # machine or the task decided (machine_busy, environment), 3 for kernelproof's own (exits.py)
    exit_code: int = exits.EXIT_PASS

    def summary(self) -> str:
        if not self.ok or self.speedup is None or self.speedup.median is None:
            return f"not compared: {self.message}"
        lo, hi = self.speedup.ci95 or (float("nan"), float("nan"))
        return (
            f"B over A on shape {self.shape!r}: {self.speedup.median:.3f}x [95% CI {lo:.3f}, {hi:.3f}] "
            f"(A {self.a_ms:.4g} ms, B {self.b_ms:.4g} ms median, paired interleaved rounds)"
        )


def not_compared(message: str, exit_code: int = exits.EXIT_REJECTED) -> ComparePair:
    """Why the two were not compared, and the exit code that says whose finding it is."""
    return ComparePair(False, message, None, None, None, exit_code=exit_code)


def exit_of(reasons: tuple[Reason, ...] | list[Reason]) -> int:
    """The exit code of reasons that ended the paired timing, as eval gives it for them: the
    machine's or the task's (machine_busy, environment) exit 2, anything else is a candidate's (1)."""
    codes = [r.code.value for r in reasons]
    if codes and set(codes) <= exits.TASK_CODES:
        return exits.for_outcome("error", codes)
    return exits.EXIT_REJECTED


def compare_pair(
    task_path: str, a: str, b: str, options: EvalOptions, device: str, workers: WorkerSource
) -> ComparePair:
    """Paired timing of two verified candidates, interleaved in one session. Each file is read
    once: the bytes verified are the bytes timed (kernelproof/submission.py)."""
    task = read_submitted(task_path, "task")
    files = {path: read_submitted(path, "solution") for path in (a, b)}  # one read per file
    for path in (a, b):  # A verified, then B: each its own evaluation (and progress), the same file too
        v = evaluate_pair(task, files[path], options.replace(correctness_only=True), device, workers)
        if not v.passed:
            why = "; ".join(r.message for r in v.reasons)
            return not_compared(f"{path} does not pass: {why}", exits.of_verdict(v))
    with workers.gate(device).exclusive():  # set up and timed with the GPU to this comparison alone
        return _paired_timing(task, files[a], files[b], options, device, workers)


def _paired_timing(
    task_file: Submitted, a: Submitted, b: Submitted, options: EvalOptions, device: str, workers: WorkerSource
) -> ComparePair:
    task = judged(load_task(task_file.path, task_file.data), options.precision)
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
        for name, w, file in (("candidate", wb, b), ("A", wa, a)):
            sol = solution_of(file.path, file.data)
            failed = _provide_build(sol, w, device, options, workers)
            if failed is not None:
                return not_compared(f"{file.path}: {failed.message}")
            staged = w.stage_solution(sol.path, sol.data)
            reply = load_candidate(w, ctx, staged, task.path, options)
            if not reply.get("ok"):
                return not_compared(f"{file.path}: {reply.get('message')}")
            programs.append(Program(name, w))
        timing, reasons = time_variant(ctx, programs, options.timing, rng, tol, options.timeout_s)
    except WorkerDied as died:
        return not_compared(died.message)
    finally:
        wa.close()
        wb.close()
    if timing is None or reasons:
        return not_compared("; ".join(r.message for r in reasons), exit_of(reasons))
    sp = next(s for s in timing.speedups if s.baseline == "A")
    return ComparePair(True, "", sp, timing.baselines["A"].median_ms, timing.candidate.median_ms, variant)


def _provide_build(
    sol: SolutionFile, worker: WorkerProcess, device: str, options: EvalOptions, workers: WorkerSource
) -> Reason | None:
    """A CUDA or native solution's build, into a worker that has not loaded it yet (a cache hit
    after its evaluation); the reason when it cannot be provided."""
    if not needs_build(sol.triage.backend):
        return None
    pending = workers.build(sol, device, options)
    if pending is None:
        return None
    result = pending.future.result()
    failed = failure(result, sol.source)
    if failed is not None:
        return failed
    return provide(pending, result, worker, options.timeout_s).failure
