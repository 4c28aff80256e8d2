"""The memory-checker gate (``--sanitize``): the first case under NVIDIA's compute-sanitizer.

Out-of-bounds accesses that land in valid memory, shared-memory races and reads of uninitialised
device memory can pass a comparison by luck (A2, A3). compute-sanitizer's memcheck, racecheck and
initcheck tools see them directly. Each tool runs the candidate's first case once in its own
worker, started under the tool; any error it reports rejects the candidate with
``sanitizer_error`` and the tool's own first lines as evidence. GPU only; slow (minutes), so
opt-in.
"""

from __future__ import annotations

import os
import re
import shutil
import time

from kernelproof.host.process import SpawnSpec, WorkerDied, WorkerProcess
from kernelproof.verdict import Reason, ReasonCode

TOOLS = ("memcheck", "racecheck", "initcheck")
SUMMARY = re.compile(r"ERROR SUMMARY:\s+(\d+)\s+error")
# The first line of each error record, printed as the error happens: the evidence does not depend on
# the tool's summary, which it prints only when the worker exits (a worker killed at the deadline
# leaves none).
RECORD = re.compile(
    r"^========= (Invalid |Program hit |Error|Uninitialized |Race |Misaligned |Out of range |Barrier |Warning: Race)",
    re.M,
)
# The whole gate: torch starts several times slower under a tool, and a stuck tool must not hang a run.
BUDGET_S = 420.0
EXIT_WAIT_S = 20.0  # a tool prints its summary when the worker exits; its records come earlier
# Every tensor its own cudaMalloc: memcheck knows allocations, not tensors, and a read past a tensor
# that lands inside the caching allocator's segment would look legal.
SANITIZE_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


def sanitizer_path() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    default = "/usr/local/cuda/bin/compute-sanitizer"
    return default if os.path.exists(default) else None


def sanitize(
    run_first_case, device: str, tools: tuple[str, ...] = TOOLS, budget_s: float = BUDGET_S
) -> tuple[list[Reason], list[str]]:
    """Run ``run_first_case(worker, timeout_s)`` under each tool; return (reasons, notes).

    A tool that cannot finish inside the budget is named in the notes with the last lines of its
    output: the gate did not run, which is not the same as a clean result.
    """
    exe = sanitizer_path()
    if exe is None:
        return [], ["--sanitize: compute-sanitizer not found; the memory-checker gate was not run"]
    reasons, notes = [], []
    deadline = time.monotonic() + budget_s
    for tool in tools:
        left = deadline - time.monotonic()
        if left < 30:
            notes.append(f"--sanitize {tool}: not run, the gate's {budget_s:.0f} s budget is spent")
            continue
        started = time.monotonic()
        w = WorkerProcess(
            SpawnSpec(
                "candidate",
                device,
                env=dict(SANITIZE_ENV),
                wrapper=(exe, "--tool", tool, "--print-limit", "20"),
            )
        )
        try:
            run_first_case(w, max(left - EXIT_WAIT_S, 10.0))
        except WorkerDied as died:
            notes.append(f"--sanitize {tool}: the worker died ({died.message})")
        rc = w.finish(timeout_s=min(EXIT_WAIT_S, max(deadline - time.monotonic(), 5.0)))
        log = w.log_tail(20000)
        w.close()
        m = SUMMARY.search(log)
        records = RECORD.findall(log)
        took = time.monotonic() - started
        if m is None and not records:
            tail = " | ".join(ln.strip() for ln in log.splitlines()[-6:] if ln.strip())
            notes.append(
                f"--sanitize {tool}: no summary from compute-sanitizer (exit {rc}, {took:.0f} s): {tail[:600]}"
            )
            continue
        errors = int(m.group(1)) if m else len(records)
        how = "" if m else ", counted from its streamed records (no summary at exit)"
        notes.append(f"--sanitize {tool}: {errors} errors ({took:.0f} s{how})")
        if errors:
            lines = [ln for ln in log.splitlines() if ln.startswith("=========")][:12]
            reasons.append(
                Reason(
                    ReasonCode.SANITIZER_ERROR,
                    f"compute-sanitizer {tool} reported {errors} errors",
                    "\n".join(lines),
                )
            )
            break  # one tool's evidence rejects; the others would only cost minutes
    return reasons, notes
