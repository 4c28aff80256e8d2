"""The SQLite store: every verdict kept, concurrent writers never lose a row, JSON round-trips.

Tampering (tests/store/test_store_tamper.py) and what is served when (tests/store/test_store_serving.py)
have files of their own."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp

from kernelproof.store import Store
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Speedup, Stored, Verdict, from_json


def _verdict(i: int) -> Verdict:
    return Verdict(
        verdict=Outcome.PASS if i % 2 else Outcome.FAIL,
        reasons=() if i % 2 else (Reason(ReasonCode.MISMATCH, "values differ"),),
        task=FileRef(f"suite/t{i % 3}.py", "a" * 64),
        solution=FileRef(f"sol{i}.py", "b" * 64, "triton"),
        correctness=None,
        timing=None,
        speedup={"eager": Speedup("eager", 1.5, (1.4, 1.6), 1.5)},
        roofline=None,
        coverage=None,
        environment={"device": "cpu"},
        reward=0.4,
        created_at="2026-11-30T00:00:00+00:00",
    )


def _writer(path: str, start: int, n: int) -> None:
    s = Store(path)
    for i in range(start, start + n):
        s.put(f"k{i}", _verdict(i))


def test_concurrent_writers_from_several_processes_lose_no_row(tmp_path):
    path = str(tmp_path / "r.sqlite")
    Store(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, k * 50, 50)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert Store(path).count() == 200


def test_a_stored_verdict_comes_back_as_the_same_verdict_marked_stored(tmp_path):
    s = Store(tmp_path / "r.sqlite")
    v = dataclasses.replace(_verdict(1), elapsed_s=12.5)
    s.put("key", v, limits={"timeout_s": 600.0})
    back = s.get("key")
    assert back.stored == Stored(at=v.created_at, elapsed_s_then=12.5, limits_then={"timeout_s": 600.0})
    assert back.elapsed_s < 12.5  # the lookup's own time, not the evaluation's
    assert dataclasses.replace(back, stored=None, elapsed_s=12.5) == v
    assert from_json(v.to_json()) == v
    assert v.to_json()["stored"] is None and back.to_json()["stored"]["elapsed_s_then"] == 12.5


def test_query_filters_by_outcome_code_and_path(tmp_path):
    s = Store(tmp_path / "r.sqlite")
    for i in range(6):
        s.put(f"k{i}", _verdict(i))
    assert len(s.query(outcome="pass")) == 3
    assert len(s.query(code="mismatch")) == 3
    assert len(s.query(task="t0")) == 2
    assert s.query(limit=1)[0]["solution"]["path"] == "sol5.py"


def test_a_stored_verdict_is_served_only_to_the_code_that_judged_it(monkeypatch):
    """A fix to kernelproof must not be hidden by verdicts its older code stored."""
    import kernelproof.api as api
    from kernelproof.options import EvalOptions

    task = "tests/data/tasks/scale_relu.py"
    sol = "tests/data/solutions/scale_relu_triton.py"
    opts = EvalOptions(device="cpu")
    before = api.evaluation_key(task, sol, opts, "cpu")
    assert api.evaluation_key(task, sol, opts, "cpu") == before
    monkeypatch.setattr(api, "this_source", lambda: "another checkout")
    assert api.evaluation_key(task, sol, opts, "cpu") != before
