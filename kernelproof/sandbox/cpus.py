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

Where the machine has fewer than twice ``threads`` cores the two sides cannot be separated
(:attr:`CpuPlan.separated` is False): the verdict says so, and the candidate's worker is then
only timed against baselines if its whole cgroup can be frozen while they run (else the timing is
``machine_busy``). The parent checks each worker's affinity itself (:func:`affinity_of`).
"""

from __future__ import annotations

import os
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

    def describe(self) -> str:
        both = f"{self.threads} core(s) each: candidate {_list(self.candidate)}, baselines {_list(self.baseline)}"
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
