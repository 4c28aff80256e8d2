from __future__ import annotations

from kernelproof.agent.agent_errors import BackendError
from kernelproof.agent.call_records import Completion, LoggedCall, Message, Prompt, Request
from kernelproof.agent.caller import Caller, Slot
from kernelproof.agent.memory import Memory
from kernelproof.agent.replay import ReplayLog, ReplayWriter

PROMPT = Prompt("sys", (Message("user", "go"),))


class Counting:
    name = "fake:model"

    def __init__(self, fail_on: set[int] = frozenset()):
        self.calls = 0
        self.fail_on = fail_on

    def complete(self, prompt, max_output_tokens):
        self.calls += 1
        if prompt.messages[0].content in self.fail_on:
            raise BackendError("503", retryable=True, status=503, attempts=6)
        return Completion(f"answer to {prompt.messages[0].content}", 7, 3, "stop", "model", 1, 0.01)


def make(tmp_path, live, log=None, origin="resumed"):
    mem = Memory(tmp_path / "kp.db")
    mem.create_run(
        run_id="r",
        task_path="t",
        task_sha256="s",
        model="m",
        strategy="refine",
        out_dir="o",
        options_json="{}",
    )
    writer = ReplayWriter(tmp_path / "replay.jsonl", {"run_id": "r"})
    return Caller(
        "r", mem, writer, live, log, log_origin=origin, workers=4, cost=lambda i, o: (i + o) * 1e-6
    ), mem


def slot(sample: int, text: str, logged=None) -> Slot:
    return Slot(sample, Request("draft", Prompt("sys", (Message("user", text),))), 100, logged)


def test_logged_answers_are_served_and_the_rest_called_concurrently(tmp_path):
    live = Counting()
    logged = LoggedCall(0, 0, "draft", "other-hash", "from the log", 5, 5, 0.0, "stop", "m")
    caller, mem = make(tmp_path, live, ReplayLog("r", {(0, 0): logged}))
    out = caller.run(0, [slot(0, "a", logged), slot(1, "b"), slot(2, "c")])
    assert [o.completion.text for o in out] == ["from the log", "answer to b", "answer to c"]
    assert [o.origin for o in out] == ["resumed", "live", "live"]
    assert live.calls == 2 and caller.live_calls == 2 and caller.diverged == 1
    assert sorted(mem.logged_calls("r")) == [(0, 1), (0, 2)]  # a resumed run's log row already exists
    assert len(ReplayLog.load(tmp_path).calls) == 2


def test_a_failed_call_is_recorded_and_returned_as_a_value(tmp_path):
    caller, mem = make(tmp_path, Counting(fail_on={"b"}))
    out = caller.run(3, [slot(0, "a"), slot(1, "b")])
    assert out[1].completion is None and out[1].error.retryable
    assert mem.calls("r")[1]["error"] == "503"


def test_replay_only_never_calls_and_records_what_it_served(tmp_path):
    logged = LoggedCall(0, 0, "draft", PROMPT.digest(), "served", 5, 5, None, "stop", "m")
    caller, mem = make(tmp_path, None, ReplayLog("old", {(0, 0): logged}), origin="replayed")
    out = caller.run(0, [slot(0, "go", logged), slot(1, "missing")])
    assert out[0].completion.text == "served" and out[0].origin == "replayed"
    assert out[1].completion is None and "not in the replay log" in str(out[1].error)
    assert mem.calls("r")[0]["origin"] == "replayed" and caller.diverged == 0
