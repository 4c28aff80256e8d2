from __future__ import annotations

import threading

from agent_fakes import make_verdict, solution

from kernelproof.agent.memory import Memory
from kernelproof.agent.records import Candidate, Completion, Message, Prompt, Rejection

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
