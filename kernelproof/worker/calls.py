"""Calling the loaded program, and the reply for an exception out of solution code.

Every call of solution code goes through :func:`call`: under ``torch.no_grad`` (forward is
judged, not its graph) and, in a candidate's worker, with the audit hook's switch on, so that a
forbidden action is reported as happening during a call.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.worker import interpreter, program
from kernelproof.worker.replies import failure
from kernelproof.worker.state import WorkerState

# Words of an exception that mean the CUDA context (or the memory) is gone: this worker is finished.
CUDA_FAULTS = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
)


def call(state: WorkerState, args: list[Any]) -> Any:
    """One forward call of the loaded program on ``args``."""
    state.switch(state.candidate)
    try:
        with torch.no_grad():
            return state.fn(*args)
    finally:
        state.switch(False)


def results(state: WorkerState, out: Any, args: list[Any]) -> list[Any]:
    """What a call is judged on: its outputs, then the arguments the task updates in place."""
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    return flat + [args[i] for i in state.inplace]


def call_failure(exc: BaseException, what: str, path: str) -> dict[str, Any]:
    """The reply for an exception out of solution code: a lost CUDA context or memory is a crash."""
    if isinstance(exc, SystemExit):
        return failure(ReasonCode.FORBIDDEN_CONSTRUCT, "the solution called sys.exit")
    msg, detail = program.describe_exception(exc, path)
    if program.is_build_failure(exc):
        return failure(ReasonCode.COMPILE_ERROR, f"{what}: {exc}", detail)
    lacking = interpreter.environment_cause(exc, path)
    if lacking:
        return failure(ReasonCode.ENVIRONMENT, f"{what}: {lacking}", detail)
    text = str(exc).lower()
    code = ReasonCode.RUNTIME_ERROR
    # Crash or runtime error: the solution's failure either way. Whether a lack of memory was
    # kernelproof's own is never read from here (the solution writes the text): the parent decides
    # it from its own facts (kernelproof/evaluate/memory_blame.py).
    if isinstance(exc, torch.OutOfMemoryError) or any(k in text for k in CUDA_FAULTS):
        code = ReasonCode.CRASH
    return failure(code, f"{what} raised {msg}", detail)
