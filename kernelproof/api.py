"""The verbs of kernelproof as Python functions: what the CLI, agents, executors and RL trainers call.

``evaluate`` never raises because a candidate is bad: every failure of the solution is a verdict.
It raises :class:`~kernelproof.errors.UsageError` for a missing file or a bad option, and a
broken task comes back as an ``error`` verdict with ``task_error``.

Every verb of the command line goes through a function here (the CLI parses, calls, prints and
picks the exit code): ``evaluate``, ``bench`` with ``suite_pairs``, ``kernelbench`` with
``find_run``, ``audit``, ``results``, ``compare``, ``ceilings``. The options are checked in one
place (:func:`kernelproof.preflight.checked_options`), the device in one
(``executors.local.resolve_devices``) and the store is chosen by one rule
(``kernelproof.store.db_path``: ``--db``, else ``$KERNELPROOF_DB``, else the default).

The verbs that judge no solution live in :mod:`kernelproof.survey`, and what a verdict says when
GPU memory ran short or kernelproof failed in :mod:`kernelproof.blame`; both are re-exported here,
so this stays the one namespace callers import.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelproof import blame
from kernelproof.blame import internal_error_verdict, too_large_verdict
from kernelproof.code_identity import this_source
from kernelproof.errors import UsageError
from kernelproof.evaluate import compare_pair, evaluate_pair, phase_progress
from kernelproof.evaluate.chain import give_back_cached
from kernelproof.evaluate.phase_progress import reporting  # noqa: F401  (the CLI's phase lines)
from kernelproof.evaluate.worker_requests import device_name
from kernelproof.executors.local import LocalPool, default_pool, resolve_devices, run_many
from kernelproof.measure.claims import start_profiler_here
from kernelproof.options import EvalOptions
from kernelproof.preflight import SHAPE_VARIANTS, PathLike, checked_options, require_files  # noqa: F401
from kernelproof.report.kernelbench_run import KernelBenchRun, Sample, find_run  # noqa: F401  (kernelbench's)
from kernelproof.solution import SolutionFile, solution_of
from kernelproof.store import as_requested, db_path, keep, open_store, served  # noqa: F401  (db_path: the CLI's)
from kernelproof.submission import EvaluationKey, Submission, Submitted, read_submission
from kernelproof.survey import (  # noqa: F401  (the verbs that judge no solution, re-exported)
    DeviceCeilings,
    StoredVerdicts,
    TaskAudit,
    audit,
    audit_targets,
    ceilings,
    results,
)
from kernelproof.verdict import Verdict

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
    untimed stretches share the GPU and each timing has it alone (host/gate.py). With N
    GPUs, N times as many run at once. The builds of CUDA and native solutions are submitted up
    front to the pool's builders (on the CPU cores), and a device takes the next pair whose build
    is done.
    """
    options = checked_options(options)
    devices = resolve_devices(options.device)
    pool = pool or default_pool()
    start_profiler_here()  # before the evaluations' threads profile (measure/claims.py says why)
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
        lambda item, dev: _evaluate_named(item[0], item[1], options, dev, pool),  # type: ignore[index, misc]
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


def _to_build(items: list[tuple[str, str]], options: EvalOptions, device: str) -> list[SolutionFile]:
    """Solutions whose evaluation will run (files present, no stored verdict to serve), as read
    here: each is built from these bytes, and found by their hash only by an evaluation of the same."""
    store = _open_store(options) if not options.fresh else None
    out = []
    for task, sol in items:
        try:
            submission = read_submission(task, sol)
        except UsageError:
            continue
        key = submission_key(submission, options, device).digest if store is not None else ""
        if store is not None and served(store, key, options.serving_conditions()) is not None:
            continue
        out.append(solution_of(submission.solution.path, submission.solution.data))
    return out


def _evaluate_named(task: str, solution: str, options: EvalOptions, device: str, pool: LocalPool) -> Verdict:
    """:func:`_evaluate_on`, its phases reported as the solution's (a verb's live line names it)."""
    with phase_progress.about(solution):
        return _evaluate_on(task, solution, options, device, pool)


