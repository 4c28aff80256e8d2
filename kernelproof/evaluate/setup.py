"""Step 1, setup: read the solution, make the task ready in the parent, plan the cases.

Everything here runs in the trusted parent before any candidate code: the task's shape variants
with their reference and float64 oracle (I2), the task's audit (negative controls: a task that
cannot tell right from wrong is not scored), and the case plan drawn from the secret seed. A
broken task ends the evaluation here as ``task_error``; a solution that does not parse, as
``compile_error``. A CUDA or native solution's build is submitted first, so it compiles while
this step runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof.errors import TaskError
from kernelproof.evaluate import machine
from kernelproof.evaluate.build import PendingBuild, awaited, needs_build
from kernelproof.evaluate.correctness import LARGE_CASE_BYTES
from kernelproof.evaluate.step_records import Setup, Solution, Stopped
from kernelproof.evaluate.workers import WorkerSource
from kernelproof.inputs import slot_bytes
from kernelproof.measure.session import calls_for
from kernelproof.options import EvalOptions, TimingPolicy, cold_baselines
from kernelproof.solution import solution_of
from kernelproof.store import db_path
from kernelproof.submission import Submitted
from kernelproof.task import Task, auto_variant_base, load_task, variants_for, with_auto_variants
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode
from kernelproof.verify import audit as task_audit
from kernelproof.verify import fastpath, reference_facts, steps
from kernelproof.verify import footprint as case_memory
from kernelproof.verify.audit_store import AuditStore
from kernelproof.verify.case_plan import (
    VariantContext,
    allowed_distributions,
    build_variant,
    check_batch_separable,
    inplace_findings,
    make_inputs,
    plan_cases,
    reference_and_oracle,
    reference_randomness,
)
from kernelproof.verify.contract import judged
from kernelproof.verify.oracle import Randomness
from kernelproof.wire import handoff
from kernelproof.wire.protocol import BULK_MIN_BYTES


def read(solution: Submitted) -> Solution:
    """The solution's bytes, read once by the caller (kernelproof/submission.py), and what static
    triage observed in them (flags only: runtime checks decide)."""
    sol = solution_of(solution.path, solution.data)
    flags = [f"triage {f.render()}" for f in sol.triage.findings]
    if sol.triage.backend == "torch":
        flags.append("plain_torch: the solution defines no Triton or CUDA kernel")
    return Solution(sol, FileRef(sol.path, sol.sha256, sol.triage.backend), tuple(flags))


ENTRY_POINT = "ModelNew"
# The worker's own words for it (worker/program.py), said here before any worker starts: a file
# that never names the class cannot define it, and seconds of worker setup would tell nothing more.
NO_ENTRY_POINT = "the solution defines no class `ModelNew` (KernelBench's required entry point)"


def prepare(
    task_file: Submitted,
    solution: Solution,
    options: EvalOptions,
    seed: int,
    device: str,
    workers: WorkerSource,
    admit: Callable[[int], float] | None = None,
) -> Setup | Stopped:
    """The task ready and the cases planned from `seed`, or the early verdict (task_error,
    compile_error, degenerate_task). `admit(nbytes)` holds that much of the device's memory for
    the evaluation before setup allocates any: the meta device's estimate of what the whole
    evaluation holds (kernelproof/verify/footprint.py, ``evaluation_bytes``), not the floor of one
    case, so that evaluations that cannot fit together do not set up together.

    In the steps it records: footprint, admission, shapes, build_models (with probe, inplace,
    randomness, chunk_check), audit, then the plan of the cases."""
    read_task = _read_task(task_file, solution, options)
    if isinstance(read_task, Stopped):
        return read_task
    task, flags = read_task
    dev = torch.device(device)
    variants = variants_for(task, dev.type)
    with steps.step("footprint"):
        need = case_memory.case_need(task, variants, device)
    if need.too_large:  # decided on the meta device, before any full-size tensor exists
        reason = Reason(ReasonCode.TOO_LARGE, case_memory.refusal_message(need, device))
        return Stopped(Outcome.ERROR, reason, tuple(flags), task.sha256)
    pending = None
    if needs_build(solution.file.triage.backend):
        # Submitted now (or already, by evaluate_many): it builds while the task is set up.
        pending = workers.build(solution.file, device, options)
        if workers.beyond_share(need.evaluation_bytes, device, options.per_device):
            # its setup overlapping nvcc would keep the others off that memory for the build's
            # length, and for nothing where the build fails (level 1's 6.4 GB-a-tensor tasks
            # reserve 90 GB of an H200's 141)
            with steps.step("build_wait"):
                failed = _failed_build(pending, solution, device, tuple(flags), task.sha256)
            if failed is not None:
                return failed
    if admit is not None:
        with steps.step("admission"):
            admit(need.evaluation_bytes or 0)
    rng = random.Random(seed)
    init_seed = rng.getrandbits(31)
    mode = "eval" if options.eval_mode else task.meta.mode
    audits = AuditStore.beside(db_path(options.db))  # earlier runs' audits, in the results store
    # Untimed GPU work (shapes, references, the audit, inputs) is shared with other evaluations
    # on this device; timing has the GPU to itself (host/gate.py).
    with steps.entered(workers.gate(device).shared(), "device_wait"):
        peak = _PeakMemory(dev)
        shapes_probed: tuple[str, ...] = ()
        if options.shape_variants in ("auto", "probe"):
            base = auto_variant_base(task, variants)  # the smallest shapes
            with steps.step("shapes"):
                task, shapes_probed = _auto_variants(task, base, dev, mode, init_seed, flags, need.case_bytes)
            variants = tuple(variants) + shapes_probed
        timed = tuple(
            v
            for v in (task.meta.timed if dev.type == "cuda" else task.meta.cpu[:1])
            if v in task.meta.variants
        )
        try:
            models = _build_models(task, variants, dev, mode, init_seed, rng, options, flags)
            if isinstance(models, Stopped):
                return models
            audited = _audit(task, models, variants, shapes_probed, rng, audits, options, flags)
            if isinstance(audited, Stopped):
                return audited
            plan = _plan(task, models.probe, audited, timed, dev, options, rng, flags)
            buffers = handoff_bytes(audited.contexts.values(), dev, need.estimate)  # beside torch's
            correctness, profile, footprint = _footprints(
                audited.contexts, timed, peak.bytes() + buffers, need, options
            )
        except TaskError as exc:
            return Stopped(Outcome.ERROR, Reason(ReasonCode.TASK_ERROR, str(exc)), tuple(flags), task.sha256)
    return Setup(
        task=task,
        task_ref=FileRef(task_file.path, task.sha256, ""),
        solution=solution,
        seed=seed,
        device=dev,
        mode=models.mode,
        contexts=audited.contexts,
        timed=timed,
        cases=tuple(plan.cases),
        timing_seed=rng.getrandbits(62),
        pending_build=pending,
        flags=tuple(flags),
        random_reference=models.random_reference,
        footprint_bytes=footprint,
        correctness_bytes=correctness,
        profile_bytes=profile,
        handoff_bytes=buffers,
        shapes_probed=audited.shapes_probed,
        shapes_in_contract=options.shape_variants == "auto",
        probe_cases=tuple(plan.probe_cases),
    )


def _read_task(
    task_file: Submitted, solution: Solution, options: EvalOptions
) -> tuple[Task, list[str]] | Stopped:
    """The task in the contract it is judged in, and the flags so far; or the verdict of a task
    that does not load or a solution that cannot run (it does not parse, or never names the class)."""
    try:
        # the contract it is judged in: --precision, else its declared one, else its own dtypes
        task = judged(load_task(task_file.path, task_file.data), options.precision)
    except TaskError as exc:
        return Stopped(Outcome.ERROR, Reason(ReasonCode.TASK_ERROR, str(exc)), solution.flags)
    flags = list(solution.flags)
    syntax_error = solution.file.triage.syntax_error
    if syntax_error:
        where = f"{solution.ref.path}:{syntax_error.removeprefix('line ')}"  # path:line: message
        reason = Reason(ReasonCode.COMPILE_ERROR, f"the solution does not parse: {where}")
        return Stopped(Outcome.FAIL, reason, tuple(flags), task.sha256)
    if ENTRY_POINT not in solution.file.source:  # the name nowhere: no worker can find the class
        reason = Reason(ReasonCode.COMPILE_ERROR, NO_ENTRY_POINT)
        return Stopped(Outcome.FAIL, reason, tuple(flags), task.sha256)
    return task, flags


@dataclass
class _Models:
    """Every variant's reference and oracle built, and what the probe's inputs told of the task."""

    contexts: dict[str, VariantContext]
    probe: list[Any]  # the probe variant's inputs, drawn from the secret seed
    mode: str  # "eval" where a random reference turned dropout off
    random_reference: bool


@dataclass
class _Audited:
    """The contexts judged after the audit (a variant's weights maybe drawn again), and the
    variants left: a probed shape that fails its audit is dropped."""

    contexts: dict[str, VariantContext]
    variants: tuple[str, ...]
    shapes_probed: tuple[str, ...]


@dataclass
class _Plan:
    cases: list[Any]
    probe_cases: list[Any]  # one light case per probed shape (--shape-variants probe)


def _failed_build(
    pending: PendingBuild, solution: Solution, device: str, flags: tuple[str, ...], task_sha256: str
) -> Stopped | None:
    """The stop of a solution whose build failed (compile_error, its log; a build's violation or
    timeout), awaited before setup; None where it built, or where this machine cannot build what
    it asks for (the pipeline says ``environment`` after setup, as for every task)."""
    built = awaited(pending, solution.file)
    if built.failure is None or machine.unmet(built.result, device) is not None:
        return None
    return Stopped(Outcome.FAIL, built.failure, flags, task_sha256, built)


def _build_models(
    task: Task,
    variants: tuple[str, ...],
    dev: torch.device,
    mode: str,
    init_seed: int,
    rng: random.Random,
    options: EvalOptions,
    flags: list[str],
) -> _Models | Stopped:
    """The steps build_models, probe, inplace, randomness and chunk_check: the references and
    oracles, and the task's own questions asked at the probe variant's inputs."""
    with steps.step("build_models"):
        contexts = {v: build_variant(task, v, dev, mode, init_seed) for v in variants}
    first = contexts[probe_variant(task, variants)]
    with steps.step("probe"):
        probe = make_inputs(first, "task", rng.getrandbits(62), on_device=True)
    # the task's own answers, once per task in this process (kernelproof/verify/reference_facts.py)
    with steps.step("inplace"):
        flags += reference_facts.once("inplace", task, first, lambda: inplace_findings(first, probe))
    with steps.step("randomness"):
        randomness = reference_facts.once(
            "randomness", task, first, lambda: reference_randomness(first, probe)
        )
    random_reference = randomness.random
    if random_reference:
        stop = _random_reference(randomness, mode, options, flags, task.sha256)
        if stop is not None:
            return stop
        mode = "eval"  # dropout off in the reference, the oracle and ModelNew alike
        contexts = {v: build_variant(task, v, dev, mode, init_seed) for v in variants}
        first = contexts[probe_variant(task, variants)]
        randomness = reference_facts.once(
            "randomness", task, first, lambda: reference_randomness(first, probe)
        )
        if randomness.random:
            reason = Reason(
                ReasonCode.TASK_ERROR,
                "the reference's output depends on the random number generator even in eval() "
                f"mode (runs under different seeds differ by {min(randomness.other_seed_rel_norm):.3g}, "
                f"the tolerance is {randomness.tolerance_rel_norm:.3g}): outputs cannot be compared",
            )
            return Stopped(Outcome.ERROR, reason, tuple(flags), task.sha256)
    with steps.step("chunk_check"):
        separable = check_batch_separable(first, probe)  # at a small shape, never assumed
    for ctx in contexts.values():
        ctx.noise = randomness.noise  # rounding between runs: part of the reference's own error
        ctx.batch_separable = separable
    return _Models(contexts, probe, mode, random_reference)


def _audit(
    task: Task,
    models: _Models,
    variants: tuple[str, ...],
    shapes_probed: tuple[str, ...],
    rng: random.Random,
    audits: AuditStore | None,
    options: EvalOptions,
    flags: list[str],
) -> _Audited | Stopped:
    """The audit step, variant by variant: a degenerate one's weights drawn again; a probed shape
    still degenerate is dropped, a shape of the task's own makes it degenerate_task."""
    contexts, probe = models.contexts, models.probe
    first: VariantContext | None = contexts[probe_variant(task, variants)]
    for v in variants:
        # the probe's inputs (drawn from the secret seed, held here anyway) are the
        # audit's first on its variant: one get_inputs() call fewer (fastpath.py)
        shared = probe if fastpath.ENABLED and contexts[v] is first else None
        with steps.step("audit"):
            report = task_audit.audit_variant(task, contexts[v], rng.getrandbits(62), audits, shared)
        if report.degenerate:
            # the first draw's reference and oracle are let go before another is built
            # (`first` is read only for this variant's audit, done)
            order = list(contexts)
            first = None if contexts[v] is first else first
            report, redrawn = _draw_weights_again(task, v, contexts.pop(v), report, rng, audits, flags)
            if redrawn is not None:
                contexts[v] = redrawn
                contexts = {k: contexts[k] for k in order}
        if report.degenerate and v in shapes_probed and options.shape_variants == "probe":
            flags.append(f"auto shape variant {v!r} not probed: it fails its audit ({report.summary()})")
            # neither probed nor part of the contract: no case is planned for it (its
            # context went with its last draw)
            shapes_probed = tuple(x for x in shapes_probed if x != v)
            variants = tuple(x for x in variants if x != v)
            continue
        if report.degenerate:
            reason = Reason(
                ReasonCode.DEGENERATE_TASK, f"shape variant {v!r} fails its audit: {report.summary()}"
            )
            return Stopped(Outcome.ERROR, reason, tuple(flags), task.sha256)
    return _Audited(contexts, variants, shapes_probed)


def _plan(
    task: Task,
    probe: list[Any],
    audited: _Audited,
    timed: tuple[str, ...],
    dev: torch.device,
    options: EvalOptions,
    rng: random.Random,
    flags: list[str],
) -> _Plan:
    """The correctness cases drawn from the secret seed over the variants of the contract, and
    the probed shapes' own; the oracle's notes added to the flags."""
    flags += sorted({c.oracle_note for c in audited.contexts.values() if c.oracle_note})
    dists = allowed_distributions(task, len(probe), options.distributions)
    light = set(timed) if dev.type == "cuda" else set()
    contract = tuple(
        v for v in audited.variants if options.shape_variants == "auto" or v not in audited.shapes_probed
    )
    cases = plan_cases(contract, light, dists, options.seeds_per_case, rng)
    probe_cases = []
    if options.shape_variants == "probe":  # one light case per probed shape
        probe_dists = tuple(d for d in ("normal", "task") if d in dists)[:1] or dists[:1]
        probe_cases = plan_cases(audited.shapes_probed, set(), probe_dists, 1, rng)
    return _Plan(cases, probe_cases)


WEIGHT_DRAWS = 4  # draws of a variant's weights before its task is refused under every one


def _draw_weights_again(
    task: Task,
    variant: str,
    ctx: VariantContext,
    report: task_audit.AuditReport,
    rng: random.Random,
    audits: AuditStore | None,
    flags: list[str],
) -> tuple[task_audit.AuditReport, VariantContext | None]:
    """Weights drawn again for `variant`, whose audit under the evaluation's first draw of them
    is degenerate: some tasks are degenerate under some draws only (KernelBench's level-2 task 58
    clamps every output for about a third of them). The harness owns the weights (I3): it may
    judge the candidate under any draw from its secret seed, and judges it under one that can tell
    right from wrong.

    Each draw is first checked with the controls that need only the reference
    (audit.check_these_weights). A draw that passes them, after a stored report that was sound,
    is judged; after a degenerate report (its controls under clamping weights all pass, the other
    weights' and bf16's too), the whole audit runs again under it and is kept instead, and its
    verdict stands: degenerate there too, the task is. Returns the last report and the context of
    the draw judged (None when none was: a report whose reason names the draws); the verdict's
    flags say that the weights were drawn again. `ctx` (the first draw's) is released here,
    before the next draw is built: at KernelBench's sizes a reference and its float64 oracle can
    hold GBs of weights."""
    why = "controls that passed the comparison: " + ", ".join(report.passed())
    stored_sound = report.these_weights  # the task's kept audit is sound, this draw was not
    device, mode, noise, separable = ctx.device, ctx.mode, ctx.noise, ctx.batch_separable
    del ctx
    for draw in range(2, WEIGHT_DRAWS + 1):
        with steps.step("audit/redraw"):
            redrawn = build_variant(task, variant, device, mode, rng.getrandbits(31))
            redrawn.noise, redrawn.batch_separable = noise, separable
            report = task_audit.check_these_weights(task, redrawn, rng.getrandbits(62))
        if report.degenerate:
            del redrawn
            continue
        if not stored_sound:
            with steps.step("audit/redraw/whole"):
                report = task_audit.audit_variant(task, redrawn, rng.getrandbits(62), audits, refresh=True)
            if report.degenerate:
                return report, None
        flags.append(
            f"weights drawn again for shape variant {variant!r}: the evaluation's first draw of them left "
            f"its outputs unable to tell right from wrong ({why}); judged under draw {draw}"
        )
        return report, redrawn
    return task_audit.AuditReport(
        report.task, report.variant, True, report.controls, these_weights=True, draws=WEIGHT_DRAWS
    ), None


def _random_reference(
    randomness: Randomness, mode: str, options: EvalOptions, flags: list[str], task_sha256: str
) -> Stopped | None:
    """A reference whose outputs depend on the RNG: refused when asked (or when already in eval()
    mode, where nothing is left to turn off), else flagged and evaluated in eval() mode."""
    differ = min(randomness.other_seed_rel_norm)
    if options.refuse_random_reference or mode == "eval":
        reason = Reason(
            ReasonCode.TASK_ERROR,
            f"the reference is random (runs under different seeds differ by {differ:.3g}, beyond the "
            f"tolerance {randomness.tolerance_rel_norm:.3g}; dropout in training mode?): outputs cannot be "
            "compared element by element"
            + (
                "" if mode == "eval" else "; without --refuse-random-reference it is evaluated in eval() mode"
            ),
        )
        return Stopped(Outcome.ERROR, reason, tuple(flags), task_sha256)
    flags.append(
        f"random_reference: the reference's output depends on the random number generator (runs under "
        f"different seeds differ by {differ:.3g}, beyond the tolerance {randomness.tolerance_rel_norm:.3g}: "
        "dropout in training mode); evaluated in eval() mode, the reference, the oracle and ModelNew alike"
    )
    return None


class _PeakMemory:
    """The parent's peak GPU memory since this was made (process-wide: another evaluation's
    allocations in the meantime count too, so it errs on the large side)."""

    def __init__(self, dev: torch.device) -> None:
        self.dev = dev
        if dev.type == "cuda":
            self.base = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)

    def bytes(self) -> int:
        if self.dev.type != "cuda":
            return 0
        return max(0, torch.cuda.max_memory_allocated(self.dev) - self.base)


