"""The records one evaluation's steps hand each other: each frozen, each made by one step.

An evaluation is a chain (kernelproof/evaluate/chain.py): setup -> build -> correctness ->
timing -> finish. Each step takes the records it needs and returns a new one; none changes what
it was given, so what a step saw is what the verdict says it saw. A step that decides the verdict
early returns :class:`Stopped` instead of its record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelproof.verdict import (
    BuildRecord,
    CaseResult,
    Claims,
    Coverage,
    Outcome,
    Reason,
    Roofline,
    Speedup,
    Timing,
)

if TYPE_CHECKING:
    import torch

    from kernelproof.build import BuildResult
    from kernelproof.evaluate.build import PendingBuild
    from kernelproof.solution import SolutionFile
    from kernelproof.task import Task
    from kernelproof.verdict import FileRef
    from kernelproof.verify.case_plan import Case, VariantContext
    from kernelproof.verify.oracle_compare import Tolerance


@dataclass(frozen=True)
class Stopped:
    """A verdict decided before the candidate's worker ran: a broken task, a solution that does
    not parse or build."""

    outcome: Outcome  # FAIL (the solution's fault) or ERROR (the task's)
    reason: Reason  # why
    flags: tuple[str, ...] = ()  # what was observed before the stop
    task_sha256: str = ""  # the task's hash, once it loaded
    built: Built | None = None  # the build, where its failure is the stop (a large task's, awaited first)


@dataclass(frozen=True)
class Solution:
    """The solution as read, before anything of it ran (the first thing every verdict needs)."""

    file: SolutionFile  # source, hash, static triage
    ref: FileRef  # path, hash and backend, as the verdict shows them
    flags: tuple[str, ...]  # what triage observed (flags, never failures)


@dataclass(frozen=True)
class Setup:
    """The task made ready in the parent: variants, reference and oracle, the audit passed, cases planned."""

    task: Task
    task_ref: FileRef
    solution: Solution
    seed: int  # the evaluation's secret seed (written into the verdict afterwards)
    device: torch.device
    mode: str  # "train" | "eval", as the models run
    contexts: Mapping[str, VariantContext]  # shape variant -> reference, oracle, weights, input slots
    timed: tuple[str, ...]  # variants timed on this device
    cases: tuple[Case, ...]  # the correctness plan
    timing_seed: int  # seeds the timing step's own random stream (call seeds, projections)
    pending_build: PendingBuild | None  # the build submitted at setup (CUDA and native backends)
    flags: tuple[str, ...]  # observations so far (triage, dropped auto variants, in-place findings)
    random_reference: bool = False  # the reference draws random numbers: evaluated in eval() mode
    footprint_bytes: int = 0  # GPU memory the evaluation takes, parent and workers (0 on the CPU)
    correctness_bytes: int = 0  # of it, what its correctness cases take (the timed rounds may take more)
    profile_bytes: int = 0  # the cases' and one profiled call's (a solution with no kernel of its own)
    handoff_bytes: int = 0  # of them, the parent's own buffers for the worker's handoff (expected)
    shapes_probed: tuple[str, ...] = ()  # auto variants (perturbed size constants) run besides the task's
    shapes_in_contract: bool = False  # a failure on them fails the candidate (--shape-variants auto)
    probe_cases: tuple[Case, ...] = ()  # the probed shapes' cases, when they are not in the contract


@dataclass(frozen=True)
class Built:
    """The solution's build, as provided to the candidate's worker (CUDA and native backends)."""

    result: BuildResult | None  # None: nothing to build (Triton, plain torch)
    record: BuildRecord | None  # what the verdict says of the build
    failure: Reason | None = None  # the build rejects the solution
    flags: tuple[str, ...] = ()  # e.g. a tampered cache entry rebuilt


@dataclass(frozen=True)
class Checked:
    """Every planned case run in the candidate's worker and judged in the parent against the oracle."""

    cases: tuple[CaseResult, ...]  # judged cases, in order; the first failure ends the run
    reasons: tuple[Reason, ...]  # why the candidate fails, if it does
    flags: tuple[str, ...]  # observations (skipped cases, weights not copied, ...)
    tolerances: Mapping[
        str, Tolerance
    ]  # variant -> the widest tolerance its cases used (timing checks outputs at it)
    kernelbench_ok: bool  # KernelBench's own allclose rule accepted every case (when asked)
    worker_build: Mapping[str, Any] | None = None  # the worker's account of its import (prebuilt or compiled)
    failed_case: str = ""  # the case whose failure ended the run ("" when none did)

    @property
    def passed(self) -> bool:
        return not self.reasons and bool(self.cases) and all(c.passed for c in self.cases)

    def with_findings(self, reasons: tuple[Reason, ...], flags: tuple[str, ...]) -> Checked:
        """This record with a later check's findings added (the sanitizer's)."""
        from dataclasses import replace

        return replace(self, reasons=self.reasons + reasons, flags=self.flags + flags)


@dataclass(frozen=True)
class Probed:
    """The probed shapes run after the contract: does the candidate hold beyond the task's own shapes?"""

    cases_run: int  # probe cases run
    failure: str = ""  # the first failure ("" when every probe case passed), for the flag

    @property
    def flags(self) -> tuple[str, ...]:
        return (f"shape_specialized: {self.failure}",) if self.failure else ()


@dataclass(frozen=True)
class Timed:
    """The candidate timed against the baselines, on the roofline, with its launch accounting."""

    timing: Timing | None  # None: the timing did not complete (reasons say why), or was not run (not_timed)
    speedup: Mapping[str, Speedup] = field(default_factory=dict)  # per baseline and "best"
    roofline: Roofline | None = None
    coverage: Coverage | None = None
    reasons: tuple[Reason, ...] = ()
    flags: tuple[str, ...] = ()
    claims: Claims | None = None  # what the verdict claims (measure/claims.py)
