"""The verbs of kernelproof as Python functions: what the CLI, agents, executors and RL trainers call.

``evaluate`` never raises because a candidate is bad: every failure of the solution is a verdict.
It raises :class:`~kernelproof.errors.UsageError` for a missing file or a bad option, and a
broken task comes back as an ``error`` verdict with ``task_error``.

Every verb of the command line goes through a function here (the CLI parses, calls, prints and
picks the exit code): ``evaluate``, ``bench`` with ``suite_pairs``, ``kernelbench`` with
``find_run``, ``audit``, ``results``, ``compare``, ``ceilings``. The options are checked in one
place (:func:`checked_options`), the device in one (``executors.local.resolve_devices``) and the
store is chosen by one rule (``kernelproof.store.db_path``: ``--db``, else ``$KERNELPROOF_DB``,
else the default).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kernelproof.errors import UsageError
from kernelproof.evaluate import compare_pair, evaluate_pair
from kernelproof.evaluate.memory_blame import (
    MemoryFacts,
    memory_shaped,
    near_the_edge,
    own_out_of_memory,
    reference_alone_fails,
)
from kernelproof.evaluate.progress import reporting  # noqa: F401  (the CLI's phase lines)
from kernelproof.evaluate.requests import device_name
from kernelproof.executors.local import LocalPool, default_pool, resolve_devices, run_many
from kernelproof.options import TIME_LIMITS, EvalOptions, normalize_baselines
from kernelproof.report.kernelbench import KernelBenchRun, Sample, find_run  # noqa: F401  (kernelbench's)
from kernelproof.source import this_source
from kernelproof.store import as_requested, db_path, open_store, served
from kernelproof.task import POLICIES
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict

if TYPE_CHECKING:
    from kernelproof.verify.audit import AuditReport

PathLike = str | Path
SHAPE_VARIANTS = ("probe", "auto", "task")  # EvalOptions.shape_variants (options.py says what each does)
EXECUTORS = ("local", "ray")


def evaluate(
    task: PathLike, solution: PathLike, options: EvalOptions | None = None, *, pool: LocalPool | None = None
) -> Verdict:
    """Evaluate one solution against one task and return its verdict (never raises for bad candidates)."""
    options = checked_options(options)
    require_files(task, solution)
    devices = resolve_devices(options.device)
    return _evaluate_on(str(task), str(solution), options, devices[0], pool or default_pool())


def evaluate_many(
    pairs: Iterable[tuple[PathLike, PathLike]],
    options: EvalOptions | None = None,
    *,
    pool: LocalPool | None = None,
) -> Iterator[Verdict]:
    """Evaluate many (task, solution) pairs over the per-device workers; yield verdicts as they finish.

    ``options.per_device`` evaluations run at once on each device (one by default); their
    untimed stretches share the GPU and each timing has it alone (sandbox/gate.py). With N
    GPUs, N times as many run at once. The builds of CUDA and native solutions are submitted up
    front to the pool's builders (on the CPU cores), and a device takes the next pair whose build
    is done.
    """
    options = checked_options(options)
    devices = resolve_devices(options.device)
    pool = pool or default_pool()
    items = [(str(t), str(s)) for t, s in pairs]
    for task, solution in items:  # every path checked before the first evaluation starts
        require_files(task, solution)
    builds = pool.prebuild(_to_build(items, options, devices[0]), devices[0], options)

    def ready(item) -> bool:
        pending = builds.get(item[1])
        return pending is None or pending.future.done()

    yield from run_many(
        items,
        [d for d in devices for _ in range(options.per_device)],
        lambda item, dev: _evaluate_on(item[0], item[1], options, dev, pool),  # type: ignore[index, misc]
        ready,
    )


async def aevaluate_many(
    pairs: Iterable[tuple[PathLike, PathLike]],
    options: EvalOptions | None = None,
    *,
    pool: LocalPool | None = None,
) -> AsyncIterator[Verdict]:
    """Async form of :func:`evaluate_many` for event-loop callers (agents, RL rollouts)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    sentinel = object()

    def produce() -> None:
        try:
            for v in evaluate_many(pairs, options, pool=pool):
                loop.call_soon_threadsafe(queue.put_nowait, v)
        except BaseException as exc:  # noqa: BLE001
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, sentinel)

    fut = loop.run_in_executor(None, produce)
    while True:
        item = await queue.get()
        if item is sentinel:
            break
        if isinstance(item, BaseException):
            raise item
        yield item
    await fut


