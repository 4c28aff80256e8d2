"""After the contract: do the candidate's kernels hold beyond the task's own shapes?

KernelBench files fix their shapes, and under KernelBench's rules a kernel written for them is
legitimate (vectorised loads without tail handling, tensor-core tiles, one-shape CUDA graphs). But
a kernel written only for the published row length then passes everywhere, and an agent told that
other sizes are tested learns nothing when they are not. So every evaluation also runs one case on
each probed shape (the task's smallest shapes with their size constants perturbed: odd, and about
half), once the task's own shapes passed: a failure there is the flag ``shape_specialized``, naming
the shape and the first failure, and the verdict stands (``--shape-variants auto`` makes the same
shapes part of the contract instead: kernelproof/evaluate/correctness.py).
"""

from __future__ import annotations

from kernelproof.evaluate.correctness import run_cases, specialized
from kernelproof.evaluate.step_records import Probed, Setup
from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.options import EvalOptions
from kernelproof.verdict import Reason, ReasonCode
from kernelproof.wire.protocol import ProtocolError


def probe_shapes(setup: Setup, worker: WorkerProcess, staged: str, options: EvalOptions) -> Probed:
    """One case per probed shape in the candidate's worker; a crash there ends the probe, not the verdict."""
    if not setup.probe_cases:
        return Probed(0)
    try:
        checked = run_cases(setup, setup.probe_cases, worker, staged, options, what="probed-shape case")
    except WorkerDied as died:
        variant = next((c.variant for c in setup.probe_cases), "")
        reason = Reason(ReasonCode(died.code), died.message)
        return Probed(len(setup.probe_cases), _said(setup, variant, reason))
    except ProtocolError as exc:
        worker.kill()
        reason = Reason(ReasonCode.CRASH, f"the worker broke the protocol: {exc}")
        return Probed(len(setup.probe_cases), _said(setup, setup.probe_cases[0].variant, reason))
    if not checked.reasons:
        return Probed(len(checked.cases))
    variant = checked.failed_case.split("/", 1)[0]
    return Probed(len(checked.cases), _said(setup, variant, checked.reasons[0]))


def _said(setup: Setup, variant: str, first: Reason) -> str:
    return specialized(setup, variant, first).message
