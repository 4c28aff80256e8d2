"""What a KernelBench run cannot judge on this machine, decided before any evaluation starts.

Why: a run on a small machine spent a quarter of an hour before printing that two tasks were too
large and two samples needed CUDA (issue 49), answers that cost seconds. Both are decided here from
the parent's own facts, the same facts and the same functions an evaluation decides them by at its
start (kernelproof/evaluate/setup.py), so the answer is the one the evaluation would reach, only
sooner (I10, I11):

- ``environment``: the sample truly asked for a CUDA build when the builder imported it (its build
  record, :attr:`kernelproof.build.BuildResult.cuda`) and this machine cannot build it or the run's
  device is not a CUDA device (:func:`kernelproof.evaluate.machine.unmet`). Text decides nothing: it
  only picks which samples are built first (:func:`~kernelproof.evaluate.machine.looks_like_cuda`),
  and a build this machine cannot do is refused at once, compiling nothing. A build it can do lands
  in the build cache, where the sample's evaluation finds it.
- ``too_large``: one case of the problem needs more memory than the device has, estimated on the meta
  device (:func:`kernelproof.verify.footprint.case_need`); nothing is allocated. One estimate per
  problem, whatever its number of samples.

Neither is the candidate's: both are errors of the evaluation, never stored (kernelproof/api.py).
A task that does not load, or whose reference does not run on the meta device, is left to the
evaluation, which reports it in its own terms.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelproof.build import BuildResult
from kernelproof.evaluate.machine import looks_like_cuda, unmet
from kernelproof.measure import busy
from kernelproof.solution import read_solution
from kernelproof.verdict import Reason, ReasonCode


@dataclass(frozen=True)
class Infeasible:
    """A sample this machine cannot judge, and why (an ``environment`` or ``too_large`` reason)."""

    task: Path
    solution: Path
    reason: Reason


Builder = Callable[[Path, bytes], BuildResult]  # a sample's path and bytes -> its build (the pool's)


def lacking(solution: Path, device: str, build: Builder) -> Reason | None:
    """The ``environment`` reason of a sample whose build asked for CUDA this machine cannot build
    or run, or None. Only a sample whose text looks like CUDA is built here (the rest are left to
    their evaluation, which decides the same way); the decision is its build's record's."""
    file = read_solution(str(solution))
    if file.triage.syntax_error or not looks_like_cuda(file):
        return None
    why = unmet(build(solution, file.data), device)
    return None if why is None else Reason(ReasonCode.ENVIRONMENT, why)


def oversize(task: Path, device: str) -> Reason | None:
    """The ``too_large`` reason of a problem one case of which does not fit ``device``, or None."""
    from kernelproof.errors import TaskError
    from kernelproof.task import load_task, variants_for
    from kernelproof.verify import footprint

    try:
        loaded = load_task(task)
    except TaskError:
        return None  # the evaluation says task_error, with its own message
    need = footprint.case_need(loaded, variants_for(loaded, torch.device(device).type), device)
    if not need.too_large:
        return None
    return Reason(ReasonCode.TOO_LARGE, footprint.refusal_message(need, device))


def infeasible(
    pairs: list[tuple[Path, Path]],
    device: str,
    build: Builder,
    progress: Callable[[Path], None] | None = None,
) -> Iterator[Infeasible]:
    """Each (task, sample) pair this machine cannot judge, as soon as it is known: first the samples
    it cannot build or run (`build` builds those that look like CUDA: refused at once when this
    machine cannot, cached for their evaluation when it can), then those of problems too large for
    the device (a meta-device estimate per problem; ``progress(task)`` is told before each)."""
    left = []
    for task, solution in pairs:
        reason = lacking(solution, device, build)
        if reason is not None:
            yield Infeasible(task, solution, reason)
        else:
            left.append((task, solution))
    sized: dict[Path, Reason | None] = {}
    for task, solution in left:
        if task not in sized:
            if progress is not None:
                progress(task)
            sized[task] = oversize(task, device)
        if sized[task] is not None:
            yield Infeasible(task, solution, sized[task])


QUIET_POLL_S = 2.0


def quiet_within(max_s: float) -> bool:
    """Whether the machine became quiet enough to time within ``max_s`` seconds: fewer other
    runnable tasks than its cores less one, by the reading a timing's own busy check makes
    (kernelproof/measure/busy.py). What a sample a busy machine could not time waits for before it
    is judged again."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    deadline = time.monotonic() + max_s
    while True:
        if busy.others_runnable() <= max(0, cores - 1):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(QUIET_POLL_S)