def _to_build(items: list[tuple[str, str]], options: EvalOptions, device: str) -> list[str]:
    """Solutions whose evaluation will run (files present, no stored verdict to serve)."""
    store = _open_store(options) if not options.fresh else None
    out = []
    for task, sol in items:
        if not (Path(task).is_file() and Path(sol).is_file()):
            continue
        key = evaluation_key(task, sol, options, device) if store is not None else ""
        if store is not None and served(store, key, options.serving_conditions()) is not None:
            continue
        out.append(sol)
    return out


def checked_options(options: EvalOptions | None) -> EvalOptions:
    """``options`` as every verb runs them, or a UsageError naming the bad one: the one place
    baselines are normalised and the device, policy and other choices are checked. Every function
    here calls it first; a caller that records its options before evaluating (a certificate, an
    agent's run) calls it to record what will run."""
    options = options or EvalOptions()
    try:
        baselines = normalize_baselines(options.baselines)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    resolve_devices(options.device)  # UsageError for a device that is malformed or not there
    if options.per_device < 1:
        raise UsageError(f"--per-device must be at least 1, not {options.per_device}")
    if options.build_workers < 0:
        raise UsageError(f"--build-workers must be 0 (automatic) or more, not {options.build_workers}")
    if options.shape_variants not in SHAPE_VARIANTS:
        raise UsageError(
            f"--shape-variants must be {' | '.join(SHAPE_VARIANTS)}, not {options.shape_variants!r}"
        )
    if options.policy is not None and options.policy not in POLICIES:
        raise UsageError(f"--policy must be {' | '.join(POLICIES)}, not {options.policy!r}")
    if options.seeds_per_case < 1:
        raise UsageError(f"--seeds-per-case must be at least 1, not {options.seeds_per_case}")
    for name in TIME_LIMITS:
        value = getattr(options, name)
        if not value > 0:
            flag = "--" + name.removesuffix("_s").replace("_", "-")
            raise UsageError(f"{flag} must be more than 0 s, not {value}")
    return options.replace(baselines=baselines)


def _evaluate_on(task: str, solution: str, options: EvalOptions, device: str, pool: LocalPool) -> Verdict:
    for path, what in ((task, "task"), (solution, "solution")):
        if not Path(path).is_file():
            raise UsageError(f"{what} file not found: {path}")
    store = _open_store(options)
    key = evaluation_key(task, solution, options, device)
    if store is not None and not options.fresh:
        cached = served(store, key, options.serving_conditions())
        if cached is not None:
            return as_requested(cached, task, solution)
    # A CUDA or native solution is built before the GPU is taken: its compile (tens of seconds)
    # must not hold the device while other evaluations wait for it. A failed build is reported
    # by the evaluation itself.
    for pending in pool.prebuild([solution], device, options).values():
        concurrent.futures.wait([pending.future])
    with pool.device_slots(device, options.per_device):
        verdict = _judged(task, solution, options, device, pool)
    again = options.per_device > 1 and _worth_running_alone(verdict)
    if again or _near_the_edge_failure(verdict, device, pool):
        # Out of GPU memory while other evaluations held some, perhaps: this one again, alone on the
        # device, where the parent's own facts decide (kernelproof/evaluate/memory_blame.py). The
        # reference's re-run that may decide it is alone on the device too: beside other
        # evaluations, its failure would be theirs, not the task's size.
        with pool.device_alone(device, options.per_device):
            if again:
                verdict = _judged(task, solution, options, device, pool)
            verdict = _beyond_the_device(verdict, task, options, device, pool)
    else:
        verdict = _beyond_the_device(verdict, task, options, device, pool)
    never_stored = (ReasonCode.TOO_LARGE.value, ReasonCode.ENVIRONMENT.value, ReasonCode.MACHINE_BUSY.value)
    if verdict.codes and (verdict.codes[0] in never_stored or ReasonCode.ENVIRONMENT.value in verdict.codes):
        return verdict  # a property of this machine (and its neighbours) at the time: never stored
    if store is not None:
        store.put(key, verdict, options_sha256=options_digest(options), limits=options.serving_conditions())
    return verdict


