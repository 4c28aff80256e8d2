"""The same number of cores for candidate and baselines, never the same cores (their CPU affinity).

A candidate that starts its own threads, or forks a process that spins while a baseline is timed,
must neither widen its own share of the machine nor slow the baseline. So each worker gets
``threads`` cores of its own, the candidate's disjoint from the baselines' (baselines are timed one
at a time, so they share theirs), and thread counts to match:

- the affinity is set in the worker before containment and before any candidate code
  (:func:`pin_from_env`, called by kernelproof.sandbox.contain.enter with the values the parent
  put in the worker's environment), and every thread and process it starts inherits it;
- the candidate cannot widen it afterwards: its system-call filter denies ``sched_setaffinity``
  (kernelproof.sandbox.seccomp), and where cgroup v2's cpuset controller can be written its cgroup
  is confined to the same cores (kernelproof.sandbox.limits);
- ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` are ``threads`` in the
  worker's environment (the user's own value no longer reaches it) and the worker calls
  ``torch.set_num_threads(threads)``.

Evaluations in flight together (``--per-device``, several devices) each give their candidate's
worker a set of cores of its own where the machine has them (:func:`take_candidate_cores`): the
last ``threads`` cores for the first, the ``threads`` before them for the next, never the
baselines'. With one set for all, four workers on an H200 host built their ModelNew (a
32768 x 32768 Linear's initialisation on the CPU) and ran their cases on one core of sixteen.

Where the machine has fewer than twice ``threads`` cores the two sides cannot be separated
(:attr:`CpuPlan.separated` is False): the verdict says so, and the candidate's worker is then
only timed against baselines if its whole cgroup can be frozen while they run (else the timing is
``machine_busy``). The parent checks each worker's affinity itself (:func:`affinity_of`).
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

CPUS_ENV = "KERNELPROOF_CPUS"  # the cores the worker pins itself to, e.g. "0,1"
THREADS_ENV = "KERNELPROOF_CPU_THREADS"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class CpuPlan:
    threads: int  # cores (and threads) each worker gets
    candidate: tuple[int, ...]
    baseline: tuple[int, ...]
    separated: bool  # the two sets are disjoint

    def cores(self, role: str) -> tuple[int, ...]:
        return self.candidate if role == "candidate" else self.baseline

    def env(self, role: str) -> dict[str, str]:
        """The worker's environment entries: its cores and its thread counts."""
        n = str(self.threads)
        return {
            CPUS_ENV: ",".join(map(str, self.cores(role))),
            THREADS_ENV: n,
            **dict.fromkeys(THREAD_VARS, n),
        }

    def describe(self, candidate: tuple[int, ...] | None = None) -> str:
        """The plan as the verdict says it; `candidate`: the cores a candidate's worker was given."""
        cand = self.candidate if candidate is None else candidate
        both = f"{self.threads} core(s) each: candidate {_list(cand)}, baselines {_list(self.baseline)}"
        if self.separated:
            return both
        return both + " (too few cores to separate them)"


def plan(threads: int) -> CpuPlan:
    """Cores for each side out of those this process may use: the baselines take the first
    ``threads``, the candidate the last ``threads``, disjoint where there are enough."""
    threads = max(1, int(threads))
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not usable:
        return CpuPlan(threads, (), (), False)
    if len(usable) >= 2 * threads:
        return CpuPlan(threads, tuple(usable[-threads:]), tuple(usable[:threads]), True)
    shared = tuple(usable[:threads])
    return CpuPlan(min(threads, len(usable)), shared, shared, False)


def candidate_sets(threads: int) -> list[tuple[int, ...]]:
    """The disjoint sets of ``threads`` cores a candidate's worker may be given, the last cores
    first (the first is :func:`plan`'s ``candidate``); none overlaps the baselines' where the plan
    separates them, and where it cannot there is one set, shared."""
    p = plan(threads)
    if not p.separated:
        return [p.candidate]
    usable = sorted(os.sched_getaffinity(0))
    rest = usable[p.threads :]
    return [
        tuple(rest[len(rest) - (i + 1) * p.threads : len(rest) - i * p.threads])
        for i in range(len(rest) // p.threads)
    ]


_holders: dict[int, tuple[tuple[int, ...], Callable[[], bool]]] = {}  # lease -> (cores, still held?)
_holders_lock = threading.Lock()
_leases = itertools.count(1)


def take_candidate_cores(threads: int, alive: Callable[[], bool]) -> tuple[int, tuple[int, ...]]:
    """A lease on cores for a candidate's worker: the set fewest live candidate workers of this
    process hold (the last cores on a tie). `alive` says whether the holder still runs: a worker
    that ended without giving its lease back (:func:`give_back_candidate_cores`) no longer counts."""
    sets = candidate_sets(threads)
    with _holders_lock:
        for lease, (_, held) in list(_holders.items()):
            if not held():
                del _holders[lease]
        counts = collections.Counter(cores for cores, _ in _holders.values())
        chosen = min(sets, key=lambda cores: counts[cores])
        lease = next(_leases)
        _holders[lease] = (chosen, alive)
    return lease, chosen


def give_back_candidate_cores(lease: int) -> None:
    with _holders_lock:
        _holders.pop(lease, None)


def pin_from_env() -> str:
    """In the worker, before anything else runs: pin to the cores the parent chose. Returns what
    was done (for the worker's log); nothing when the parent chose none."""
    raw = os.environ.get(CPUS_ENV, "")
    if not raw or not hasattr(os, "sched_setaffinity"):
        return ""
    try:
        cores = {int(c) for c in raw.split(",") if c.strip()}
        os.sched_setaffinity(0, cores)
    except (OSError, ValueError) as exc:
        return f"affinity {raw} not set: {exc}"
    return f"pinned to cores {raw}"


def set_threads_from_env() -> None:
    """torch's own thread count, once torch is imported (the zygote's pool was sized before)."""
    raw = os.environ.get(THREADS_ENV, "")
    if raw.isdigit() and int(raw) > 0:
        import torch

        torch.set_num_threads(int(raw))
        try:
            torch.set_num_interop_threads(int(raw))
        except RuntimeError:
            pass  # already used in this process (a forked worker): its intra-op count is what times


def affinity_of(pid: int) -> tuple[int, ...] | None:
    """The cores ``pid`` may run on now, as the parent reads them (None where it cannot)."""
    try:
        return tuple(sorted(os.sched_getaffinity(pid)))
    except (OSError, AttributeError):
        return None


def _list(cores: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, cores)) + "]" if cores else "[any]"
