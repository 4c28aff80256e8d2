"""The verbs of kernelproof as Python functions: what the CLI, agents, executors and RL trainers call.

``evaluate`` never raises because a candidate is bad: every failure of the solution is a verdict.
It raises :class:`~kernelproof.errors.UsageError` for a missing file or a bad option, and a
broken task comes back as an ``error`` verdict with ``task_error``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import torch

from kernelproof.errors import UsageError
from kernelproof.evaluate import compare_pair, evaluate_pair
from kernelproof.evaluate.requests import device_name
from kernelproof.executors.local import LocalPool, default_pool, resolve_devices, run_many
from kernelproof.options import EvalOptions, normalize_baselines
from kernelproof.source import this_source
from kernelproof.store import served
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict

PathLike = str | Path


def evaluate(
    task: PathLike, solution: PathLike, options: EvalOptions | None = None, *, pool: LocalPool | None = None
) -> Verdict:
    """Evaluate one solution against one task and return its verdict (never raises for bad candidates)."""
    options = _checked(options)
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
    options = _checked(options)
    devices = resolve_devices(options.device)
    pool = pool or default_pool()
    items = [(str(t), str(s)) for t, s in pairs]
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
        if store is not None and served(store, key, options.time_limits()) is not None:
            continue
        out.append(sol)
    return out


def _checked(options: EvalOptions | None) -> EvalOptions:
    options = options or EvalOptions()
    try:
        baselines = normalize_baselines(options.baselines)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if options.device not in ("auto", "cpu", "cuda") and not options.device.startswith("cuda:"):
        raise UsageError(f"--device must be auto, cpu, cuda or cuda:N, not {options.device!r}")
    if options.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {options.device} was asked for, but no CUDA device is visible")
    if options.per_device < 1:
        raise UsageError(f"--per-device must be at least 1, not {options.per_device}")
    return options.replace(baselines=baselines)


def _evaluate_on(task: str, solution: str, options: EvalOptions, device: str, pool: LocalPool) -> Verdict:
    for path, what in ((task, "task"), (solution, "solution")):
        if not Path(path).is_file():
            raise UsageError(f"{what} file not found: {path}")
    store = _open_store(options)
    key = evaluation_key(task, solution, options, device)
    if store is not None and not options.fresh:
        cached = served(store, key, options.time_limits())
        if cached is not None:
            return cached
    # A CUDA or native solution is built before the GPU is taken: its compile (tens of seconds)
    # must not hold the device while other evaluations wait for it. A failed build is reported
    # by the evaluation itself.
    for pending in pool.prebuild([solution], device, options).values():
        concurrent.futures.wait([pending.future])
    with pool.device_slots(device, options.per_device):
        verdict = _judged(task, solution, options, device, pool)
    if options.per_device > 1 and _short_of_memory(verdict):
        # Out of GPU memory while other evaluations held some: this one again, alone on the device.
        with pool.device_alone(device, options.per_device):
            verdict = _judged(task, solution, options, device, pool)
    if verdict.codes and verdict.codes[0] == ReasonCode.TOO_LARGE.value:
        return verdict  # a property of this device and its neighbours at the time: never stored
    if store is not None:
        store.put(key, verdict, options_sha256=options_digest(options), limits=options.time_limits())
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


def _short_of_memory(verdict: Verdict) -> bool:
    """Did the evaluation fail for want of GPU memory (the parent's, or its candidate's)?"""
    for r in verdict.reasons:
        if r.code is ReasonCode.TOO_LARGE:
            return True
        if r.code is ReasonCode.CRASH and "out of memory" in f"{r.message} {r.detail}".lower():
            return True
    return False


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
    if options.db == "":
        return None
    from kernelproof.store import Store, default_db_path

    return Store(options.db or os.environ.get("KERNELPROOF_DB") or default_db_path())


def compare(
    task: PathLike,
    a: PathLike,
    b: PathLike,
    options: EvalOptions | None = None,
    *,
    pool: LocalPool | None = None,
):
    """Paired speedup of solution B over solution A on the task's timed shape (both verified first)."""
    options = _checked(options)
    device = resolve_devices(options.device)[0]
    pool = pool or default_pool()
    with pool.device_slots(device, options.per_device):
        return compare_pair(str(task), str(a), str(b), options, device, pool)
