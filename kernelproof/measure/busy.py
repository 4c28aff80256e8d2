"""Is this machine quiet enough to time on? Decided from what the candidate cannot influence.

Two readings, both taken while the candidate's worker stands still (paused, see
kernelproof.host.process.WorkerProcess.frozen), so neither its threads nor any process it
started count:

- **Load**: the kernel's count of runnable tasks (``procs_running`` in /proc/stat), sampled a few
  times; the sampling thread itself is one of them. Timing needs one core for the worker being
  timed (``cores_each`` of them); when more other tasks want to run than the remaining cores hold,
  a timed call shares its core with a stranger.
- **A/A spread**: the baselines' own round figures. A baseline runs the same program on the same
  inputs every round, so the spread of its per-round figures (the median absolute deviation of
  their logarithms, as a factor) is the noise any speedup of this run carries. Baselines are
  timed while the candidate stands still, so the candidate cannot widen it.

When either says busy, the verdict is the error ``machine_busy`` (exit 2, never stored) with the
figures, and the timing is not reported as a result; ``--time-when-busy`` times anyway and flags it.
A GPU's timing runs on the device (its quiet check is the device gate's); on a GPU machine only
the A/A spread applies, since the host's load is not what a device span measures.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

LOAD_SAMPLES = 8
LOAD_INTERVAL_S = 0.025
AA_MAX_FACTOR = 1.15  # a baseline's rounds may scatter by this factor (MAD of the logs) at most
AA_MIN_ROUNDS = 3  # fewer rounds than this say nothing about the spread


@dataclass(frozen=True)
class Quiet:
    busy: bool
    others_runnable: float  # other runnable tasks while the candidate stood still (mean)
    cores: int  # cores this process may use
    aa_factor: float | None  # the baselines' round-to-round scatter, as a factor (1.0 = none)
    why: str  # what made it busy, or ""

    def to_json(self) -> dict[str, object]:
        return {
            "busy": self.busy,
            "others_runnable": round(self.others_runnable, 2),
            "cores": self.cores,
            "aa_factor": None if self.aa_factor is None else round(self.aa_factor, 4),
            "why": self.why,
        }

    def message(self) -> str:
        return (
            f"the machine is too busy to time: {self.why}. Speedups measured now would be noise; "
            "run again when it is quieter, time with --time-when-busy (flagged), or check correctness "
            "alone with --correctness-only"
        )


def runnable_now() -> int | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def others_runnable() -> float:
    """Mean runnable tasks other than the sampling thread, over a few samples (0.0 where unknown)."""
    got = []
    for _ in range(LOAD_SAMPLES):
        n = runnable_now()
        if n is not None:
            got.append(max(0, n - 1))
        time.sleep(LOAD_INTERVAL_S)
    return float(np.mean(got)) if got else 0.0


def waited_ms(pids: list[int]) -> float | None:
    """A running count, in ms, of how long others kept the calling thread and each of ``pids``
    waiting for a core; None where the kernel does not say. Read twice, its difference is the wait.

    From /proc/<pid>/task/<tid>/schedstat (time on a core, ``run_delay``: time runnable but not
    running): the calling thread's ``run_delay``, and each process's main thread's (the one that
    answers the parent) less the time its own other threads ran meanwhile (a process's threads
    sharing its cores keep each other waiting: its own work, not a neighbour's). A timed call whose
    worker or parent waits on a neighbour takes longer on the parent's clock than in its window:
    load, not work outside the window. A process can add to this figure, never take from it, so it
    is only ever read to withhold a figure, never to let one stand."""
    own = _schedstat("/proc/thread-self/schedstat")
    if own is None:
        return None
    total = own[1]
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        main = _schedstat(f"/proc/{pid}/task/{pid}/schedstat")
        if main is None:
            return None
        total += main[1]
        for tid in tids:
            other = _schedstat(f"/proc/{pid}/task/{tid}/schedstat") if tid != str(pid) else None
            total -= other[0] if other is not None else 0
    return total / 1e6


def _schedstat(path: str) -> tuple[int, int] | None:
    """(ns on a core, ns runnable waiting for one) of one thread; None where unreadable or ended."""
    try:
        with open(path) as f:
            on_core, waiting = f.read().split()[:2]
        return int(on_core), int(waiting)
    except (OSError, ValueError):
        return None


def aa_factor(baseline_rounds_ms: list[list[float]]) -> float | None:
    """The largest round-to-round scatter of any baseline, as a factor (exp of the MAD of log figures)."""
    out = None
    for rounds in baseline_rounds_ms:
        x = np.asarray([r for r in rounds if r > 0 and math.isfinite(r)], dtype=np.float64)
        if x.size < AA_MIN_ROUNDS:
            continue
        logs = np.log(x)
        f = float(np.exp(np.median(np.abs(logs - np.median(logs)))))
        out = f if out is None else max(out, f)
    return out


def judge(others: float, cores_each: int, baseline_rounds_ms: list[list[float]], cuda: bool) -> Quiet:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    spare = max(0, cores - cores_each)
    aa = aa_factor(baseline_rounds_ms)
    why = []
    if not cuda and others > spare:
        why.append(
            f"{others:.1f} other tasks were runnable on average while the candidate stood still, on {cores} "
            f"cores of which {cores_each} time a worker"
        )
    if aa is not None and aa > AA_MAX_FACTOR:
        why.append(
            f"the baselines' own rounds scattered by a factor of {aa:.2f} (at most {AA_MAX_FACTOR:g} is quiet)"
        )
    return Quiet(bool(why), others, cores, aa, "; ".join(why))
