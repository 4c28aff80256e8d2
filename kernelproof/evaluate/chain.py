"""One evaluation, end to end: task and solution in, one verdict out.

    setup -> build -> [candidate worker: install build, correctness, sanitizer] -> timing -> finish

Each step returns a frozen record (kernelproof/evaluate/step_records.py) or a :class:`Stopped` that
decides the verdict early; this module only orders them, owns the candidate's worker for its one
use, and holds the device gate: shared around untimed GPU work, exclusive around timing. Pass only
by positive confirmation of every case (I9); any missing result is a failure (I1). Everything the
candidate can do wrong becomes a Reason; only the user's own mistakes and kernelproof's bugs raise.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch

from kernelproof.evaluate import machine, phase_progress
from kernelproof.evaluate.build import install_build, preparer, wait_for_build
from kernelproof.evaluate.build_requests import BuildService
from kernelproof.evaluate.correctness import check_correctness
from kernelproof.evaluate.device_turns import DeviceTurns
from kernelproof.evaluate.finish import Envelope, environment, settings_of, stopped_verdict, verdict_of
from kernelproof.evaluate.sanitizer import sanitize_first_case
from kernelproof.evaluate.setup import prepare, read
from kernelproof.evaluate.shapes import probe_shapes
from kernelproof.evaluate.step_records import Built, Checked, Probed, Setup, Stopped, Timed
from kernelproof.evaluate.timing import time_candidate
from kernelproof.evaluate.workers import WorkerSource
from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.options import EvalOptions
from kernelproof.submission import Submitted
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict
from kernelproof.verify import steps
from kernelproof.wire.protocol import ProtocolError


@dataclass
class _Phases:
    """Seconds from the evaluation's start to the end of each phase (the verdict's environment)."""

    started: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        phase_progress.began(self.started)

    def mark(self, name: str) -> None:
        self.marks[name] = time.monotonic() - self.started
        phase_progress.report(name.removesuffix("_s"), self.marks[name])


@dataclass(frozen=True)
class _Ran:
    """What happened in the candidate's worker."""

    built: Built  # the build as the worker got it
    checked: Checked
    timed: Timed | None  # None: not timed (a failure, or correctness only)
    probed: Probed  # the shapes beyond the contract
    died: Reason | None  # the worker died or broke the protocol
    worker: dict[str, Any] | None  # the worker's hello
    limits: str  # the resource limits applied to it
    sandbox: dict[str, Any] | None  # the containment layers it runs under, and whether each held
    # a CUDA build it asked for while it ran, which this machine cannot build or run (the build
    # service's record and the parent's facts: kernelproof/evaluate/build_requests.py)
    unmet: str | None = None


def evaluate_pair(
    task: Submitted, solution: Submitted, options: EvalOptions, device: str, workers: WorkerSource
) -> Verdict:
    """The verdict of one solution on one task, on one device, with workers from `workers`.

    Both files come as the bytes the caller read once (kernelproof/submission.py): those bytes are
    hashed into the verdict, built, staged into the worker and judged; no path is read again."""
    # One reservation of the device's memory for the whole evaluation, from before setup allocates,
    # grown as its phases need (kernelproof/executors/device_memory.py): setup's reference, oracle
    # and audit are the parent's largest allocations, and four of them at once took an H200 past
    # its memory.
    with steps.recording(task.path) as clock, workers.memory(device).hold(0) as held:
        return _evaluate(task, solution, options, device, workers, clock, held)


