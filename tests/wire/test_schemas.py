"""Every reply kind has a strict schema: a forged or malformed reply is named by its first violation.

The candidate shares the worker's process and can write its socket, so the parent reads each reply
as hostile input (I10): the nonce and op of the request in flight, the kind's keys and types,
finite numbers in range, lists as long as the request asked, and no tensors where the kind carries
none. These tests drive kernelproof.wire.schemas directly with the replies the worker sends and
with forgeries of each kind.
"""

from __future__ import annotations

import math

import pytest

from kernelproof.wire import schemas

NONCE = 12345
SEEDS = [1, 2, 3]

# One request and one well-formed successful reply per kind, as the worker sends them.
GOOD = {
    "prebuilt": ({"op": "prebuilt"}, {}),
    "load": (
        {"op": "load"},
        {
            "load_s": 0.2,
            "weights": "by_name",
            "attributes": 0,
            "flags": {"matmul.allow_tf32": False, "float32_matmul_precision": "highest"},
            "build": {"inline": ["split"], "native_compiled": 0},
        },
    ),
    "run": (
        {"op": "run"},
        {"second_run_fingerprints": [[0.5, 2.0]], "checksums": [3.0], "steps_s": {"inputs": 0.01}},
    ),
    "fetch": ({"op": "fetch", "index": 0}, {"delivered": [0]}),
    "end": (
        {"op": "end", "calls": 3},
        {
            "span_ms": [0.1, 0.2, 0.1],
            "event_ms": [0.1, 0.2, 0.1],
            "activities": [-1, -1, -1],
            "output_reused": 0,
            "lost": [],
            "wall_ms": 3.0,
            "host_ms": [0.1, 0.2, 0.1],
            "harness_ms": {"prepare": 0.3},
            "clock": "cpu-perf-counter",
        },
    ),
    "steady": (
        {"op": "steady", "seed": 7, "calls": 2},
        {"per_call_ms": 0.05, "fingerprints": [[[1.0, 2.0]], [[1.5, 2.5]]]},
    ),
    "profile": (
        {"op": "profile", "seed": 1},
        {"kernels": [["my_kernel", 7, 0.02, -1, 4096]], "launches": [["triton:k", True]], "aten_outside": []},
    ),
}


def _reply(kind: str, **fields) -> tuple[dict, dict]:
    request, body = GOOD[kind]
    return request, {"ok": True, "op": kind, "nonce": NONCE, **body, **fields}


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_the_worker_s_own_reply_of_each_kind_is_accepted(kind):
    request, reply = _reply(kind)
    assert schemas.reply_violation(request, NONCE, reply, 0) is None


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_rejects_a_reply_of_each_kind_without_the_nonce_of_the_request_in_flight(kind):
    request, reply = _reply(kind)
    for forged in ({**reply, "nonce": NONCE + 1}, {k: v for k, v in reply.items() if k != "nonce"}):
        found = schemas.reply_violation(request, NONCE, forged, 0)
        assert found and "nonce" in found


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_rejects_a_reply_of_another_kind(kind):
    request, _ = GOOD[kind]
    other = "profile" if kind != "profile" else "end"
    _, reply = _reply(other)
    found = schemas.reply_violation(request, NONCE, reply, 0)
    assert found and f"answers a '{other}' request" in found


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_rejects_an_unknown_key_in_a_reply_of_each_kind(kind):
    request, reply = _reply(kind, padding="x" * 100)
    assert "unknown key 'padding'" in schemas.reply_violation(request, NONCE, reply, 0)


@pytest.mark.parametrize("kind", ["end", "steady", "profile", "load", "prebuilt"])
def test_rejects_tensors_on_a_kind_that_carries_none(kind):
    request, reply = _reply(kind)
    assert "carries none" in schemas.reply_violation(request, NONCE, reply, 1)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("span_ms", [0.1, [1.0], 0.1], "span_ms[1] is a list, not a number"),
        ("span_ms", [0.1, float("nan"), 0.1], "span_ms[1] is nan, not a finite number"),
        ("span_ms", [0.1, -1.0, 0.1], "span_ms[1] is -1.0, outside"),
        ("span_ms", [0.1, True, 0.1], "span_ms[1] is a bool, not a number"),
        ("span_ms", [0.1, 0.1], "span_ms has 2 items, the request asked for 3"),
        ("wall_ms", "3", "wall_ms is a string, not a number"),
        ("harness_ms", {"prepare": math.inf}, "harness_ms.prepare is inf, not a finite number"),
    ],
)
def test_rejects_a_malformed_batch_reply_naming_the_first_violation(field, value, words):
    request, reply = _reply("end", **{field: value})
    found = schemas.reply_violation(request, NONCE, reply, 0)
    assert found and words in found, found


def test_rejects_a_batch_reply_without_its_spans():
    request, reply = _reply("end")
    del reply["span_ms"]
    assert schemas.reply_violation(request, NONCE, reply, 0) == "end reply has no 'span_ms'"


def _step(op: str, **body) -> tuple[dict, dict]:
    return {"op": op}, {"op": op, "nonce": NONCE, **body}


def test_the_steps_of_a_timed_batch_are_read_in_their_own_schemas():
    """A batch is an exchange (kernelproof.measure.batch): time and next are answered by a closed
    window, project by that call's fingerprints; each carries the nonce of the message it answers."""
    for op in ("time", "next"):
        request, step = _step(op, step="closed", index=4)
        assert schemas.reply_violation(request, NONCE, step, 0) is None
        assert "nonce" in schemas.reply_violation(request, NONCE + 1, step, 0)
    request, step = _step("project", step="fingerprint", index=0, fingerprints=[[1.0, 2.0]])
    assert schemas.reply_violation(request, NONCE, step, 0) is None