def _footprints(
    contexts: dict[str, VariantContext],
    timed: tuple[str, ...],
    parent_bytes: int,
    need: case_memory.Need,
    options: EvalOptions,
) -> tuple[int, int, int]:
    """(correctness, profile, whole): the device memory the evaluation's correctness cases take; the
    cases' and one more call's, with the program loaded again (what a solution with no kernel of
    its own holds when its one profiled call refuses it, before any batch or baseline: kernelproof/
    evaluate/timing.py); and the largest of these and its timed rounds' (reserved when the timing
    starts: kernelproof/evaluate/chain.py). Its largest case, never the sum; never below what the
    meta device's sizes say, since a variant whose inputs setup never drew (its audit served from
    the store) has no slots to count yet."""
    correctness = max(footprint_bytes(contexts.values(), parent_bytes), need.evaluation_bytes or 0)
    programs = 0 if options.correctness_only else 1 + len(cold_baselines(options.baselines))
    rounds = [contexts[v] for v in timed if v in contexts]
    meta = need.estimate
    floor = (
        0
        if meta is None
        else case_memory.timed_bytes(meta, programs, calls_for(meta.input_bytes, options.timing))
    )
    timed_bytes = timed_footprint_bytes(rounds, parent_bytes, programs, options.timing)
    whole = max(correctness, timed_bytes, floor)
    one_call = max([sum(_case_sizes(ctx)) for ctx in rounds], default=0)
    if meta is not None:
        one_call = max(one_call, meta.input_bytes + meta.weight_bytes + meta.output_bytes)
    return correctness, min(whole, correctness + one_call), whole


