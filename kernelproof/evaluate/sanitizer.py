"""Optional step after correctness: the first case again under compute-sanitizer (``--sanitize``, GPU).

A kernel can pass every comparison and still read memory it never wrote or race with itself;
compute-sanitizer's memcheck, racecheck and initcheck see those directly. It runs in a worker of
its own (the tool wraps the process), on the last planned case (a small variant).
"""

from __future__ import annotations

from collections.abc import Callable

from kernelproof.evaluate.step_records import Checked, Setup
from kernelproof.evaluate.worker_requests import encode_args, load_candidate
from kernelproof.host.process import WorkerProcess
from kernelproof.options import EvalOptions
from kernelproof.solution import SolutionFile
from kernelproof.verify.case_plan import make_inputs, run_model
from kernelproof.wire.expected import Expected


def sanitize_first_case(
    setup: Setup,
    checked: Checked,
    options: EvalOptions,
    device: str,
    solution: SolutionFile,
    prepare: Callable[[WorkerProcess], None] | None = None,
) -> Checked:
    """`checked` with what compute-sanitizer found added. `prepare` gives the sanitizer's worker the
    solution's build, as the evaluation's own worker got it."""
    from kernelproof.verify.sanitize import sanitize

    case = setup.cases[-1]  # the last planned case: a small variant
    ctx = setup.contexts[case.variant]

    def run_first_case(worker: WorkerProcess, timeout_s: float) -> None:
        worker.wait_ready(timeout_s)
        if prepare is not None:
            prepare(worker)
        staged = worker.stage_solution(solution.path, solution.data)  # the bytes the evaluation judges
        reply = load_candidate(worker, ctx, staged, setup.task.path, options)
        if not reply.get("ok"):
            return
        args = make_inputs(ctx, case.distribution, case.seed)
        spec, tensors = encode_args(args)
        expect = Expected.like(run_model(ctx.reference, args, ctx.precision, ctx.inplace))
        worker.request(
            {"op": "run", "args": spec, "repeats": 1, "poison_bytes": ctx.output_nbytes},
            tensors,
            timeout_s,
            expect,  # a reply carries only the outputs the request expects (wire/schemas.py)
        )

    reasons, notes = sanitize(run_first_case, device)
    return checked.with_findings(tuple(reasons), tuple(notes))
