from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from agent_fakes import make_verdict, solution

from kernelproof.agent.agent_errors import ReplayError
from kernelproof.agent.call_records import Candidate, Completion, Message, Prompt, Rejection
from kernelproof.agent.memory import Memory, UnverifiedRowWarning

PROMPT = Prompt("sys", (Message("user", "go"),))


def new_run(mem: Memory, run_id: str = "r1") -> None:
    mem.create_run(
        run_id=run_id,
        task_path="t.py",
        task_sha256="a" * 64,
        model="openai:m",
        strategy="refine",
        out_dir="/tmp/x",
        options_json="{}",
    )


def test_uses_wal_mode_and_a_connection_per_thread(tmp_path):
    mem = Memory(tmp_path / "kp.db")
    assert mem.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    seen = []
    t = threading.Thread(target=lambda: seen.append(mem.conn))
    t.start()
    t.join()
    assert seen[0] is not mem.conn


def test_answered_calls_form_the_replay_log_and_failed_ones_do_not(tmp_path):
    mem = Memory(tmp_path / "kp.db")
    new_run(mem)
    mem.record_call(
        "r1", 0, 0, "draft", PROMPT, Completion("answer", 10, 5, "stop", "m", 2, 0.5), cost_usd=0.001
    )
    mem.record_call("r1", 0, 1, "draft", PROMPT, None, cost_usd=None, error="503 after 6 attempts")
    log = mem.logged_calls("r1")
    assert list(log) == [(0, 0)]
    entry = log[(0, 0)]
    assert (entry.text, entry.input_tokens, entry.output_tokens, entry.cost_usd) == ("answer", 10, 5, 0.001)
    assert entry.prompt_hash == PROMPT.digest()
    calls = mem.calls("r1")
    assert calls[1]["error"] == "503 after 6 attempts" and calls[0]["attempts"] == 2


def test_candidates_come_back_with_their_verdicts(tmp_path):
    mem = Memory(tmp_path / "kp.db")
    new_run(mem)
    src = solution("SPEED: 2.5")
    good = Candidate(
        "t000s00", 0, 0, "draft", (), "", "resp", "a.py", src, "h1", verdict=make_verdict(src, "a.py")
    )
    bad = Candidate(
        "t000s01",
        0,
        1,
        "draft",
        ("t000s00",),
        "idea",
        "resp",
        "",
        "",
        "",
        rejection=Rejection("malformed_answer", "No code.", "d"),
    )
    mem.record_candidate("r1", good)
    mem.record_candidate("r1", bad)
    back = mem.candidates("r1")
    assert back[0].verdict.speedup["best"].median == 2.5 and back[0].verdict.passed
    assert back[1].rejection == Rejection("malformed_answer", "No code.", "d") and back[1].parents == (
        "t000s00",
    )
    row = mem.conn.execute(
        "SELECT outcome, score_low FROM agent_candidates WHERE candidate_id='t000s00'"
    ).fetchone()
    assert row["outcome"] == "pass" and abs(row["score_low"] - 2.425) < 1e-9


def test_tables_live_beside_the_verdict_store(tmp_path):
    from kernelproof.store import Store

    db = tmp_path / "kp.db"
    Store(db)
    Memory(db)
    names = {r[0] for r in Memory(db).conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"verdicts", "agent_runs", "agent_calls", "agent_candidates"} <= names


# --- rows changed outside kernelproof (issue 15) and non-finite numbers (issue 19) -------------


def edit(db, sql: str) -> None:
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()


def test_an_edited_candidate_row_is_not_reused_and_is_reported(tmp_path):
    db = tmp_path / "kp.db"
    mem = Memory(db)
    new_run(mem)
    for i, marker in enumerate(["WRONG", "SPEED: 1.5"]):
        src = solution(marker)
        mem.record_candidate(
            "r1",
            Candidate(
                f"t000s0{i}", 0, i, "draft", (), "", "", "a.py", src, "h", verdict=make_verdict(src, "a.py")
            ),
        )
    edit(db, "UPDATE agent_candidates SET outcome = 'pass', verdict_json = replace(verdict_json, '\"fail\"', '\"pass\"') "
             "WHERE candidate_id = 't000s00'")  # fmt: skip
    with pytest.warns(UnverifiedRowWarning, match="candidate_id=t000s00: its signature does not match"):
        stored = Memory(db).stored_candidates("r1")
    assert list(stored) == ["t000s01"]