def _judged(task: str, solution: str, options: EvalOptions, device: str, pool: LocalPool) -> Verdict:
    """The evaluation's verdict; kernelproof's own failures become an internal_error verdict, and
    the parent running out of GPU memory a too_large one."""
    try:
        return evaluate_pair(task, solution, options, device, pool)
    except (UsageError, KeyboardInterrupt):
        raise
    except torch.OutOfMemoryError as exc:
        return too_large_verdict(task, solution, device, exc)
    except Exception as exc:  # a harness bug must not lose the run: it becomes an error verdict
        return internal_error_verdict(task, solution, device, exc)


def _worth_running_alone(verdict: Verdict) -> bool:
    """Could the evaluation have failed for want of GPU memory while it shared the device: the
    parent's own (too_large), a worker that died, or a worker's harness step that failed (a lent
    input it could not map)? Decided by codes, never by a reason's text (the solution writes
    that): running it again alone only gathers facts, it blames no one."""
    codes = {r.code for r in verdict.reasons}
    return bool(codes & {ReasonCode.TOO_LARGE, ReasonCode.CRASH, ReasonCode.INTERNAL_ERROR})


def _memory_facts(verdict: Verdict, device: str, pool: LocalPool) -> MemoryFacts:
    capacity = getattr(pool.memory(device), "capacity_bytes", None)
    return MemoryFacts((verdict.environment.get("memory") or {}).get("footprint_bytes"), capacity)


def _near_the_edge_failure(verdict: Verdict, device: str, pool: LocalPool) -> bool:
    """A memory-shaped failure of an evaluation large enough for the reference's re-run alone."""
    return (
        bool(verdict.reasons)
        and memory_shaped(verdict.reasons[0].code)
        and near_the_edge(_memory_facts(verdict, device, pool))
    )


def _beyond_the_device(
    verdict: Verdict, task: str, options: EvalOptions, device: str, pool: LocalPool
) -> Verdict:
    """A worker that ran out of GPU memory in an evaluation whose own footprint (the parent's
    estimate: inputs, reference, float64 oracle, the candidate's outputs) is more than the device
    admits is the task's size, not the solution's fault: too_large, never a crash.

    Decided from the parent's facts only (kernelproof/evaluate/memory_blame.py): never from the
    worker's log or a reason's text, which the solution controls. (On an H200, KernelBench
    level1/21_Sigmoid's footprint was estimated at 137 GB, within the 138 GB admitted, while the
    parent held 115 GiB and the worker's poison fill found no memory: the reference, run alone as
    the candidate in a fresh worker, fails the same way; that is the second fact.)
    """
    facts = _memory_facts(verdict, device, pool)
    capacity, footprint = facts.available_bytes, facts.footprint_bytes
    if not verdict.reasons or not memory_shaped(verdict.reasons[0].code):
        return verdict
    if not own_out_of_memory(facts) and near_the_edge(facts):
        judge = lambda t, s, o: _judged(t, s, o, device, pool)  # noqa: E731
        facts = dataclasses.replace(facts, reference_alone_failed=reference_alone_fails(task, options, judge))
    if not own_out_of_memory(facts):
        return verdict
    why = (
        "the task's reference, run alone in a fresh worker, failed too"
        if facts.reference_alone_failed
        else (f"{capacity / 1e9:.0f} GB are admitted")
    )
    message = (
        f"the task needs more GPU memory than {device} admits: this evaluation's footprint is "
        f"{footprint / 1e9:.0f} GB (inputs, reference, float64 oracle and the candidate's outputs, as "
        f"its setup measured them), {why}, and the candidate's worker failed "
        f"({verdict.reasons[0].message[:200]}); run it on a device with more memory or give the task smaller shapes"
    )
    reason = Reason(ReasonCode.TOO_LARGE, message, verdict.reasons[0].detail if verdict.reasons else "")
    # what the evaluation recorded (its footprint, phases, layers) stays: it is how it was decided
    return dataclasses.replace(
        verdict, verdict=Outcome.ERROR, reasons=(reason,), timing=None, speedup={}, reward=0.0
    )


