"""The memory-checker gate (``--sanitize``): the first case under NVIDIA's compute-sanitizer.

Out-of-bounds accesses that land in valid memory, shared-memory races and reads of uninitialised
device memory can pass a comparison by luck (A2, A3). compute-sanitizer's memcheck, racecheck and
initcheck tools see them directly. Each tool runs the candidate's first case once in its own
worker, started under the tool; any error it reports rejects the candidate with
``sanitizer_error`` and the tool's own first lines as evidence. GPU only; slow (minutes), so
opt-in.
"""

from __future__ import annotations

import re
import shutil

from kernelproof.executors.process import SpawnSpec, WorkerDied, WorkerProcess
from kernelproof.verdict import Reason, ReasonCode

TOOLS = ("memcheck", "racecheck", "initcheck")
SUMMARY = re.compile(r"ERROR SUMMARY:\s+(\d+)\s+error")


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer") or (
        "/usr/local/cuda/bin/compute-sanitizer"
        if shutil.os.path.exists("/usr/local/cuda/bin/compute-sanitizer")
        else None
    )


def sanitize(run_first_case, device: str, tools: tuple[str, ...] = TOOLS) -> tuple[list[Reason], list[str]]:
    """Run ``run_first_case(worker)`` under each tool; return (reasons, notes)."""
    exe = sanitizer_path()
    if exe is None:
        return [], ["--sanitize: compute-sanitizer not found; the memory-checker gate was not run"]
    reasons, notes = [], []
    for tool in tools:
        w = WorkerProcess(
            SpawnSpec("candidate", device, wrapper=(exe, "--tool", tool, "--print-limit", "20"))
        )
        try:
            run_first_case(w)
        except WorkerDied as died:
            notes.append(f"--sanitize {tool}: the worker died ({died.message})")
        rc = w.finish()
        log = w.log_tail(20000)
        w.close()
        m = SUMMARY.search(log)
        if m is None:
            notes.append(f"--sanitize {tool}: no summary from compute-sanitizer (exit {rc})")
            continue
        errors = int(m.group(1))
        notes.append(f"--sanitize {tool}: {errors} errors")
        if errors:
            lines = [ln for ln in log.splitlines() if ln.startswith("=========")][:12]
            reasons.append(
                Reason(
                    ReasonCode.SANITIZER_ERROR,
                    f"compute-sanitizer {tool} reported {errors} errors",
                    "\n".join(lines),
                )
            )
    return reasons, notes