def timed_footprint_bytes(
    contexts: list[VariantContext], measured_parent_bytes: int, programs: int, policy: TimingPolicy
) -> int:
    """GPU memory the timed rounds take at their largest shape: the parent's share (its references
    and oracles stay held, and its checks of a batch draw a case), and in each timed program's
    worker, the candidate's and each cold baseline's, the weights and a batch's calls, each with
    its fresh inputs and its outputs, kept until the batch is checked (measure/session.py,
    ``calls_per_batch``), and a small last batch kept beside it (case_memory.timed_worker_share).
    The candidate's worker lets go of what its cases kept before it loads
    for its timed rounds (kernelproof/worker/loading.py, ``_let_go``): counted beside the batch,
    that share made KernelBench level1/38_L1Norm_'s timed rounds 189 GB, more than an H200 has.
    0 with no program timed."""
    if programs <= 0 or not contexts:
        return 0
    parent = workers = 0
    for ctx in contexts:
        inp, w, out = _case_sizes(ctx)  # a timed call's inputs are a case's (calls_per_batch)
        parent = max(parent, case_memory.parent_share(inp, w, out))
        workers = max(workers, case_memory.timed_worker_share(inp, w, out, programs, calls_for(inp, policy)))
    return max(parent, measured_parent_bytes) + workers