@pytest.mark.parametrize(
    ("op", "body", "words"),
    [
        ("time", {"step": "fingerprint", "index": 0}, "time step.step is 'fingerprint', not one of"),
        ("next", {"step": "closed"}, "next step has no 'index'"),
        ("next", {"step": "closed", "index": -1}, "next step.index is -1, outside"),
        (
            "project",
            {"step": "fingerprint", "index": 0, "fingerprints": [[1.0]]},
            "fingerprints[0] has 1 items",
        ),
        ("project", {"step": "fingerprint", "index": 0, "fingerprints": [], "span_ms": [0.0]}, "unknown key"),
    ],
)
def test_rejects_a_malformed_step_naming_the_first_violation(op, body, words):
    request, step = _step(op, **body)
    found = schemas.reply_violation(request, NONCE, step, 0)
    assert found and words in found, found


def test_a_step_carries_no_tensors():
    request, step = _step("next", step="closed", index=1)
    assert "carries 1 tensors" in schemas.reply_violation(request, NONCE, step, 1)


def test_rejects_kernel_rows_of_the_wrong_arity():
    request, reply = _reply("profile", kernels=[["k", 0.5]])
    assert "kernels[0] has 2 items, not 5" in schemas.reply_violation(request, NONCE, reply, 0)


def test_a_failed_reply_is_read_in_one_schema_and_carries_no_tensors():
    request = {"op": "time", "seeds": SEEDS}
    failed = {
        "ok": False,
        "op": "time",
        "nonce": NONCE,
        "code": "runtime_error",
        "message": "m",
        "detail": "",
    }
    assert schemas.reply_violation(request, NONCE, failed, 0) is None
    assert "carries 1 tensors" in schemas.reply_violation(request, NONCE, failed, 1)
    unknown = {**failed, "code": "all_good"}
    assert "code is 'all_good', not one of" in schemas.reply_violation(request, NONCE, unknown, 0)
    assert "ok is a string" in schemas.reply_violation(request, NONCE, {**failed, "ok": "yes"}, 0)


PARENTS_CODES = sorted({c.value for c in schemas.ReasonCode} - {c.value for c in schemas.SOLUTION_FAILURES})


@pytest.mark.parametrize("code", PARENTS_CODES)
def test_a_candidates_failed_reply_naming_a_code_only_the_parent_sets_is_a_violation(code):
    """machine_busy, environment, too_large, task_error, internal_error, timeout, ...: the parent
    sets them from its own facts; a candidate's worker naming one broke the protocol (I9, I10)."""
    failed = {"ok": False, "op": "run", "nonce": NONCE, "code": code, "message": "m", "detail": ""}
    found = schemas.reply_violation({"op": "run"}, NONCE, failed, 0)
    assert found is not None and f"names the code {code!r}, which only the parent sets" in found
    assert schemas.reply_violation({"op": "run"}, NONCE, failed, 0, candidate=False) is None  # a baseline's


@pytest.mark.parametrize("code", sorted(c.value for c in schemas.SOLUTION_FAILURES))
def test_a_candidates_failed_reply_may_name_the_solutions_own_failures(code):
    failed = {"ok": False, "op": "run", "nonce": NONCE, "code": code, "message": "m", "detail": ""}
    assert schemas.reply_violation({"op": "run"}, NONCE, failed, 0) is None


def test_the_solutions_own_failures_excuse_nothing():
    excuses = {"machine_busy", "environment", "too_large", "task_error", "internal_error", "timeout"}
    excuses |= {"degenerate_task", "protocol_violation"}
    assert not excuses & {c.value for c in schemas.SOLUTION_FAILURES}


def test_the_hello_is_a_message_of_its_own_kind():
    hello = {"op": "hello", "pid": 7, "python": "3.11.7", "torch": "2.13", "cuda_available": False}
    assert schemas.message_violation({**hello, "triton": None}, "hello") is None
    assert "a hello message was due" in schemas.message_violation({**hello, "op": "time"}, "hello")
    assert "pid is a string" in schemas.message_violation({**hello, "pid": "7"}, "hello")


def test_a_new_kind_is_one_entry_in_the_table():
    """What another message needs (a worker's build request, say): an entry, nothing else."""
    kinds = dict(schemas.REPLIES)
    kinds["echo"] = schemas.Kind({"text": schemas.text(100)})
    request, reply = {"op": "echo"}, {"ok": True, "op": "echo", "nonce": NONCE, "text": "hi"}
    original = schemas.REPLIES
    try:
        schemas.REPLIES = kinds
        assert schemas.reply_violation(request, NONCE, reply, 0) is None
        assert schemas.reply_violation(request, NONCE, {**reply, "text": 1}, 0) == (
            "echo reply.text is an integer, not a string"
        )
    finally:
        schemas.REPLIES = original


def test_rejects_a_back_to_back_reply_without_a_fingerprint_for_every_call():
    request, reply = _reply("steady", fingerprints=[[[1.0, 2.0]]])
    found = schemas.reply_violation(request, NONCE, reply, 0)
    assert found and "fingerprints has 1 items, the request asked for 2" in found
    request, reply = _reply("steady", fingerprints=[[1.0, 2.0], [1.5, 2.5]])  # a pair, not a list of pairs
    assert schemas.reply_violation(request, NONCE, reply, 0)