def too_large_verdict(task: str, solution: str, device: str, exc: BaseException) -> Verdict:
    """The parent ran out of GPU memory holding this task's references, alone on the device."""
    total = (
        torch.cuda.get_device_properties(torch.device(device)).total_memory
        if device.startswith("cuda")
        else 0
    )
    message = (
        f"the task needs more GPU memory than {device} has ({total / 2**30:.0f} GiB): the parent ran out "
        f"while holding its reference, float64 oracle and the candidate's outputs ({str(exc).splitlines()[0][:200]})"
    )
    return _error_verdict(task, solution, device, Reason(ReasonCode.TOO_LARGE, message))


def internal_error_verdict(task: str, solution: str, device: str, exc: BaseException) -> Verdict:
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    reason = Reason(ReasonCode.INTERNAL_ERROR, f"kernelproof failed: {type(exc).__name__}: {exc}", tb)
    return _error_verdict(task, solution, device, reason)


def _error_verdict(task: str, solution: str, device: str, reason: Reason) -> Verdict:
    return Verdict(
        verdict=Outcome.ERROR,
        reasons=(reason,),
        task=FileRef(task, hashlib.sha256(Path(task).read_bytes()).hexdigest()),
        solution=FileRef(solution, hashlib.sha256(Path(solution).read_bytes()).hexdigest()),
        correctness=None,
        timing=None,
        speedup={},
        roofline=None,
        coverage=None,
        environment={"device": device},
        reward=0.0,
    )


def evaluation_key(task: str, solution: str, options: EvalOptions, device: str) -> str:
    """Identity of an evaluation: file contents, settings and environment (served from the store).

    The settings are ``EvalOptions.cache_key_fields``: every option that can change the outcome.
    The time limits are not in it; they are stored with the row and checked when it is served.
    """
    h = hashlib.sha256()
    for p in (task, solution):
        h.update(hashlib.sha256(Path(p).read_bytes()).digest())
    env = {
        "torch": torch.__version__,
        "device": device,
        "device_name": device_name(device),
        "kernelproof_source": this_source(),  # a verdict from other judging code is not served
    }
    h.update(json.dumps({"settings": options.cache_key_fields(), "env": env}, sort_keys=True).encode())
    return h.hexdigest()


def options_digest(options: EvalOptions) -> str:
    """sha256 of the settings an evaluation is keyed on (signed with its stored row)."""
    return hashlib.sha256(json.dumps(options.cache_key_fields(), sort_keys=True).encode()).hexdigest()


def _open_store(options: EvalOptions):
    return open_store(options.db)  # the one rule: --db, else $KERNELPROOF_DB, else the default


def compare(
    task: PathLike,
    a: PathLike,
    b: PathLike,
    options: EvalOptions | None = None,
    *,
    pool: LocalPool | None = None,
):
    """Paired speedup of solution B over solution A on the task's timed shape (both verified first)."""
    options = checked_options(options)
    require_files(task, a, b, what=("task", "solution A", "solution B"))
    device = resolve_devices(options.device)[0]
    pool = pool or default_pool()
    with pool.device_slots(device, options.per_device):
        return compare_pair(str(task), str(a), str(b), options, device, pool)