def footprint_bytes(contexts, measured_parent_bytes: int) -> int:
    """GPU memory an evaluation of this task takes at its largest variant, parent and worker together.

    The parent's share is what setup measured while the reference and the float64 oracle ran
    (activations included), floored by what its correctness cases hold at once: the inputs, the
    weights and the outputs of the reference, the same in float64 for the oracle, and two runs of
    the candidate's outputs. The worker's share is estimated: the weights, the inputs three times
    (this case's, their saved copies, and the previous case's first-run inputs that its second run
    reuses: B1), two runs of outputs and a spare poisoned block of their size (kernelproof/worker/
    case_runs.py; its fingerprints and checksums take a chunk at a time).
    """
    parent = worker = 0
    for ctx in contexts:
        inp, w, out = _case_sizes(ctx)
        parent = max(parent, case_memory.parent_share(inp, w, out))
        worker = max(worker, case_memory.worker_share(inp, w, out))
    return max(parent, measured_parent_bytes) + worker


def handoff_bytes(contexts, dev: torch.device, meta: case_memory.Estimate | None = None) -> int:
    """The parent's own device buffers for the worker's handoff (kernelproof/wire/handoff.py) that
    the cases and timed fetches of these variants make, kept until the worker exits: a task case's
    large inputs lent, outputs offered. cudaMallocs outside torch's allocator, so setup's measure of
    the parent never sees them; counted beside it. KernelBench's 47_Sum (an 8.6 GB input, a few
    KB out) holds its input's buffer through its timed rounds: uncounted, eager ran out of memory
    on an H100.

    Never below what the meta device's sizes of the largest variant (`meta`) make: a variant whose
    inputs setup never drew (its audit served) has no slots to count. Uncounted there, 47_Sum's
    second candidate in a process was admitted at 77 GB on an H100's 78, where its first had been
    86 GB and ``too_large``, and an honest kernel's timed call ran out of memory."""
    if dev.type != "cuda" or not handoff.available():
        return 0
    held = 0
    for ctx in contexts:
        inp, _, out = _case_sizes(ctx)
        held += _lent(inp, out)
    return max(held, 0 if meta is None else _lent(meta.input_bytes, meta.output_bytes))