def _evaluate(
    task_file: Submitted,
    solution_file: Submitted,
    options: EvalOptions,
    device: str,
    workers: WorkerSource,
    clock: steps.StepClock,
    held: Any,
) -> Verdict:
    phases = _Phases()
    seed = options.seed if options.seed is not None else secrets.randbits(62)
    solution = read(solution_file)
    env = environment(device)
    env["steps"] = clock.totals  # filled in place as each step ends (kernelproof/verify/steps.py)
    envelope = Envelope(env, settings_of(options, seed, device), phases.started, options.kernelbench_compat)
    with steps.step("setup"):
        # the arrival: nothing of this evaluation is on the device yet, so it stands aside from
        # its slot while it waits for the memory (kernelproof/executors/device_memory.py)
        admit = partial(held.grow, aside=True)
        setup = prepare(task_file, solution, options, seed, device, workers, admit=admit)
    if isinstance(setup, Stopped):
        ref = FileRef(task_file.path, task_file.sha256)
        return stopped_verdict(setup, ref, solution.ref, envelope, setup.built)
    # Setup's temporaries (the audit's controls, the shape probes) stay reserved in the parent's
    # caching allocator, where the candidate's worker, another process, cannot use them: a
    # 4.3 GB-a-tensor task's setup peaked near 70 GB on an H200.
    give_back_cached(workers, device)
    policy = options.policy or setup.task.meta.policy  # the kernel policy that applies (--policy overrides)
    env.update(precision=setup.task.meta.precision, policy=policy, mode=setup.mode)
    phases.mark("setup_s")
    env["phases"] = phases.marks
    env["per_device"] = options.per_device  # evaluations in flight on this device (timing alone)
    with steps.step("build_wait"):
        built = wait_for_build(setup)
    if setup.pending_build is not None:
        phases.mark("build_done_s")
    missing = machine.unmet(built.result, device)
    if missing is not None:  # a CUDA build it truly asked for, which this machine cannot build or run
        stop = Stopped(Outcome.ERROR, Reason(ReasonCode.ENVIRONMENT, missing), setup.flags)
        return stopped_verdict(
            stop, setup.task_ref, solution.ref, envelope, built if built.failure is None else None
        )
    if built.failure is not None:
        stop = Stopped(Outcome.FAIL, built.failure, setup.flags)
        return stopped_verdict(stop, setup.task_ref, solution.ref, envelope, built)
    # The cases' memory now (what setup measured of itself, and the worker's share); the timed
    # rounds' only once the candidate has passed them (:func:`_grown`). Under
    # --sanitize all of it now: the sanitizer's worker starts beside the candidate's inside a
    # shared turn, where waiting for memory could wait on an evaluation that waits for that turn.
    with steps.step("admission"):
        held.grow(setup.footprint_bytes if options.sanitize else setup.correctness_bytes)
    env["memory"] = {
        "footprint_bytes": setup.footprint_bytes,
        "correctness_bytes": setup.correctness_bytes,
        "profile_bytes": setup.profile_bytes,
        "handoff_bytes": setup.handoff_bytes,  # the parent's buffers outside its allocator (in the above)
        "admission_wait_s": round(held.waited_s, 3),
    }
    ran = _run_candidate(setup, built, options, device, workers, phases, held)
    env["memory"]["admission_wait_s"] = round(held.waited_s, 3)
    if ran.worker is not None:
        env["worker"] = ran.worker
        env["limits"] = ran.limits
        env["sandbox"] = ran.sandbox
    if ran.unmet is not None:  # whatever the solution did with the refusal: the machine's, not its
        stop = Stopped(Outcome.ERROR, Reason(ReasonCode.ENVIRONMENT, ran.unmet), setup.flags)
        return stopped_verdict(stop, setup.task_ref, solution.ref, envelope, ran.built)
    verdict = verdict_of(setup, ran.built, ran.checked, ran.timed, ran.probed, ran.died, envelope)
    del setup, ran  # the parent's references and oracles: the last of them
    give_back_cached(workers, device)
    return verdict


def give_back_cached(workers: WorkerSource, device: str) -> None:
    """The parent's caching allocator gives its free blocks back to the device, where the workers
    (other processes) can use them; under the device's shared gate, since the frees touch the GPU.
    Nothing on the CPU."""
    if device.startswith("cuda"):
        with workers.gate(device).shared():
            torch.cuda.empty_cache()