def _evaluate_on(task: str, solution: str, options: EvalOptions, device: str, pool: LocalPool) -> Verdict:
    # Read once (I10): the key, the verdict's hashes, the build and the worker's copy are all these bytes.
    return _evaluate_submission(read_submission(task, solution), options, device, pool)


def evaluate_submission(
    submission: Submission, options: EvalOptions | None = None, *, pool: LocalPool | None = None
) -> Verdict:
    """Evaluate files given as bytes (:func:`kernelproof.submission.submitted_bytes`), as a service
    submits them: their paths only name them, and nothing is read from disk."""
    options = checked_options(options)
    devices = resolve_devices(options.device)
    return _evaluate_submission(submission, options, devices[0], pool or default_pool())


def _evaluate_submission(
    submission: Submission, options: EvalOptions, device: str, pool: LocalPool
) -> Verdict:
    store = _open_store(options)
    key = submission_key(submission, options, device)
    if store is not None and not options.fresh:
        cached = served(store, key.digest, options.serving_conditions())
        if cached is not None:
            return as_requested(cached, submission.task.path, submission.solution.path)
    return _judged_and_stored(submission, key, options, device, pool, store)


def _judged_and_stored(
    submission: Submission, key: EvaluationKey, options: EvalOptions, device: str, pool: LocalPool, store: Any
) -> Verdict:
    """The evaluation of the bytes read once, stored under the key computed from them."""
    task, solution = submission.task, submission.solution
    # A CUDA or native solution is built before the GPU is taken: its compile (tens of seconds)
    # must not hold the device while other evaluations wait for it. A failed build is reported
    # by the evaluation itself.
    for pending in pool.prebuild([solution_of(solution.path, solution.data)], device, options).values():
        concurrent.futures.wait([pending.future])
    with pool.device_slots(device, options.per_device):
        verdict = _judged(task, solution, options, device, pool)
    again = options.per_device > 1 and blame.worth_running_alone(verdict)
    judge = lambda t, s, o: _judged(t, s, o, device, pool)  # noqa: E731  (the reference's re-run alone)
    if again or blame.near_the_edge_failure(verdict, device, pool):
        # Out of GPU memory while other evaluations held some, perhaps: this one again, alone on the
        # device, where the parent's own facts decide (kernelproof/blame.py). The
        # reference's re-run that may decide it is alone on the device too: beside other
        # evaluations, its failure would be theirs, not the task's size.
        first, asked = verdict, time.monotonic()
        with pool.device_alone(device, options.per_device):
            entered = time.monotonic()
            if again:
                verdict = _judged(task, solution, options, device, pool)
            rerun_s = verdict.elapsed_s if again else 0.0
            verdict = blame.beyond_the_device(verdict, task, options, device, pool, judge)
            done = time.monotonic()
        verdict = with_earlier_attempt(
            verdict, first if again else None, entered - asked, done - entered - rerun_s
        )
    else:
        verdict = blame.beyond_the_device(verdict, task, options, device, pool, judge)
    keep(store, key, verdict, options)  # an error of this machine at the time is never stored
    return verdict


def with_earlier_attempt(
    verdict: Verdict, first: Verdict | None, alone_wait_s: float, alone_rest_s: float
) -> Verdict:
    """The verdict of an evaluation decided alone on the device, charged with all it took: the
    first attempt beside others where it ran again (step ``first_attempt``; None: the verdict is
    that attempt's), the wait for the device to empty (``alone_wait``), and what ran alone beside
    the evaluation's own re-run: the reference's re-run (``alone_checks``). Its ``elapsed_s`` is
    their sum with its own.

    Why: a verdict kept its last run's seconds only. On an H200, a service pass at four in flight
    ran no answered evaluation's seconds for 69 of its 230 s, while evaluations ran again alone: a
    trainer's GPU-seconds per candidate and the benchmark's cost table missed that time."""
    charged = {
        "first_attempt": first.elapsed_s if first is not None else 0.0,
        "alone_wait": max(0.0, alone_wait_s),
        "alone_checks": max(0.0, alone_rest_s),
    }
    steps = dict(verdict.environment.get("steps") or {})
    steps.update({k: {"s": round(v, 4), "n": 1} for k, v in charged.items() if v > 0})
    environment = {**verdict.environment, "steps": steps}
    return dataclasses.replace(
        verdict, environment=environment, elapsed_s=verdict.elapsed_s + sum(charged.values())
    )


