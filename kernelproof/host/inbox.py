"""The parent's reading of a worker's frame: is it the reply to the request in flight (I10)?

Split from kernelproof.host.process, which owns the worker's life: this only reads. A frame is
the reply when it carries the request's nonce and op, passes its kind's schema
(:mod:`kernelproof.wire.schemas`), and declares exactly the tensors the request expects, all
before any tensor byte is read or allocated. The first way it is not is returned as a sentence;
the caller ends the worker with it (``protocol_violation``).
"""

from __future__ import annotations

from typing import Any

from kernelproof.wire import protocol, schemas
from kernelproof.wire.expected import Expected, refuse_reply


def violation(
    request: dict[str, Any],
    nonce: int | None,
    incoming: protocol.Incoming,
    expect: Expected | None,
    candidate: bool = True,
) -> str | None:
    """The first way a frame is not the reply to `request` (or, with no nonce, the hello);
    ``candidate``: it comes from a candidate's worker (its failures name the solution's codes only)."""
    if nonce is None:
        found = schemas.message_violation(incoming.header, "hello")
        return found or (f"the hello carries {len(incoming.metas)} tensors" if incoming.metas else None)
    found = schemas.reply_violation(request, nonce, incoming.header, len(incoming.metas), candidate)
    if found is None and incoming.metas and incoming.header.get("ok") is True:
        found = tensor_violation(request, incoming, expect)
    return found


def tensor_violation(
    request: dict[str, Any], incoming: protocol.Incoming, expect: Expected | None
) -> str | None:
    """Why a successful reply's tensors, as its header declares them, are not the ones the request
    expects; None when they are. The worker compares its outputs with the expectation before it
    sends any (kernelproof.worker.case_runs, fetch), so a mismatch here is not the harness's reply.
    Without an expectation a reply carries no tensor at all."""
    where = f"{request.get('op')} reply"
    if expect is None:
        return f"{where} carries {len(incoming.metas)} tensors where the request expects none"
    refused = refuse_reply(incoming.header, incoming.specs(), expect)
    if refused is None:
        return None
    return f"{where}: {refused.get('message', '')}"