class _Watchdog:
    """Kills the candidate's worker when the whole evaluation's time is up (--evaluation-timeout):
    the step in flight then ends as a dead worker, and the verdict says which limit cut it."""

    def __init__(self, worker: WorkerProcess, remaining_s: float) -> None:
        self.fired = False
        self._worker = worker
        self._timer = threading.Timer(max(0.0, remaining_s), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._worker.kill()

    def cancel(self) -> None:
        self._timer.cancel()


def _run_candidate(
    setup: Setup,
    built: Built,
    options: EvalOptions,
    device: str,
    workers: WorkerSource,
    phases: _Phases,
    held: Any,
) -> _Ran:
    """The candidate's worker, used once: its build installed, its cases checked, then timed alone.

    A protocol violation is the verdict wherever it was seen (I10): a step that reads a dead worker
    as its own finding (the probed shapes' flag, a dropped figure) or the worker's close, which
    finds a second reply to the last request, never leaves it as a flag or unseen."""
    opened: list[WorkerProcess] = []
    ran = _run_candidate_steps(setup, built, options, device, workers, phases, opened, held)
    violation = opened[0].violation if opened else None
    if violation is None or (ran.died is not None and ran.died.code is ReasonCode.PROTOCOL_VIOLATION):
        return ran
    return replace(ran, died=Reason(ReasonCode.PROTOCOL_VIOLATION, violation.message, violation.detail))


def _run_candidate_steps(
    setup: Setup,
    built: Built,
    options: EvalOptions,
    device: str,
    workers: WorkerSource,
    phases: _Phases,
    opened: list[WorkerProcess],
    held: Any,
) -> _Ran:
    """The steps of :func:`_run_candidate`; the worker it starts is appended to ``opened``."""
    turns = DeviceTurns(workers, device, first_alone=lambda: phases.mark("settled_s"))
    worker: WorkerProcess | None = None
    hello, limits, sandbox = None, "", None
    checked = Checked((), (), (), {}, True)
    timed = None
    probed = Probed(0)
    watchdog: _Watchdog | None = None
    service: BuildService | None = None
    try:
        with turns.shared():  # another evaluation's timing ends first
            with steps.step("worker_start"):
                worker = workers.candidate(device, timed=not options.correctness_only)
                opened.append(worker)
                watchdog = _Watchdog(
                    worker, options.evaluation_timeout_s - (time.monotonic() - phases.started)
                )
                turns.lend(worker)  # a reply long awaited (a hang) does not hold up another's timing
                hello, limits = worker.wait_ready(), worker.limits_applied
            sandbox = worker.sandbox_record()  # which containment layers held (kernelproof/sandbox)
            if options.require_sandbox:
                worker.require_layers()
            phases.mark("worker_ready_s")
            with steps.step("handoff"):
                built = install_build(setup, built, worker, options.timeout_s)
                if setup.pending_build is not None:  # builds the solution asks for while it runs
                    worker.build_handler = service = BuildService(
                        setup.pending_build.pool, worker.private, worker.scratch
                    )
                staged = worker.stage_solution(setup.solution.ref.path, setup.solution.file.data)
            if built.failure is not None:
                checked = Checked((), (built.failure,), (), {}, True)
            else:
                with steps.step("correctness"):
                    checked = check_correctness(setup, worker, staged, options)
            phases.mark("correctness_done_s")
            if options.sanitize and not checked.reasons and setup.device.type == "cuda":
                prepare_worker = None
                if setup.pending_build is not None and built.result is not None:
                    prepare_worker = preparer(setup.pending_build, built.result, options.timeout_s)
                with steps.step("sanitizer"):
                    checked = sanitize_first_case(
                        setup, checked, options, device, setup.solution.file, prepare_worker
                    )
        if not checked.reasons and not options.correctness_only:
            if service is not None:  # every timed shape ran in correctness: nothing is built from here on
                service.close("timing has started (a build is asked for before the first timed call)")
            timed = time_candidate(
                setup, checked, worker, staged, options, device, workers, turns, partial(_grown, held)
            )
            phases.mark("timing_done_s")
        if not checked.reasons and not (timed and timed.reasons):
            with turns.shared(), steps.step("probe_cases"):
                probed = probe_shapes(setup, worker, staged, options)
            phases.mark("shapes_done_s")
    except WorkerDied as died:
        reason = Reason(ReasonCode(died.code), died.message, died.detail)
        if watchdog is not None and watchdog.fired:
            reason = Reason(
                ReasonCode.TIMEOUT,
                f"the evaluation did not finish within {options.evaluation_timeout_s:g} s "
                "(--evaluation-timeout); the worker was killed",
                died.message,
            )
        return _Ran(
            _noted(built, service), checked, timed, probed, reason, hello, limits, sandbox, _unmet(service)
        )
    except ProtocolError as exc:
        if worker is not None:
            worker.kill()
        reason = Reason(ReasonCode.CRASH, f"the worker broke the protocol: {exc}")
        return _Ran(
            _noted(built, service), checked, timed, probed, reason, hello, limits, sandbox, _unmet(service)
        )
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if worker is not None:
            # a worker's exit touches the GPU too
            with turns.shared(), steps.step("worker_close"):
                worker.close()
    if service is not None and service.failed and not checked.reasons:
        checked = replace(checked, reasons=(Reason(ReasonCode.COMPILE_ERROR, service.failed[:4000]),))
    return _Ran(_noted(built, service), checked, timed, probed, None, hello, limits, sandbox, _unmet(service))


def _grown(held: Any, nbytes: int) -> None:
    """The reservation raised for the timed rounds (kernelproof/evaluate/timing.py says to what,
    when), waiting for room, before any turn on the device is taken: an evaluation waiting here
    holds no turn that another's timing would wait for. Reserved only once the candidate has passed
    its cases: a candidate that fails them (most of a training batch) never held the timed rounds'
    room, and while a large task's cases run, smaller evaluations fit beside it
    (kernelproof/executors/device_memory.py)."""
    with steps.step("timing_admission"):
        held.grow(nbytes)


def _unmet(service: BuildService | None) -> str | None:
    return service.unmet if service is not None and service.unmet else None


def _noted(built: Built, service: BuildService | None) -> Built:
    """The build record with the builds the solution asked for while it ran, as flags."""
    if service is None or not service.notes:
        return built
    return replace(built, flags=built.flags + tuple(dict.fromkeys(service.notes)))