def _lent(input_bytes: int, output_bytes: int) -> int:
    """The handoff buffers one case of these sizes makes in the parent: its inputs where the case is
    large, its outputs from the wire's bulk size."""
    return (input_bytes if input_bytes > LARGE_CASE_BYTES else 0) + (
        output_bytes if output_bytes >= BULK_MIN_BYTES else 0
    )


def _case_sizes(ctx: VariantContext) -> tuple[int, int, int]:
    """(inputs, weights, outputs) of one case of a variant, in bytes, from what setup drew of it
    (every input slot, fixed ones too: what a worker holds for one call)."""
    w = sum(t.numel() * t.element_size() for t in ctx.weight_tensors)
    return sum(slot_bytes(s) for s in ctx.slots), w, sum(ctx.output_nbytes)


PROBE_CASE_BYTES = 64 * 2**20  # a probed shape's case is made at most about this large (meta estimate)
PROBE_MAX_SHRINK = 2**12
PROBE_ESTIMATE_S = 5.0  # the meta device's estimates for choosing the shrink stop after this long
PROBE_LEAST_GAIN = 0.95  # a halving that keeps more than this share of the bytes is not taken


def probe_shrink(task: Task, base: str, base_bytes: int | None) -> int:
    """By how much the probed shapes' sizes are divided: the least power of two that brings one
    case of the larger probe (``auto_odd``) to ``PROBE_CASE_BYTES`` or less by the meta device's
    estimate. `base_bytes` is the task's own estimate: a task already that small (or one with no
    estimate) is probed at its sizes without another estimate. A halving that barely shrinks the
    case (weights that do not follow the sizes) is not taken, and the estimates stop after
    ``PROBE_ESTIMATE_S`` (on meta an LSTM of 512 steps took seconds each)."""
    if base_bytes is None or base_bytes <= PROBE_CASE_BYTES:
        return 1
    import time

    started, shrink, last = time.monotonic(), 1, base_bytes
    while shrink < PROBE_MAX_SHRINK and time.monotonic() - started < PROBE_ESTIMATE_S:
        shrunk, extra = with_auto_variants(task, base, 2 * shrink)
        if "auto_odd" not in extra:
            break
        est = case_memory.estimate_variant(shrunk, "auto_odd")
        if isinstance(est, str) or est.case_bytes() > PROBE_LEAST_GAIN * last:
            break
        shrink, last = 2 * shrink, est.case_bytes()
        if last <= PROBE_CASE_BYTES:
            break
    return shrink


