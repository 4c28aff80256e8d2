"""What each reply kind may say: the parent's strict reading of a worker's headers (I10).

Why: the candidate shares its process with the harness that answers the parent, and the reply
socket is a plain descriptor there (a write to it raises no audit event). So every header the
parent reads is hostile input. A forged ``time`` reply whose span was a list, not a number, once
raised a TypeError in the parent (``internal_error``, exit 3); a forged ``ok`` reply to a request
without an expectation could declare inline tensors of up to 64 GiB. Here every kind has one
entry: the fields it must and may carry, their types, finite numbers and ranges, list lengths
(some counted against the request), and how many tensors it may carry. Nothing else passes:
an unknown key, a missing one, a NaN time or a kind nobody asked for is a violation, named by
its path (``time reply: span_ms[3] is a list, not a number``).

A failed reply (``ok: false``) has one schema for every kind and carries no tensors; a candidate's
names only the solution's own failures (kernelproof.wire.replies.SOLUTION_FAILURES), since a
code that excuses (``machine_busy``, ``environment``, ``task_error``, ...) is the parent's alone. Messages the
worker starts itself (``hello``; a future build request) have kinds of their own in
:data:`WORKER_MESSAGES`. Adding a kind is one entry in a table.

This module only reads; it never decides a verdict. Valid is not true: a well-formed reply can
still lie, and the parent checks what it can itself (outputs, fingerprints, its own clock).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import SOLUTION_FAILURES

# A check reads one value at a path and returns the first violation it finds, or None.
Check = Callable[[Any, str], "str | None"]

MAX_REPLY_HEADER_BYTES = 16 * 1024 * 1024  # a GPU profile of 10k kernel rows is about 1 MiB
MAX_TEXT_CHARS = 1 << 20  # a message or a traceback in a detail; longer is not the harness's
MAX_LIST = 1 << 20  # items in any list no count bounds more tightly
MAX_MS = 1e9  # about 11.6 days: no span, call or load takes longer (the worker's timeouts)


def _type_name(v: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a bool"}
    return "null" if v is None else names.get(type(v), f"a {type(v).__name__}")


def number(lo: float = -math.inf, hi: float = math.inf, finite: bool = True) -> Check:
    """An int or float (never a bool) in [lo, hi]; with ``finite`` False, NaN and infinities too
    (a fingerprint of a wrong output may be NaN: that is a mismatch for the parent, not a violation)."""

    def check(v: Any, path: str) -> str | None:
        if type(v) not in (int, float):
            return f"{path} is {_type_name(v)}, not a number"
        if not math.isfinite(v):
            return None if not finite else f"{path} is {v}, not a finite number"
        if not lo <= v <= hi:
            return f"{path} is {v}, outside [{lo:g}, {hi:g}]"
        return None

    return check


def integer(lo: int = -(1 << 63), hi: int = (1 << 63) - 1) -> Check:
    def check(v: Any, path: str) -> str | None:
        if type(v) is not int:
            return f"{path} is {_type_name(v)}, not an integer"
        return None if lo <= v <= hi else f"{path} is {v}, outside [{lo}, {hi}]"

    return check


def text(max_chars: int = MAX_TEXT_CHARS, choices: frozenset[str] | None = None) -> Check:
    def check(v: Any, path: str) -> str | None:
        if type(v) is not str:
            return f"{path} is {_type_name(v)}, not a string"
        if len(v) > max_chars:
            return f"{path} has {len(v)} characters, more than {max_chars}"
        if choices is not None and v not in choices:
            return f"{path} is {v[:80]!r}, not one of {sorted(choices)}"
        return None

    return check


def boolean(v: Any, path: str) -> str | None:
    return None if type(v) is bool else f"{path} is {_type_name(v)}, not true or false"


def null_or(inner: Check) -> Check:
    return lambda v, path: None if v is None else inner(v, path)


def either(*checks: Check) -> Check:
    """The first check that accepts; the last one's violation otherwise."""

    def check(v: Any, path: str) -> str | None:
        found = None
        for c in checks:
            found = c(v, path)
            if found is None:
                return None
        return found

    return check