# --- the other verbs ------------------------------------------------------------------------------


def require_files(*paths: PathLike, what: tuple[str, ...] = ("task", "solution")) -> None:
    """UsageError unless each path is a file, saying what it is instead (missing, or a folder)."""
    for path, name in zip(paths, what):
        p = Path(path)
        if p.is_dir():
            hint = " (bench evaluates a folder of tasks: kernelproof bench SUITE --solutions DIR)"
            raise UsageError(f"the {name} {p} is a directory, not a file" + (hint if name == "task" else ""))
        if not p.is_file():
            raise UsageError(f"{name} file not found: {p}")


@dataclass(frozen=True)
class SuitePairs:
    """The (task, solution) pairs of a KernelBench run layout, and the tasks left without a solution."""

    pairs: tuple[tuple[Path, Path], ...]
    unsolved: tuple[Path, ...]


def suite_pairs(suite: PathLike, solutions: PathLike, only: Iterable[str] = ()) -> SuitePairs:
    """Every task file under ``suite`` (recursively; names starting with ``_`` are not tasks) with
    the solution at the same relative path under ``solutions``; ``only`` keeps the tasks whose
    relative path contains one of its strings. UsageError when nothing is left to evaluate, saying
    why: a folder missing, no task matching ``only``, or no task with a solution."""
    suite, solutions, only = Path(suite), Path(solutions), tuple(only)
    for path, name in ((suite, "suite"), (solutions, "--solutions")):
        if not path.is_dir():
            raise UsageError(
                f"{name} {path} is not a folder" if path.exists() else f"{name} {path} not found"
            )
    tasks = [t for t in sorted(suite.rglob("*.py")) if not t.name.startswith("_")]
    if not tasks:
        raise UsageError(f"no task file (*.py) in {suite}")
    if only:
        tasks = [t for t in tasks if any(o in str(t.relative_to(suite)) for o in only)]
        if not tasks:
            shown = ", ".join(repr(o) for o in only)
            raise UsageError(f"no task in {suite} matches --only {shown}")
    pairs = [(t, solutions / t.relative_to(suite)) for t in tasks]
    solved = tuple((t, sol) for t, sol in pairs if sol.is_file())
    if not solved:
        raise UsageError(
            f"none of the {len(tasks)} task(s) has a solution at the same relative path under {solutions}"
            f" (for {tasks[0].relative_to(suite)}: {solutions / tasks[0].relative_to(suite)})"
        )
    return SuitePairs(solved, tuple(t for t, sol in pairs if not sol.is_file()))


def bench(
    pairs: Iterable[tuple[PathLike, PathLike]],
    options: EvalOptions | None = None,
    *,
    executor: str = "local",
    address: str | None = None,
) -> Iterator[Verdict]:
    """Evaluate many pairs on an executor: ``local`` (:func:`evaluate_many`) or ``ray`` (a Ray
    cluster at ``address``; kernelproof/executors/ray_executor.py); verdicts as they finish."""
    options = checked_options(options)
    if executor not in EXECUTORS:
        raise UsageError(f"--executor must be {' | '.join(EXECUTORS)}, not {executor!r}")
    if executor == "local":
        return evaluate_many(pairs, options)
    if options.per_device != 1:
        raise UsageError("--per-device applies to the local executor; a Ray actor evaluates one at a time")
    from kernelproof.executors.ray_executor import RayOptions, evaluate_many_ray

    return evaluate_many_ray(pairs, options, RayOptions(address=address), evaluate=evaluate)