def test_an_edited_call_is_asked_again_rather_than_served_from_the_log(tmp_path):
    db = tmp_path / "kp.db"
    mem = Memory(db)
    new_run(mem)
    for sample in (0, 1):
        mem.record_call(
            "r1", 0, sample, "draft", PROMPT, Completion("answer", 10, 5, "stop", "m"), cost_usd=0.01
        )
    edit(db, "UPDATE agent_calls SET response = 'an answer planted later' WHERE sample = 1")
    fresh = Memory(db)
    with pytest.warns(UnverifiedRowWarning, match="turn=0, sample=1"):
        assert list(fresh.logged_calls("r1")) == [(0, 0)]
    assert fresh.unverified and "sample=1" in fresh.unverified[0]


def test_an_edited_run_record_cannot_be_resumed(tmp_path):
    db = tmp_path / "kp.db"
    new_run(Memory(db))
    edit(db, "UPDATE agent_runs SET options_json = '{\"limits\": {}}'")
    with pytest.warns(UnverifiedRowWarning), pytest.raises(ReplayError, match="does not verify"):
        Memory(db).run("r1")


def test_unsigned_rows_of_an_older_store_are_not_used(tmp_path):
    db = tmp_path / "kp.db"
    mem = Memory(db)
    new_run(mem)
    mem.record_call("r1", 0, 0, "draft", PROMPT, Completion("answer", 10, 5, "stop", "m"), cost_usd=None)
    edit(db, "UPDATE agent_calls SET hmac = NULL")
    with pytest.warns(UnverifiedRowWarning, match="unsigned"):
        assert Memory(db).logged_calls("r1") == {}


def test_a_planted_trigger_gets_the_agents_tables_refused(tmp_path):
    from kernelproof.errors import StoreError

    db = tmp_path / "kp.db"
    new_run(Memory(db))
    edit(
        db,
        "CREATE TRIGGER t AFTER INSERT ON agent_candidates BEGIN UPDATE agent_candidates SET outcome = 'pass'; END",
    )
    with pytest.raises(StoreError, match="trigger 't'"):
        Memory(db)


def test_a_candidate_with_an_infinite_error_comes_back_with_it_and_its_feedback_formats(tmp_path):
    import dataclasses
    import math

    from kernelproof.agent.feedback import describe_verdict

    mem = Memory(tmp_path / "kp.db")
    new_run(mem)
    src = solution("WRONG")
    v = make_verdict(src, "a.py")
    v = dataclasses.replace(v, correctness=dataclasses.replace(v.correctness, worst_rel_norm_err=math.inf))
    mem.record_candidate("r1", Candidate("t000s00", 0, 0, "draft", (), "", "", "a.py", src, "h", verdict=v))
    (back,) = Memory(tmp_path / "kp.db").candidates("r1")
    assert back.verdict.correctness.worst_rel_norm_err == math.inf
    assert "worst normwise error inf" in describe_verdict(back.verdict)


def test_resume_evaluates_again_a_candidate_whose_row_was_edited(serve, task_file, tmp_path):
    from agent_fakes import FakeEvaluator, answer
    from agent_loopback import Reply

    from kernelproof.agent import AgentOptions, Limits, SearchSettings, optimize, parse_model
    from kernelproof.options import EvalOptions

    opts = AgentOptions(
        eval=EvalOptions(device="cpu"),
        out_dir=str(tmp_path / "run"),
        db=str(tmp_path / "kp.db"),
        plot=False,
        search=SearchSettings(window=20),
        limits=Limits(max_candidates=2),
    )
    markers = ["WRONG", "SPEED: 1.5"]

    def by_turn(req):
        turn = sum(m["role"] == "assistant" for m in req.body["messages"])
        return Reply(answer(markers[turn % 2], tag=str(turn)))

    server = serve(by_turn)
    model = parse_model("openai:loopback-model", base_url=server.openai_url, timeout_s=5, api_key="k")
    done = optimize(task_file, model, opts, evaluator=FakeEvaluator())
    edit(tmp_path / "kp.db", "UPDATE agent_candidates SET outcome = 'pass' WHERE candidate_id = 't000s00'")
    ev = FakeEvaluator()
    with pytest.warns(UnverifiedRowWarning, match="t000s00"):
        optimize(task_file, model, opts, evaluator=ev, resume=done.run_id)
    assert [Path(p).stem for p in ev.evaluated] == ["t000s00"]
