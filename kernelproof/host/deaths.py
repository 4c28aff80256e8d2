"""Why a worker died, as a reason code and a sentence: from the parent's facts, its log shown.

Split from :mod:`kernelproof.host.process`, which notices the death (a closed socket, a
timeout, a broken frame); this says what it was. The exit status, the audit hook's violation line
and the cgroup's own out-of-memory count decide; the log the solution writes is shown, and decides
only what only a crash of its kernel prints. Whether a lack of GPU memory was kernelproof's is not
decided here: the log cannot say (kernelproof/blame.py decides it from the parent's facts).
"""

from __future__ import annotations

import signal

from kernelproof.errors import WorkerDied
from kernelproof.sandbox.guards import EXIT_VIOLATION, VIOLATION_PREFIX
from kernelproof.sandbox.limits import Cgroup
from kernelproof.wire import protocol


def explain(rc: int | None, log: str, cgroup: Cgroup | None) -> WorkerDied:
    """The death of a worker that exited with ``rc`` (None: it could not be reaped), whose log
    ends with ``log``, in ``cgroup`` (None: it had none)."""
    for line in reversed(log.splitlines()):
        if line.startswith(VIOLATION_PREFIX):
            return WorkerDied("forbidden_construct", "forbidden action: " + line[len(VIOLATION_PREFIX) :], "")
    if rc == EXIT_VIOLATION:
        return WorkerDied("forbidden_construct", "the solution attempted a forbidden action")
    low = log.lower()
    if "illegal memory access" in low or "misaligned address" in low or "unspecified launch failure" in low:
        return WorkerDied("crash", "CUDA error in the solution's kernel (illegal memory access)", tail(log))
    # "out of memory" in the log decides nothing: the solution writes that log. Whether a death
    # was kernelproof's own lack of memory is decided from the parent's facts only
    # (kernelproof/evaluate/memory_blame.py, blame.beyond_the_device); the log is shown.
    if cgroup is not None and cgroup.oom_killed():
        return WorkerDied("crash", "the worker exceeded its host memory limit and was killed", tail(log))
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return WorkerDied("crash", f"the worker died from signal {name}", tail(log))
    if rc == 0:
        return WorkerDied(
            "forbidden_construct", "the solution ended the worker process (sys.exit / os._exit)"
        )
    if rc == protocol.EXIT_HARNESS:
        return WorkerDied(
            "crash",
            f"the worker exited with status {rc}: its harness failed, or the solution ended it "
            "(its log is below)",
            tail(log),
        )
    return WorkerDied("crash", f"the worker exited with status {rc}", tail(log))


def timed_out(timeout_s: float) -> WorkerDied:
    """A worker that did not answer in time (the caller has killed it)."""
    return WorkerDied("timeout", f"the worker did not answer within {timeout_s:.0f} s and was killed")


def violated(found: str, log: str) -> WorkerDied:
    """A worker that broke the reply protocol (``found`` says how): the solution's doing."""
    return WorkerDied(
        "protocol_violation",
        f"the worker broke the reply protocol ({found}): the solution shares the worker's process "
        "and its socket, so the violation is the solution's",
        tail(log),
    )


def tail(log: str, lines: int = 12) -> str:
    """The last lines of a log, as a death's detail shows them."""
    return "\n".join(log.splitlines()[-lines:])