def kernelbench(
    run: KernelBenchRun,
    options: EvalOptions | None = None,
    *,
    executor: str = "local",
    address: str | None = None,
) -> Iterator[tuple[Sample, Verdict]]:
    """Judge every sample of a KernelBench run folder (:func:`kernelproof.report.kernelbench.find_run`)
    as :func:`bench` does; yield (sample, verdict) as they finish.

    A verdict is matched to its sample by the sha256 of both files: the store answers an identical
    pair with the verdict of whichever path was evaluated first, so a path says less than the bytes.
    """
    waiting: dict[tuple[str, str], list[Sample]] = {}
    for s in run.samples:
        if s.path is not None:
            key = (_sha256(run.problems[s.problem].path), _sha256(s.path))
            waiting.setdefault(key, []).append(s)
    for v in bench(run.pairs(), options, executor=executor, address=address):
        found = waiting.get((v.task.sha256, v.solution.sha256)) or []
        here = next((s for s in found if str(s.path) == v.solution.path), found[0] if found else None)
        if here is None:
            raise RuntimeError(f"a verdict for {v.solution.path} matches no sample of {run.run_dir}")
        found.remove(here)
        yield here, v


def _sha256(path: PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class TaskAudit:
    """One task's audit: a report per shape variant, or why the task could not be audited."""

    task: str  # the path as given
    shapes: tuple[AuditReport, ...] = ()
    error: str = ""  # the task does not load or its reference does not run (a TaskError)

    @property
    def degenerate(self) -> bool:
        return any(r.degenerate for r in self.shapes)

    def to_json(self) -> dict[str, Any]:
        if self.error:
            return {"task": self.task, "error": self.error}
        return {
            "task": self.task,
            "degenerate": self.degenerate,
            "controls": [dict(c, shape=r.variant) for r in self.shapes for c in r.to_json()["controls"]],
            "shapes": [r.to_json() for r in self.shapes],
        }


def audit_targets(target: PathLike) -> list[Path]:
    """The task files an audit of ``target`` covers: the file, or every task file under the folder."""
    path = Path(target)
    if path.is_dir():
        files = [f for f in sorted(path.rglob("*.py")) if not f.name.startswith("_")]
        if not files:
            raise UsageError(f"no task file (*.py) in {path}")
        return files
    if not path.exists():
        raise UsageError(f"task file not found: {path}")
    return [path]


def audit(target: PathLike, options: EvalOptions | None = None) -> Iterator[TaskAudit]:
    """Run the negative controls on every shape of each task under ``target`` (a file or a folder):
    a task they pass cannot tell right from wrong, so no candidate can be scored on it. One
    :class:`TaskAudit` per task as it is done; a task that does not load is one with ``error``."""
    import secrets

    from kernelproof.errors import TaskError
    from kernelproof.task import load_task, variants_for
    from kernelproof.verify.audit import audit_task

    options = checked_options(options)
    files = audit_targets(target)
    device = torch.device(resolve_devices(options.device)[0])
    seed = options.seed if options.seed is not None else secrets.randbits(62)
    for f in files:
        try:
            task = load_task(f)
            reports = audit_task(task, device, variants_for(task, device.type), seed)
        except TaskError as exc:
            yield TaskAudit(str(f), error=str(exc))
            continue
        yield TaskAudit(str(f), tuple(reports))


@dataclass(frozen=True)
class DeviceCeilings:
    """What good code reaches on a device (measured once per model, cached), beside its datasheet."""

    name: str  # the device's name as CUDA reports it
    copy_tbps: float  # a large device-to-device copy, TB/s
    matmul_tflops: dict[str, float]  # large library matmuls per unit, TFLOP/s
    datasheet_tbps: float | None  # None: the device is not in the datasheet table
    datasheet_tflops: dict[str, float]
    cache_path: str  # where the measurement is kept
    measured_now: bool  # measured by this call (not read from the cache)


def ceilings(device: str = "cuda", *, refresh: bool = False) -> DeviceCeilings:
    """Measure (or read the cached) copy bandwidth and matmul peaks of a CUDA device."""
    from kernelproof.measure import ceilings as measured
    from kernelproof.measure.roofline import device_spec

    if not torch.cuda.is_available():
        raise UsageError("ceilings are measured on a CUDA device; none is visible")
    if device in ("auto", "cpu"):
        raise UsageError(f"ceilings are measured on a CUDA device: --device cuda or cuda:N, not {device!r}")
    dev = resolve_devices(device)[0]
    name = torch.cuda.get_device_name(torch.device(dev))
    doc = None if refresh else measured.load(name)
    measured_now = doc is None
    if doc is None:
        doc = measured.measure(dev)
    spec = device_spec(name)
    return DeviceCeilings(
        name=name,
        copy_tbps=float(doc["copy_bandwidth_TBps"]),
        matmul_tflops={str(k): float(v) for k, v in doc["matmul_TFLOPs"].items()},
        datasheet_tbps=spec.datasheet_tbps if spec else None,
        datasheet_tflops=dict(spec.datasheet_tflops) if spec else {},
        cache_path=str(measured.cache_path(name)),
        measured_now=measured_now,
    )


@dataclass(frozen=True)
class StoredVerdicts:
    """Verdict documents from the results store, newest first, and how many it holds in all."""

    documents: tuple[dict[str, Any], ...]
    total: int
    path: str  # the store's file
    note: str = ""  # "N shown of M stored in PATH", and the matching rows that do not verify (never served)


def results(
    *,
    task: str | None = None,
    solution: str | None = None,
    outcome: str | None = None,
    code: str | None = None,
    limit: int | None = 50,
    db: str | None = None,
) -> StoredVerdicts:
    """Stored verdicts, newest first: paths containing ``task`` / ``solution``, with ``outcome``
    (pass | fail | error) and the reason ``code``; a filter that can match nothing is a UsageError."""
    from kernelproof.store import Store

    outcomes = tuple(o.value for o in Outcome)
    if outcome is not None and outcome not in outcomes:
        raise UsageError(f"--verdict must be {' | '.join(outcomes)}, not {outcome!r}")
    if code is not None and code not in {c.value for c in ReasonCode}:
        raise UsageError(f"--code {code!r} is not a reason code (docs/verdict.md lists them)")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}")
    path = db_path(db)
    if path is None:
        raise UsageError("--db '' names no store: there is nothing to list")
    if db is None and not Path(path).exists():  # the default store, before anything was stored
        return StoredVerdicts((), 0, path, f"0 shown: nothing stored yet in {path}")
    store = Store(path, readonly=True)  # listing writes nothing: a read-only store is listed too
    docs = store.query(task=task, solution=solution, outcome=outcome, code=code, limit=limit)
    note = store.listing_note(len(docs), task=task, solution=solution, outcome=outcome, code=code)
    return StoredVerdicts(tuple(docs), store.count(), store.path, note)


def optimize(task: PathLike, model: Any, options: Any = None, **kwargs: Any):
    """An LLM agent's search for a faster verified solution of ``task`` (kernelproof.agent.optimize),
    every candidate judged by :func:`evaluate_many`. Keyword arguments: resume, replay, backend,
    progress (see :func:`kernelproof.agent.loop.optimize`)."""
    from kernelproof.agent import optimize as agent_optimize

    kwargs.setdefault("evaluator", evaluate_many)
    return agent_optimize(task, model, options, **kwargs)


def certify(task: PathLike, solution: PathLike, options: EvalOptions | None = None, **kwargs: Any):
    """A certificate of the solution's verdict and speedup (kernelproof.certify.certify), its runs
    judged by :func:`evaluate`."""
    from kernelproof.certify import certify as make_certificate

    return make_certificate(task, solution, options, evaluate=kwargs.pop("evaluate", evaluate), **kwargs)


def verify(cert: Any, options: Any = None, **kwargs: Any):
    """Re-run a certificate's claim here (kernelproof.certify.verify), judged by :func:`evaluate`."""
    from kernelproof.certify import verify as verify_certificate

    return verify_certificate(cert, options, evaluate=kwargs.pop("evaluate", evaluate), **kwargs)