def _auto_variants(
    task: Task,
    base: str,
    dev: torch.device,
    mode: str,
    init_seed: int,
    flags: list[str],
    base_bytes: int | None,
) -> tuple[Task, tuple[str, ...]]:
    """The task with perturbed size constants as extra variants, keeping those its reference accepts.

    Where the reference rejects every probe at a shrink (sizes that must divide each other, say)
    they are made again at half that shrink, down to the task's own sizes."""
    shrink = probe_shrink(task, base, base_bytes)
    while True:
        shrunk, extra = with_auto_variants(task, base, shrink)
        kept, dropped = [], []
        for v in extra:
            try:
                ctx: VariantContext = build_variant(shrunk, v, dev, mode, init_seed)
                reference_and_oracle(ctx, make_inputs(ctx, "normal", 1))
                kept.append(v)
            except TaskError as exc:
                dropped.append(f"auto shape variant {v!r} dropped: the reference rejects it ({exc})")
        if kept or shrink == 1:
            break
        shrink //= 2
    flags += dropped
    if shrink > 1:
        flags.append(
            f"auto shape variants at the task's sizes divided by {shrink} (probes of at most about "
            f"{PROBE_CASE_BYTES // 2**20} MiB a case; the task's own shapes are checked at full size)"
        )
    return shrunk, tuple(kept)


def probe_variant(task: Task, variants: tuple[str, ...]) -> str:
    """The shape on which the task's own questions are asked (does its reference update inputs in
    place, is it random, how many inputs): its first CPU variant where one is checked here, the
    task's small shapes; else the first. get_inputs() runs on the CPU, and at a GPU task's timed
    shape it took 1.8 s on the H200 host, a cost the correctness phase pays once anyway."""
    return next((v for v in task.meta.cpu if v in variants), variants[0])
