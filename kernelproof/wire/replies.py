"""A worker's reply, as both sides of the wire read it: the one place a reply becomes a Reason.

Every request gets one JSON header back. A failed one carries ``ok: false`` and a reason code that
is a :class:`~kernelproof.verdict.ReasonCode` value on both sides of the wire (I9): the worker
builds it with :func:`failure`, the parent reads it with :func:`reason_of`. The worker is
kernelproof's own code, so a code outside the enum means the worker was broken or its socket
forged: a protocol violation, never quietly a ``runtime_error``.
"""

from __future__ import annotations

from typing import Any

from kernelproof.verdict import Reason, ReasonCode
from kernelproof.wire.protocol import ProtocolError


def failure(code: ReasonCode, message: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    """The header of a failed request (the worker side)."""
    return {"ok": False, "code": ReasonCode(code).value, "message": message, "detail": detail, **extra}


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
    return Reason(code, prefix + str(reply.get("message", "")), str(reply.get("detail", "")))
