"""Reason codes on the wire: the worker sends ReasonCode values, the parent reads them in one place.

A failed reply is built by ``replies.failure`` with a ``ReasonCode``; the parent reads it with
``replies.reason_of``, and a code it does not know means the worker is broken or forged: that
worker is killed and counted as crashed, as a dead worker is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from kernelproof.host.process import SpawnSpec, WorkerDied, WorkerProcess
from kernelproof.measure import accounting, session
from kernelproof.verdict import ReasonCode

WORKER = Path(__file__).resolve().parents[2] / "kernelproof" / "worker"


def test_every_failed_reply_of_the_worker_is_built_with_a_reason_code():
    """No reply dict with ``"ok": False`` outside replies.failure, and no bare code strings."""
    codes = {c.value for c in ReasonCode}
    offenders = []
    for path in WORKER.rglob("*.py"):
        if path.name == "replies.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                pairs = zip(node.keys, node.values)
                if any(
                    isinstance(k, ast.Constant)
                    and k.value == "ok"
                    and isinstance(v, ast.Constant)
                    and v.value is False
                    for k, v in pairs
                ):
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value in codes | {"internal"}:
                offenders.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert offenders == []


def test_an_unknown_request_is_an_internal_error_and_a_baseline_worker_goes_on():
    worker = WorkerProcess(SpawnSpec("baseline", "cpu"))
    try:
        reply, _ = worker.request({"op": "no_such_op"}, None, 60)
        assert reply["code"] == "internal_error" and "no_such_op" in reply["message"]
        assert worker.finish(timeout_s=30) == 0
    finally:
        worker.close()


def test_a_candidates_worker_naming_internal_error_broke_the_protocol():
    """In the candidate's process an ``internal_error`` reply cannot be told from one the solution
    wrote: the parent sets that code from its own facts only."""
    worker = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        with pytest.raises(WorkerDied) as died:
            worker.request({"op": "no_such_op"}, None, 60)
        assert died.value.code == "protocol_violation" and "'internal_error'" in died.value.message
    finally:
        worker.close()


def test_no_reply_claims_the_machine_lacks_anything():
    """``environment`` is the parent's alone, from the builder's record of real CUDA build requests:
    no worker label carries a claim of it. A failed reply with a ``lacking`` key breaks the protocol,
    a worker's ``environment`` code is refused from a candidate, and a runtime_error stays one."""
    from kernelproof.wire import schemas
    from kernelproof.wire.replies import failure, reason_of

    sent = failure(ReasonCode.RUNTIME_ERROR, "forward: this machine has no GPU driver", "tb")
    assert "lacking" not in sent
    labelled = {**sent, "lacking": True, "op": "run", "nonce": 7}
    assert "unknown key 'lacking'" in schemas.reply_violation({"op": "run"}, 7, labelled, 0)
    assert "unknown key 'lacking'" in schemas.reply_violation({"op": "run"}, 7, labelled, 0, candidate=False)
    assert reason_of({**sent, "lacking": True}).code is ReasonCode.RUNTIME_ERROR
    claimed = {**failure(ReasonCode.ENVIRONMENT, "no driver"), "op": "run", "nonce": 7}
    assert claimed["code"] == "environment"
    assert "only the parent sets" in schemas.reply_violation({"op": "run"}, 7, claimed, 0)


class _Worker:
    """Stands in for a WorkerProcess: records kills, answers every request with ``reply``."""

    def __init__(self, reply=None):
        self.killed = False
        self.reply = reply

    def kill(self):
        self.killed = True

    def request(self, *args, **kwargs):
        return self.reply, []


def test_the_parent_reads_a_known_code_and_names_a_baseline():
    prog = session.Program("eager", _Worker())
    reason = session._reason_from({"ok": False, "code": "crash", "message": "gone"}, prog)
    assert reason.code is ReasonCode.CRASH and reason.message == "baseline eager: gone"


def test_an_unknown_code_from_the_candidate_is_a_crash_of_its_worker():
    prog = session.Program("candidate", _Worker())
    with pytest.raises(WorkerDied) as died:
        session._reason_from({"ok": False, "code": "internal", "message": "old worker"}, prog)
    assert died.value.code == "crash" and "unknown reason code 'internal'" in died.value.message
    assert prog.worker.killed


def test_a_baseline_with_an_unknown_code_is_killed_and_dropped():
    prog = session.Program("eager", _Worker())
    note = session._dropped({"ok": False, "code": "made_up", "message": "?"}, prog)
    assert prog.worker.killed and "unknown reason code" in note


class _CudaContext:
    device = torch.device("cuda")

    def input_spec(self):
        return {}, []


def test_a_failed_profile_is_a_note_with_its_code_and_an_unknown_code_a_crash():
    known = _Worker({"ok": False, "code": "harness_hooked", "message": "a mode"})
    coverage = accounting.account(known, _CudaContext(), 1, (), "custom", 10)
    assert coverage.custom_fraction is None and "profiling failed (harness_hooked): a mode" in coverage.note
    unknown = _Worker({"ok": False, "code": "bogus", "message": "?"})
    with pytest.raises(WorkerDied):
        accounting.account(unknown, _CudaContext(), 1, (), "custom", 10)
    assert unknown.killed


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB"), "crash"),
        (ValueError("bad"), "missing_result"),
    ],
)
def test_a_case_whose_inputs_cannot_be_placed_is_a_crash_when_the_device_is_full(monkeypatch, raised, code):
    """On an H100, KernelBench level1/94_MSELoss beside three other evaluations: the worker could
    not copy its two 4 GiB inputs onto the device. Out of memory is a crash, which the parent's
    facts weigh (run again alone: kernelproof/blame.py); any other failure to place them is a
    result owed and not delivered."""
    import types

    from kernelproof.worker import case_runs

    def fail(*_args, **_kwargs):
        raise raised

    monkeypatch.setattr(case_runs, "_received", fail)
    state = types.SimpleNamespace(precision="fp32", device=torch.device("cpu"), keep=[])
    header = {"args": [{"t": 0}], "repeats": 2}
    reply, tensors = case_runs.run(state, header, [torch.zeros(4)])
    assert reply["ok"] is False and reply["code"] == code and reply["handoff"] == "failed"
    assert "could not place the case's inputs on cpu" in reply["message"] and tensors == []