def _judged(
    task: Submitted, solution: Submitted, options: EvalOptions, device: str, pool: LocalPool
) -> Verdict:
    """The evaluation's verdict; kernelproof's own failures become an internal_error verdict, and
    the parent running out of GPU memory a too_large one."""
    try:
        return evaluate_pair(task, solution, options, device, pool)
    except (UsageError, KeyboardInterrupt):
        raise
    except torch.OutOfMemoryError as exc:
        verdict = too_large_verdict(task, solution, device, exc)
    except Exception as exc:  # a harness bug must not lose the run: it becomes an error verdict
        verdict = internal_error_verdict(task, solution, device, exc)
    # The failed evaluation's tensors died with its traceback, but its blocks stay in the parent's
    # caching allocator, where the workers and the re-run alone cannot use them.
    give_back_cached(pool, device)
    return verdict


def evaluation_key(task: str, solution: str, options: EvalOptions, device: str) -> str:
    """Identity of an evaluation of the files as they are now (:func:`submission_key` of their bytes)."""
    return submission_key(read_submission(task, solution), options, device).digest


def submission_key(submission: Submission, options: EvalOptions, device: str) -> EvaluationKey:
    """Identity of an evaluation: file contents, settings and environment (served from the store).

    The settings are ``EvalOptions.cache_key_fields``: every option that can change the outcome.
    The time limits are not in it; they are stored with the row and checked when it is served.
    The key keeps the hashes of the bytes it names: the store refuses a verdict of other bytes.
    """
    h = hashlib.sha256()
    for file in (submission.task, submission.solution):
        h.update(bytes.fromhex(file.sha256))
    env = {
        "torch": torch.__version__,
        "device": device,
        "device_name": device_name(device),
        "kernelproof_source": this_source(),  # a verdict from other judging code is not served
    }
    h.update(json.dumps({"settings": options.cache_key_fields(), "env": env}, sort_keys=True).encode())
    return EvaluationKey(h.hexdigest(), submission.task.sha256, submission.solution.sha256)


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
    from kernelproof.executors.ray_executor import RayOptions, evaluate_many_ray

    return evaluate_many_ray(pairs, options, RayOptions(address=address), evaluate=evaluate)


def kernelbench(
    run: KernelBenchRun,
    options: EvalOptions | None = None,
    *,
    executor: str = "local",
    address: str | None = None,
) -> Iterator[tuple[Sample, Verdict]]:
    """Judge every sample of a KernelBench run folder (:func:`kernelproof.report.kernelbench_run.find_run`)
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


def kernelbench_infeasible(
    run: KernelBenchRun, device: str, progress: Any = None
) -> Iterator[tuple[Sample, Verdict]]:
    """(sample, error verdict) of each sample of a KernelBench run this machine cannot judge
    (``environment``, ``too_large``; kernelproof/report/feasibility.py), decided before any
    evaluation, as soon as each is known; ``progress(task)`` is told before each size estimate.
    Never stored, as the evaluation's own verdicts of these codes are not."""
    from kernelproof.executors.local import default_pool, resolve_devices
    from kernelproof.report.feasibility import infeasible

    dev = resolve_devices(device)[0]
    pool = default_pool().builder_pool(dev, EvalOptions())  # the builds land where evaluations look

    def build(path: Path, data: bytes):
        return pool.build(path, data)

    by_path = {s.path: s for s in run.samples if s.path is not None}
    for found in infeasible(run.pairs(), dev, build, progress):
        verdict = blame.error_verdict(str(found.task), str(found.solution), dev, found.reason)
        yield by_path[found.solution], verdict


def _sha256(path: PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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