def items(inner: Check, max_len: int = MAX_LIST) -> Check:
    """A list of at most ``max_len`` items, each passing ``inner``."""

    def check(v: Any, path: str) -> str | None:
        if type(v) is not list:
            return f"{path} is {_type_name(v)}, not a list"
        if len(v) > max_len:
            return f"{path} has {len(v)} items, more than {max_len}"
        for i, x in enumerate(v):
            found = inner(x, f"{path}[{i}]")
            if found:
                return found
        return None

    return check


def row(*columns: Check) -> Check:
    """A list of exactly these columns (a kernel row: name, stream, milliseconds)."""

    def check(v: Any, path: str) -> str | None:
        if type(v) is not list:
            return f"{path} is {_type_name(v)}, not a list"
        if len(v) != len(columns):
            return f"{path} has {len(v)} items, not {len(columns)}"
        for i, (x, c) in enumerate(zip(v, columns)):
            found = c(x, f"{path}[{i}]")
            if found:
                return found
        return None

    return check


def mapping(values: Check, max_len: int = 256) -> Check:
    """An object of string keys, each value passing ``values``."""

    def check(v: Any, path: str) -> str | None:
        if type(v) is not dict:
            return f"{path} is {_type_name(v)}, not an object"
        if len(v) > max_len:
            return f"{path} has {len(v)} keys, more than {max_len}"
        for k, x in v.items():
            found = text(200)(k, f"{path} key") or values(x, f"{path}.{k}")
            if found:
                return found
        return None

    return check


