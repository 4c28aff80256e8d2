"""A worker's reply, as both sides of the wire read it: the one place a reply becomes a Reason.

Every request gets one JSON header back. A failed one carries ``ok: false`` and a reason code that
is a :class:`~kernelproof.verdict.ReasonCode` value on both sides of the wire (I9): the worker
builds it with :func:`failure`, the parent reads it with :func:`reason_of`. A code outside the
enum means the worker was broken or its socket forged: a protocol violation, never quietly a
``runtime_error``.

The candidate shares its worker's process and can write that worker's socket (its nonce, its
state, every fd are readable from solution code, docs/threat-model.md): a candidate's failed reply
is the candidate's word. So it may name only the solution's own failures
(:data:`SOLUTION_FAILURES`); every code that excuses or blames someone else (``machine_busy``,
``environment``, ``too_large``, ``task_error``, ``timeout``, ``internal_error``, ...) is set by the
parent alone, from its own facts, and a candidate's reply naming one is ``protocol_violation``
(kernelproof.wire.schemas, I10). That the machine lacks what a solution needs is never the
worker's to say: the parent decides ``environment`` from its own facts, the builder's record of the
CUDA builds the solution truly asked for (kernelproof.evaluate.machine).
"""

from __future__ import annotations

from typing import Any

from kernelproof.verdict import Reason, ReasonCode
from kernelproof.wire.protocol import ProtocolError

# The codes a candidate's failed reply may name: failures of the solution, each seen in its worker
# (an exception, an output's type or storage, the inputs, threads, flags, replaced harness code).
# Everything else is decided by the parent from its own facts. Extend only with a failure that the
# candidate's process alone can see and that is the solution's whoever reports it.
SOLUTION_FAILURES = frozenset(
    {
        ReasonCode.COMPILE_ERROR,
        ReasonCode.RUNTIME_ERROR,
        ReasonCode.CRASH,
        ReasonCode.MISSING_RESULT,
        ReasonCode.WRONG_SHAPE,
        ReasonCode.WRONG_DTYPE,
        ReasonCode.WRONG_TYPE,
        ReasonCode.INPUT_MUTATED,
        ReasonCode.OUTPUT_ALIASES_INPUT,
        ReasonCode.THREAD_LEAK,
        ReasonCode.FORBIDDEN_CONSTRUCT,
        ReasonCode.FLAGS_CHANGED,
        ReasonCode.HARNESS_HOOKED,
        ReasonCode.TIMING_TAMPER,
    }
)


def failure(
    code: ReasonCode, message: str, detail: str = "", memory_excluded: bool = False, **extra: Any
) -> dict[str, Any]:
    """The header of a failed request (the worker side). `memory_excluded`: the exception's class is
    one no lack of device memory takes (kernelproof/worker/program.py, ``never_memory``); sent only
    when true, and read back (:func:`reason_of`) only with a runtime error."""
    excluded = {"memory_excluded": True} if memory_excluded else {}
    return {
        "ok": False,
        "code": ReasonCode(code).value,
        "message": message,
        "detail": detail,
        **extra,
        **excluded,
    }


def reason_of(reply: dict[str, Any], where: str = "") -> Reason:
    """The Reason a failed reply gives (the parent side); `where` prefixes the message ("case x").

    Raises :class:`ProtocolError` when the reply names no code, or one kernelproof does not know.
    """
    raw = reply.get("code")
    try:
        code = ReasonCode(raw)
    except ValueError:
        raise ProtocolError(f"the worker's reply names an unknown reason code {raw!r}") from None
    prefix = f"{where}: " if where else ""
    # only a runtime error can be excluded from the memory blame, and only by an explicit true
    excluded = code is ReasonCode.RUNTIME_ERROR and reply.get("memory_excluded") is True
    return Reason(code, prefix + str(reply.get("message", "")), str(reply.get("detail", "")), excluded)
