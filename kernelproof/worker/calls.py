"""Calling the loaded program, and the reply for an exception out of solution code.

Every call of solution code goes through :func:`call`: under ``torch.no_grad`` (forward is
judged, not its graph) and, in a candidate's worker, with the audit hook's switch on, so that a
forbidden action is reported as happening during a call.

What a call returned is read by :func:`outputs`, never through the returned object's own methods:
a tuple subclass whose ``__iter__`` computed the result, or an object whose ``__class__`` claims
to be a tuple, ran the solution's work inside the harness's first look at it (the fingerprint,
after the timed window), while the steady batch, which never looks at its outputs, never paid it.
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker import program
from kernelproof.worker.state import WorkerState

_gc_enabled = gc.isenabled  # bound before any solution runs (identity-checked)
_gc_disable = gc.disable

# Words of an exception that mean the CUDA context (or the memory) is gone: this worker is finished.
CUDA_FAULTS = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
)


def call(state: WorkerState, args: list[Any]) -> Any:
    """One forward call of the loaded program on ``args``; the cyclic collector is left as it was
    found (a timed batch keeps it off: kernelproof.worker.checks.hooks.collector_off)."""
    collecting = _gc_enabled()
    state.switch(state.candidate)
    try:
        with torch.no_grad():
            return state.fn(*args)
    finally:
        state.switch(False)
        if not collecting:
            _gc_disable()


def outputs(out: Any) -> list[Any]:
    """The objects a call returned: the elements a tuple or a list holds, else the one object.

    Read as the container stores them (``tuple.__iter__``/``list.__iter__`` of the real type, C
    code), whatever the class says: ``type()`` and not ``isinstance`` (which trusts ``__class__``)
    decides what a container is, and a subclass's own ``__iter__``, ``__len__`` or ``__getitem__``
    is never called. A namedtuple or one of torch's return types is read the same way.
    """
    kind = type(out)
    if issubclass(kind, tuple):
        return list(tuple.__iter__(out))
    if issubclass(kind, list):
        return list(list.__iter__(out))
    return [out]


def results(state: WorkerState, out: Any, args: list[Any]) -> list[Any]:
    """What a call is judged on: its outputs, then the arguments the task updates in place."""
    return outputs(out) + [args[i] for i in state.inplace]


def call_failure(exc: BaseException, what: str, path: str) -> dict[str, Any]:
    """The reply for an exception out of solution code: a lost CUDA context or memory is a crash.

    Describing the exception runs its own methods (``__str__``, properties): the solution's code.
    One that raises there is the solution's runtime error, named by its type alone, never a
    harness failure that ends the worker."""
    try:
        return _described(exc, what, path)
    except BaseException as inner:  # noqa: BLE001
        return failure(
            ReasonCode.RUNTIME_ERROR,
            f"{what} raised {program.type_name(exc)}, and describing it raised {program.type_name(inner)}",
        )


def _described(exc: BaseException, what: str, path: str) -> dict[str, Any]:
    if isinstance(exc, SystemExit):
        return failure(ReasonCode.FORBIDDEN_CONSTRUCT, "the solution called sys.exit")
    msg, detail = program.describe_exception(exc, path)
    if program.is_build_failure(exc):
        return failure(ReasonCode.COMPILE_ERROR, f"{what}: {exc}", detail)
    if program.is_kernel_compile_failure(exc):
        return failure(
            ReasonCode.COMPILE_ERROR, f"{what} raised {msg} (Triton could not compile a kernel)", detail
        )
    text = str(exc).lower()
    code = ReasonCode.RUNTIME_ERROR
    # Crash or runtime error: the solution's failure either way. Whether a lack of memory was
    # kernelproof's own is never read from here (the solution writes the text): the parent decides
    # it from its own facts (kernelproof/evaluate/memory_blame.py).
    if isinstance(exc, torch.OutOfMemoryError) or any(k in text for k in CUDA_FAULTS):
        code = ReasonCode.CRASH
    excluded = code is ReasonCode.RUNTIME_ERROR and program.never_memory(exc)
    return failure(code, f"{what} raised {msg}", detail, memory_excluded=excluded)