def record(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """An object with exactly these keys: every required one, any optional one, nothing else."""
    optional = optional or {}

    def check(v: Any, path: str) -> str | None:
        if type(v) is not dict:
            return f"{path} is {_type_name(v)}, not an object"
        for k in required:
            if k not in v:
                return f"{path} has no {k!r}"
        for k, x in v.items():
            rule = required.get(k) or optional.get(k)
            if rule is None:
                return f"{path} has an unknown key {str(k)[:80]!r}"
            found = rule(x, f"{path}.{k}")
            if found:
                return found
        return None

    return check


# A count a list must have, read from the request (the seeds of a time request): None, no count.
Count = Callable[[dict[str, Any]], "int | None"]


@dataclass(frozen=True)
class Kind:
    """One reply kind: the fields of its successful reply, the lists counted against the request,
    and how many tensors it may carry (only against the request's expectation)."""

    required: Mapping[str, Check]  # keys an ``ok: true`` reply must carry, besides ok, op, nonce
    optional: Mapping[str, Check] = field(default_factory=dict)  # keys it may carry
    counted: Mapping[str, Count] = field(default_factory=dict)  # field -> its length from the request
    tensors: bool = False  # may carry output tensors: the request's expectation says which

    def violation(self, reply: dict[str, Any], request: dict[str, Any], where: str) -> str | None:
        body = {k: v for k, v in reply.items() if k not in ENVELOPE}
        found = record(self.required, self.optional)(body, where)
        if found:
            return found
        for name, count in self.counted.items():
            want = count(request)
            got = body.get(name)
            if want is not None and isinstance(got, list) and len(got) != want:
                return f"{where}.{name} has {len(got)} items, the request asked for {want}"
        return None


_CODES = frozenset(c.value for c in ReasonCode)
ENVELOPE = ("ok", "op", "nonce")  # every reply: success, the kind it answers, the request's nonce
MS = number(0.0, MAX_MS)
SIGNED_MS = number(-MAX_MS, MAX_MS)
PAIR = row(number(finite=False), number(finite=False))  # a fingerprint: <w, t>, ||t|| (NaN: wrong output)
INDEX = integer(0, MAX_LIST)
SEED = integer(0, (1 << 63) - 1)
NAME = text(4096)


def _seeds(request: dict[str, Any]) -> int | None:
    seeds = request.get("seeds")
    return len(seeds) if isinstance(seeds, list) else None


def _calls(request: dict[str, Any]) -> int | None:
    calls = request.get("calls")
    return calls if type(calls) is int else None


def _failed(codes: frozenset[ReasonCode]) -> Check:
    """A failed reply naming one of ``codes``."""
    return record(
        {"code": text(64, frozenset(c.value for c in codes)), "message": text()},
        {
            "detail": text(),
            "handoff": text(16, frozenset({"failed"})),  # a lent input could not be mapped (run)
            "build": mapping(either(items(NAME, 4096), integer(0))),  # the import's build report (load)
            # the exception's class can be no lack of device memory (kernelproof/worker/calls.py)
            "memory_excluded": boolean,
        },
    )


# A baseline worker's failure (kernelproof's and the task's code only) may name any code; a
# candidate's only the solution's own failures: every other code is the parent's to set (I9, I10).
FAILED = _failed(frozenset(ReasonCode))
CANDIDATE_FAILED = _failed(SOLUTION_FAILURES)

# Successful replies, by the request's op. The launch and kernel lists are the worker's account:
# checked for form here, never trusted as fact (docs/verdict.md, "checked_by").
REPLIES: dict[str, Kind] = {
    "prebuilt": Kind({}),
    "load": Kind(
        {"load_s": number(0.0, MAX_MS), "weights": NAME, "attributes": integer(0, MAX_LIST)},
        {
            "flags": mapping(null_or(either(boolean, number(), text(200)))),
            "build": mapping(either(items(NAME, 4096), integer(0))),
            "unmatched_state": items(NAME, 16),  # ModelNew's state the reference's weights do not name
        },
    ),
    "run": Kind(
        {"second_run_fingerprints": items(PAIR, 4096), "checksums": items(number(finite=False), 64)},
        {
            "output_reused": boolean,
            "delivered": items(INDEX, 4096),
            "steps_s": mapping(number(0.0, MAX_MS)),
        },
        tensors=True,
    ),
    "fetch": Kind({}, {"delivered": items(INDEX, 4096)}, tensors=True),
    "rest": Kind({}),  # a baseline worker between evaluations (kernelproof.worker.message_loop.rest)
    # A timed batch (kernelproof.measure.batch): the ``time`` request is answered by steps (STEPS
    # below), and its ``end`` by the batch's figures, one per call the batch asked for.
    "end": Kind(
        {
            "span_ms": items(MS),
            "event_ms": items(SIGNED_MS),
            "activities": items(integer(-1, MAX_LIST)),
            "output_reused": integer(0, MAX_LIST),
            "lost": items(INDEX),
            "wall_ms": MS,
            "host_ms": items(MS),
            "harness_ms": mapping(MS),
            "clock": NAME,
        },
        counted={"span_ms": _calls, "event_ms": _calls, "activities": _calls, "host_ms": _calls},
    ),
    # every call's fingerprints, one pair per output: the parent checks calls it picks afterwards
    "steady": Kind(
        {"per_call_ms": MS, "fingerprints": items(items(PAIR, 4096))}, counted={"fingerprints": _calls}
    ),
    "profile": Kind(
        # A device activity: its name (a templated C++ kernel's runs to kilobytes), the stream the
        # profiler names (any id it gives), its duration (as the profiler's clock gives it), the
        # bytes a copy or memset moved and the largest input of the ATen op that launched it, in
        # elements (-1 for either where unknown: kernelproof.measure.coverage).
        {"kernels": items(row(text(1 << 16), integer(), SIGNED_MS, integer(-1), integer(-1)))},
        {
            "launches": items(row(NAME, boolean)),
            "unwatched": items(row(NAME, boolean)),
            "aten_outside": items(row(NAME, integer(0, 1 << 31))),
            # the ATen ops that did work inside each extension launch: [launch label, op, calls,
            # the elements they worked over: each call's largest input, summed]
            "aten_in_launches": items(row(NAME, NAME, integer(0, 1 << 31), integer(0, 1 << 62))),
            "unmarked": text(4096),
        },
    ),
    "bye": Kind({}),
}

# The steps of a timed batch, by the parent message they answer: no ``ok`` key, no tensors. A
# window closed (the answer to ``time`` for call 0 and to ``next`` for the others), and a call's
# fingerprints (the answer to ``project``, whose seed the parent sent after that window).
_CLOSED = record({"step": text(16, frozenset({"closed"})), "index": INDEX})
STEPS: dict[str, Check] = {
    "time": _CLOSED,
    "next": _CLOSED,
    "project": record(
        {"step": text(16, frozenset({"fingerprint"})), "index": INDEX, "fingerprints": items(PAIR, 4096)}
    ),
}

# Messages the worker starts itself, by their op: checked before any use, in their own schema.
WORKER_MESSAGES: dict[str, Check] = {
    "hello": record(
        {"op": text(16), "pid": integer(1), "python": NAME, "torch": NAME, "cuda_available": boolean},
        {
            "triton": null_or(NAME),
            "cuda": null_or(NAME),
            "gpu": NAME,
            "profiler_warm_s": null_or(number(0.0, MAX_MS)),
            "handoff": boolean,
        },
    ),
}


def reply_violation(
    request: dict[str, Any], nonce: int, reply: dict[str, Any], n_tensors: int, candidate: bool = True
) -> str | None:
    """The first way ``reply`` breaks the protocol as an answer to ``request`` (sent with
    ``nonce``), or None. Tensors are counted here; their specs are the expectation's business.

    ``candidate``: the reply comes from a candidate's worker, whose failed reply may name only the
    solution's own failures (kernelproof.wire.replies.SOLUTION_FAILURES)."""
    op = request.get("op")
    where = f"{op} reply"
    if reply.get("nonce") != nonce or type(reply.get("nonce")) is not int:
        return f"{where} does not carry the nonce of the request in flight (an unrequested frame)"
    if reply.get("op") != op:
        return f"{where} answers a {str(reply.get('op'))[:40]!r} request"
    if "ok" not in reply and op in STEPS:
        body = {k: v for k, v in reply.items() if k not in ENVELOPE}
        found = STEPS[str(op)](body, f"{op} step")
        return found or (f"{op} step carries {n_tensors} tensors" if n_tensors else None)
    ok = reply.get("ok")
    if ok is False:
        body = {k: v for k, v in reply.items() if k not in ENVELOPE}
        code = body.get("code")
        if candidate and type(code) is str and code in _CODES and ReasonCode(code) not in SOLUTION_FAILURES:
            return (
                f"failed {where} names the code {code[:64]!r}, which only the parent sets from its own "
                "facts: a candidate's failed reply names only the solution's own failures"
            )
        found = (CANDIDATE_FAILED if candidate else FAILED)(body, f"failed {where}")
        if found:
            return found
        return f"failed {where} carries {n_tensors} tensors" if n_tensors else None
    if ok is not True:
        return f"{where}.ok is {_type_name(ok)}, not true or false"
    kind = REPLIES.get(str(op))
    if kind is None:
        return f"{where}: no reply kind {op!r} is known"
    found = kind.violation(reply, request, where)
    if found:
        return found
    if n_tensors and not kind.tensors:
        return f"{where} carries {n_tensors} tensors; this kind carries none"
    return None


def message_violation(message: dict[str, Any], expected_op: str) -> str | None:
    """The first way a message the worker starts (``hello``) breaks its schema, or None."""
    op = message.get("op")
    if op != expected_op:
        return f"a {expected_op} message was due; the worker sent {str(op)[:40]!r}"
    return WORKER_MESSAGES[expected_op](message, op)
